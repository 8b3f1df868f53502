"""`gpuledger detect`: run every finding producer over the lake and upsert the findings.

Producers are a list (`FINDING_PRODUCERS`): today the rules of `detectors.rules`; the
predictive models plug in beside them with one more entry. Each takes the connection and the
run's window and returns rows in the `findings` schema; this command merges them and writes
them once, so a finding found again keeps its id and first detection time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.errors import reports_errors
from app.options import Timestamp, lake_option

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

__all__ = [
    "FINDING_PRODUCERS",
    "DetectOutcome",
    "FindingProducer",
    "command",
    "detect_once",
    "rule_findings",
]

# (connection, now, since) -> a table in the `findings` schema (warehouse.schema FINDINGS).
# `since` may only narrow which subjects a producer examines: each finding's figures come from
# all the lake's data (a job's whole run, a user's whole 7 days), since a finding found again
# replaces the stored one under its id. `detect_once` then keeps the findings seen since then.
FindingProducer = Callable[["duckdb.DuckDBPyConnection", dt.datetime, dt.datetime], "pa.Table"]


def rule_findings(con: duckdb.DuckDBPyConnection, now: dt.datetime, since: dt.datetime) -> pa.Table:
    """The waste and health rules with their default thresholds, over all the data (their
    windows would cut a job's run or a user's 7 days at `since`)."""
    from detectors.rules import RuleConfig, run_rules

    return run_rules(con, RuleConfig(), now)


TOP_FINDINGS = 5  # how many findings the summary spells out


def bottleneck_producer(
    con: duckdb.DuckDBPyConnection, now: dt.datetime, since: dt.datetime
) -> pa.Table:
    """Jobs whose bottleneck (input-, memory-, communication-bound, underused) has a fix (every
    job: one started before `since` may still run after it)."""
    from detectors.bottleneck_findings import bottleneck_findings
    from detectors.rules.base import EPOCH

    return bottleneck_findings(con, now, EPOCH)


# Every producer's rows are merged and written once per run.
FINDING_PRODUCERS: list[FindingProducer] = [rule_findings, bottleneck_producer]


@dataclass(frozen=True, slots=True)
class DetectOutcome:
    """What one detect run found and stored."""

    findings: pa.Table
    new: int
    updated: int
    recommendations: int
    unchanged: int = 0


def detect_once(
    lake: Path, now: dt.datetime, since: dt.datetime | None = None, *, recommend: bool = True
) -> DetectOutcome:
    """Run every finding producer, upsert the findings, then replay the recommendations.

    With `since`, only findings about problems seen at or after it (their span ends then or
    later, or is open) are stored; their figures come from all the data, so a finding found
    whole before is stored again as it was, not with the figures of a shorter window.
    """
    import pyarrow as pa

    from detectors.findings import FINDINGS_SCHEMA, seen_since, write_findings
    from detectors.models import producer as model_producer
    from detectors.rules.base import EPOCH
    from warehouse.connection import connect
    from warehouse.schema import TABLES
    from warehouse.writer import conform

    con = connect(lake, require=("job_usage",))
    con.execute("SET enable_progress_bar = false")  # keep the summary the only output
    try:
        # the predictive models (trained by `gpuledger train`; none yet: they add nothing)
        producers = [*FINDING_PRODUCERS, model_producer(lake)]
        tables = [produce(con, now, since or EPOCH) for produce in producers]
    finally:
        con.close()
    # Each producer's rows are checked against the contract before they are merged.
    findings = pa.concat_tables(
        [FINDINGS_SCHEMA.empty_table()] + [conform(TABLES["findings"], table) for table in tables]
    )
    if since is not None:
        findings = seen_since(findings, since)
    result = write_findings(lake, findings)
    stored = 0
    if recommend:
        from detectors.recommend import RecommendConfig
        from detectors.recommend import recommend as replay
        from detectors.recommend.store import write_recommendations

        # a fresh connection: drain_node reads the critical findings just written
        con = connect(lake, require=("job_usage",))
        con.execute("SET enable_progress_bar = false")
        try:
            recs = replay(con, RecommendConfig(), now)
            clusters = [c for (c,) in con.execute("SELECT DISTINCT cluster FROM jobs").fetchall()]
        finally:
            con.close()
        stored = write_recommendations(lake, recs, clusters)
    return DetectOutcome(findings, result.new, result.updated, stored, result.unchanged)


def _summary(findings: pa.Table) -> list[str]:
    import polars as pl

    frame = pl.from_arrow(findings)
    assert isinstance(frame, pl.DataFrame)
    if frame.is_empty():
        return ["No findings."]
    per = (
        frame.group_by("detector")
        .agg(
            pl.len().alias("findings"),
            (pl.col("severity") == "critical").sum().alias("critical"),
            pl.col("gpu_h_at_stake").sum().alias("gpu_h"),
        )
        .sort("gpu_h", "detector", descending=[True, False])
    )
    lines = [f"{'detector':<22} {'findings':>8} {'critical':>8} {'GPU-h at stake':>15}"]
    for row in per.iter_rows(named=True):
        lines.append(
            f"{row['detector']:<22} {row['findings']:>8} {row['critical']:>8} "
            f"{row['gpu_h'] or 0.0:>15,.1f}"
        )
    top = frame.sort("gpu_h_at_stake", "finding_id", descending=[True, False], nulls_last=True)
    lines.append("")
    lines.append(f"Top {min(TOP_FINDINGS, len(frame))} by GPU-hours at stake:")
    for row in top.head(TOP_FINDINGS).iter_rows(named=True):
        lines.append(f"  [{row['severity']}] {row['message']}")
    return lines


@click.command("detect")
@lake_option
@click.option(
    "--since",
    type=Timestamp(),
    default=None,
    help="Store only findings about problems seen from this time on (ISO, UTC); their figures "
    "still come from all the data: a job's whole run, a user's whole 7 days [default: all].",
)
@click.option(
    "--now",
    type=Timestamp(),
    default=None,
    help="Judge as of this time: stamps detected_ts and ends windows such as a user's last "
    "7 days [default: the current time; windows never run past the lake's latest data].",
)
@click.option("--quiet", "-q", is_flag=True, help="Print only the one-line total.")
@reports_errors
def command(lake: Path, since: dt.datetime | None, now: dt.datetime | None, quiet: bool) -> None:
    """Find waste and failing hardware in the lake and store the findings.

    \b
    Rules (thresholds documented in the README, "Detectors"):
      idle_job, memory_hold, hung_job         jobs whose GPUs do nothing (or spin on a stall)
      partial_idle, straggler_gpu             multi-GPU jobs with idle or lagging GPUs
      low_efficiency_user                     ratio AND GPU-hours AND top-N over 7 days
      overallocated, time_limit_excess        MIG candidates; limits far above run time
      power_cap_candidate                     low activity at high power, kWh a cap saves
      throttling, xid_hardware, ecc_dbe,      hardware health (NVIDIA's XID classes,
      row_remap_failure, row_remap_pending    clock-event bits, ECC, row remapping)
      gpu_without_job, job_without_data       attribution self-check
      failed_after_hw_event, lost_gpu_hours,  resilience; Young/Daly checkpoint advice
      checkpoint_interval
      stranded_gpus                           CPU/memory requests that strand a node's GPUs
      bottleneck                              input-, memory-, communication-bound or
                                              underused jobs, with the fix (`gpuledger job`)

    \b
    Then the scheduler-policy recommendations are replayed from the lake's history
    (idle-cancel policy, time limits, GPU caps, fair-share, billing weights, MIG packing,
    draining nodes, power caps) into the `recommendations` table, each with its evidence and
    the exact sacctmgr/scontrol/slurm.conf lines or Kueue YAML to apply.

    \b
    Findings go to the lake's `findings` table: a problem found again keeps its finding_id
    and first detected_ts, so running detect twice stores nothing twice. With --since, the
    findings about problems that ended before it are left as stored; the others are computed
    over all the data, so a finding is never rewritten from a shorter window. Build the
    marts first with `gpuledger attribute`.

    \b
    Example:
      gpuledger attribute --lake ./lake && gpuledger detect --lake ./lake --since 2026-11-01
    """
    if since is not None and now is not None and since >= now:
        raise click.BadParameter("must be before --now", param_hint="--since")
    outcome = detect_once(lake, now or dt.datetime.now(dt.UTC), since)
    findings = outcome.findings
    if not quiet:
        for line in _summary(findings):
            click.echo(line)
    click.echo(
        f"{findings.num_rows:,} findings: {outcome.new:,} new, {outcome.updated:,} updated, "
        f"{outcome.unchanged:,} unchanged, "
        f"in {lake / 'findings'}; {outcome.recommendations:,} recommendations in "
        f"{lake / 'recommendations'}"
    )
