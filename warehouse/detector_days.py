"""What `gpuledger detect` keeps of the samples a day at a time, so each run reads what changed.

Two of detect's inputs are made from every sample of the lake: each GPU's hours of health
(sql/detectors/gpu_health_hourly.sql) and each job's GPUs' bottleneck sums
(sql/detectors/bottleneck_devices.sql). Computed from every sample at every run, they cost what
the lake holds, not what changed (a week of 1,024 GPUs: ~30 s of each run, growing with
`retention.raw_days`). Both are made of parts that one day's samples decide alone — an hour's
health; a job's GPU's sums over the day, with its first and last busy value so that the bursts
across midnight are counted when the days are put together (sql/detectors/bottleneck_signals.sql)
— so each day's rows are computed from that day's files once and kept in the lake
(`gpu_health_hourly`, `bottleneck_device_days`: DESIGN §3.5). A day's rows are computed again
only when what they came from changes: its sample files (a late landing, a compaction), the
query or its parameters, and for the bottleneck rows the allocations that own its samples; they
are removed with the day's sample files (`gpuledger prune`). The stored rows are those the
query gives over the lake's samples as they are now (tests/warehouse/test_detector_days.py).

Each partition's one file is named by the digest of what it was computed from, so whether a day
is up to date is read from the folder listing, with no state file to keep beside it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import sql
from warehouse import layout, queries
from warehouse.allocations import hold_allocations
from warehouse.connection import WarehouseConfig, open_engine, register_files
from warehouse.partitions import DayKey, allocation_digests, sample_days
from warehouse.schema import TABLES
from warehouse.writer import replace_partition

__all__ = ["BOTTLENECK_DEVICES", "HEALTH_HOURS", "DayStore", "Refreshed", "refresh"]


@dataclass(frozen=True, slots=True)
class DayStore:
    """A table of rows computed a day at a time by `query` from the day's samples: as their
    sources wrote them (`gpu_samples`), or with their owners (`owned_samples`, decided from the
    allocations). A row is the day's when its table's date column falls on the day."""

    table: str
    query: str
    owners: bool = False


HEALTH_HOURS = DayStore("gpu_health_hourly", "detectors/gpu_health_hourly")
BOTTLENECK_DEVICES = DayStore("bottleneck_device_days", "detectors/bottleneck_devices", owners=True)


@dataclass(frozen=True, slots=True)
class Refreshed:
    """What one refresh did: the days computed, the days removed (their samples are gone),
    and how many were up to date already."""

    built: tuple[DayKey, ...]
    removed: tuple[DayKey, ...]
    unchanged: int


def _remove(files: list[Path]) -> None:
    for path in files:
        path.unlink(missing_ok=True)


def _day_rows(rows: pa.Table, column: str, day: dt.date) -> pa.Table:
    """The rows whose `column` (a time) falls on `day` (a file of the day's partition holding a
    sample of another day, as another tool may write, gives none: the per-day marts leave such
    samples out too)."""
    start = dt.datetime.combine(day, dt.time(), dt.UTC)
    times = rows.column(column)
    first, past = (pa.scalar(t, times.type) for t in (start, start + dt.timedelta(days=1)))
    return rows.filter(pc.and_(pc.greater_equal(times, first), pc.less(times, past)))


def refresh(config: WarehouseConfig, store: DayStore, params: Mapping[str, Any]) -> Refreshed:
    """Compute `store`'s rows (its query with `params`) for every day whose inputs changed since
    its rows were stored, or that has none stored; remove the rows of days without sample files.

    Run under the lake's writer lock (`gpuledger detect` holds it): it writes the lake.
    """
    root = config.root
    days = sample_days(root)
    stored = layout.day_files(root, store.table)
    spec = TABLES[store.table]
    assert spec.date_column is not None
    salt = sql.load(store.query) + repr(sorted(params.items()))
    owners = allocation_digests(config, days) if store.owners else {}
    built: list[DayKey] = []
    con = None
    try:
        for key in sorted(days):
            digest = layout.files_fingerprint(days[key], salt + owners.get(key, ""))
            have = stored.get(key, [])
            if [path.stem for path in have] == [digest]:
                continue
            fresh = con is None
            if con is None:
                con = open_engine(config)
                if store.owners:
                    hold_allocations(con, root, "job_gpus")
            register_files(con, "gpu_samples", days[key], view=_reads(store))
            if fresh and store.owners:  # (over the view just made: it is read by name)
                queries.define_view(con, "owned_samples", sql.load("views/owned_samples"))
            rows = queries.run_arrow(con, store.query, **params)
            # (the engine's microsecond times in the contract's milliseconds)
            rows = _day_rows(rows, spec.date_column, key[1]).cast(spec.schema)
            if rows.num_rows:
                # (the partition's other files, the day's rows as they were, go with it)
                cluster = rows.column("cluster")[0].as_py()
                replace_partition(root, store.table, rows, cluster, key[1], batch_id=digest)
            else:  # none of this day's own: nothing stored (computed again next time)
                _remove(have)
            built.append(key)
    finally:
        if con is not None:
            con.close()
    gone = sorted(set(stored) - set(days))
    for key in gone:
        _remove(stored[key])
    return Refreshed(tuple(built), tuple(gone), len(days) - len(built))


def _reads(store: DayStore) -> str:
    """The view the day's sample files are read as: owned_samples reads `unowned_samples`."""
    return "unowned_samples" if store.owners else "gpu_samples"
