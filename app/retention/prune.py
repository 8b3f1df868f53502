"""One retention pass over a lake: raw samples, findings, the alert ledger (`[retention]`).

`gpuledger prune` and each `gpuledger run` round call `prune_lake`. Raw samples and findings
are judged against the end of each cluster's data (the lake's "now"); the alert ledger, a
record of deliveries, against the wall clock (`clock`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.retention.settings import RetentionConfig
from warehouse.lake import Lake

if TYPE_CHECKING:
    from warehouse.attribution import AttributionConfig
    from warehouse.retention import PrunePlan

__all__ = ["PruneOutcome", "prune_lake"]


@dataclass(frozen=True, slots=True)
class PruneOutcome:
    """What a pass deleted (with dry_run: would delete); None where that part is switched off."""

    raw: PrunePlan | None
    findings: int | None
    messages: int | None
    notices: int | None


def _data_end(lake: Lake) -> dict[str, dt.datetime]:
    """The end of each cluster's data (sql/views/data_extent.sql), where marts exist."""
    if not lake.table_dir("gpu_job_buckets").is_dir() and not lake.table_dir("jobs").is_dir():
        return {}
    con = lake.connect()
    try:
        return dict(con.sql("SELECT cluster, data_end FROM data_extent").fetchall())
    finally:
        con.close()


def prune_lake(
    lake: Lake,
    attribution: AttributionConfig,
    retention: RetentionConfig,
    *,
    dry_run: bool = False,
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> PruneOutcome:
    """Apply `retention` to `lake` under its writer lock (no attribute or detect meanwhile).

    `attribution`: the config the marts were built with (a day built with another is not up
    to date: its samples stay).
    """
    from app.alerts.ledger import Ledger
    from detectors.findings import prune_findings, read_findings
    from warehouse import state_files
    from warehouse.retention import prune_raw_samples

    raw = findings = messages = notices = None
    with lake.writer("prune"):
        if retention.raw_days > 0 and lake.table_dir("gpu_samples").is_dir():
            raw = prune_raw_samples(
                lake.root,
                attribution.values(),
                retention.raw_days,
                dry_run=dry_run,
                warehouse=lake.config(),
            )
        if retention.findings_days > 0 and lake.table_dir("findings").is_dir():
            findings = prune_findings(
                lake, _data_end(lake), retention.findings_days, dry_run=dry_run
            )
        ledger_path = lake.state_path(state_files.ALERTS)
        if retention.alert_ledger_days > 0 and ledger_path.exists():
            stored = read_findings(lake)
            live = set(
                zip(
                    stored.column("cluster").to_pylist(),
                    stored.column("finding_id").to_pylist(),
                    strict=True,
                )
            )
            ledger = Ledger.open(ledger_path)
            try:
                cutoff = clock() - dt.timedelta(days=retention.alert_ledger_days)
                messages, notices = ledger.forget_before(cutoff, live, dry_run=dry_run)
            finally:
                ledger.close()
    return PruneOutcome(raw, findings, messages, notices)
