"""The stored hours of every GPU's health: the `gpu_health_hourly` table, a partition per cluster
folder and day, kept up to date with the lake's sample files.

The health rules read each GPU's hours (sql/detectors/gpu_health_hourly.sql: throttling, ECC
and row-remap state per GPU and hour). Computed from every sample of the lake at every
`gpuledger detect`, they cost what the lake holds, not what changed (a week of 1,024 GPUs:
16-18 s of each run, growing with `retention.raw_days`). An hour's row depends on that hour's
samples alone, and those lie in one day's partition of `gpu_samples`, so each day's rows are
computed from that day's files once and kept; they are computed again only when the day's
files change (a late landing, a compaction, a changed query), and removed with them (`gpuledger
prune`). The stored rows are the query's over the lake's samples as they are now: the rules
read the same rows either way (tests/warehouse/test_health_hourly.py), DESIGN §3.5.

Each partition's one file is named by the digest of what it was computed from (the day's sample
files' names, sizes and modification times, and the query's text), so whether a day is up to
date is read from the folder listing, with no state file to keep beside it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import sql
from warehouse import layout, queries
from warehouse.connection import WarehouseConfig, open_engine, register_files
from warehouse.partitions import DayKey, sample_days
from warehouse.schema import TABLES
from warehouse.writer import replace_partition

__all__ = ["QUERY", "TABLE", "HealthHours", "refresh_health_hourly"]

TABLE = "gpu_health_hourly"
QUERY = "detectors/gpu_health_hourly"

# every sample of the day's files: the query's `$since` (the rules' window starts at the epoch)
_ALL = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class HealthHours:
    """What one refresh did: the days computed, the days removed (their samples are gone),
    and how many were up to date already."""

    built: tuple[DayKey, ...]
    removed: tuple[DayKey, ...]
    unchanged: int


def _remove(files: list[Path]) -> None:
    for path in files:
        path.unlink(missing_ok=True)


def _day_rows(rows: pa.Table, day: dt.date) -> pa.Table:
    """The rows of `day`'s hours (a file of the day's partition holding a sample of another
    day, as another tool may write, gives none: the per-day marts leave such samples out too)."""
    start = dt.datetime.combine(day, dt.time(), dt.UTC)
    hour = rows.column("hour")
    bounds = (pa.scalar(start, hour.type), pa.scalar(start + dt.timedelta(days=1), hour.type))
    return rows.filter(pc.and_(pc.greater_equal(hour, bounds[0]), pc.less(hour, bounds[1])))


def refresh_health_hourly(config: WarehouseConfig) -> HealthHours:
    """Compute the health hours of every day whose sample files changed since its hours were
    stored (or that has none stored), and remove the hours of days without sample files.

    Run under the lake's writer lock (`gpuledger detect` holds it): it writes the lake.
    """
    root = config.root
    days = sample_days(root)
    stored = layout.day_files(root, TABLE)
    salt = sql.load(QUERY)
    schema = TABLES[TABLE].schema  # (the engine's microsecond hours in the contract's ms)
    built: list[DayKey] = []
    con = None
    try:
        for key in sorted(days):
            digest = layout.files_fingerprint(days[key], salt)
            have = stored.get(key, [])
            if [path.stem for path in have] == [digest]:
                continue
            if con is None:
                con = open_engine(config)
            register_files(con, "gpu_samples", days[key])
            rows = _day_rows(queries.run_arrow(con, QUERY, since=_ALL), key[1]).cast(schema)
            if rows.num_rows:
                # (the partition's other files, the day's hours as they were, go with it)
                cluster = rows.column("cluster")[0].as_py()
                replace_partition(root, TABLE, rows, cluster, key[1], batch_id=digest)
            else:  # nothing of this day's own hours: nothing stored (computed again next time)
                _remove(have)
            built.append(key)
    finally:
        if con is not None:
            con.close()
    gone = sorted(set(stored) - set(days))
    for key in gone:
        _remove(stored[key])
    return HealthHours(tuple(built), tuple(gone), len(days) - len(built))
