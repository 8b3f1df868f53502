"""Lakes for `gpuledger bench`: the simulator's, or a cheap synthetic one for sizes it cannot reach.

The simulator draws realistic telemetry at ~250 k samples/s on this machine, far too slow for
the `scale` scenario's ~350 M samples. `synthetic_lake` draws the same distributions (the
simulator's job mix, per-job regimes and device fields) with DuckDB
(sql/bench/synthetic_samples.sql) and streams each day straight to Parquet in the lake's layout,
with job_id set at generation by the same rule as the allocations it lands: a lake attributed
at ingest, at about a million samples per CPU-second and bounded memory.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse import layout, queries
from warehouse.connection import open_engine
from warehouse.lake import Lake
from warehouse.schema import TABLES
from warehouse.writer import write_batch

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "HeldBack",
    "SyntheticLake",
    "hold_back_last_day",
    "land_late_records",
    "synthetic_lake",
]

# a Monday more than a year back: 365 days of history and the day appended lie in the past
# (attribute leaves samples dated after tomorrow out)
SYNTHETIC_START = dt.datetime(2025, 1, 6, tzinfo=dt.UTC)
SYNTHETIC_CLUSTER = "synthetic"
_SAMPLE_TABLES = ("gpu_samples",)


def _typed(table: pa.Table, name: str) -> pa.Table:
    """`table` with each column cast to the contract's type (DuckDB returns µs timestamps)."""
    schema = TABLES[name].schema
    return pa.table({c: table.column(c).cast(schema.field(c).type) for c in table.column_names})


@dataclass(frozen=True, slots=True)
class SyntheticLake:
    gpus: int
    days: int
    samples: int
    jobs: int


def synthetic_lake(
    lake: Lake,
    gpus: int,
    days: int,
    *,
    interval_s: int = 30,
    seed: int = 7,
    progress: Callable[[int, int], None] | None = None,
) -> SyntheticLake:
    """Generate `gpus` (rounded to whole 8-GPU nodes) × `days` of samples every `interval_s`
    seconds (which must divide a day), and their allocations and jobs."""
    if not 1 <= interval_s <= 3600 or 86400 % interval_s:
        raise ValueError(f"interval_s must divide a day and be 1-3600 s, got {interval_s!r}")
    gpus = max(8, -(-gpus // 8) * 8)
    first_e = int(SYNTHETIC_START.timestamp())
    last_e = first_e + days * 86400
    con = open_engine(lake.config())
    try:
        allocations = queries.run_arrow(
            con,
            "bench/synthetic_job_gpus",
            cluster=SYNTHETIC_CLUSTER,
            first_e=first_e,
            last_e=last_e,
            gpus=gpus,
            seed=seed,
        )
        write_batch(lake.root, "job_gpus", _typed(allocations, "job_gpus"), "synthetic")
        con.from_arrow(allocations).create_view("job_gpus")
        jobs = queries.run_arrow(con, "bench/synthetic_jobs", cluster=SYNTHETIC_CLUSTER, seed=seed)
        write_batch(lake.root, "jobs", _typed(jobs, "jobs"), "synthetic")
        samples = 0
        for day in range(days):
            start = SYNTHETIC_START + dt.timedelta(days=day)
            folder = layout.ensure_dir(
                lake.partition_dir("gpu_samples", SYNTHETIC_CLUSTER, start.date())
            )
            path = folder / "synthetic.parquet"
            rel = queries.relation(
                con,
                "bench/synthetic_samples",
                cluster=SYNTHETIC_CLUSTER,
                day_start_e=int(start.timestamp()),
                gpus=gpus,
                interval_s=interval_s,
                seed=seed,
            )
            rel.write_parquet(str(path), compression="zstd")
            samples += pq.read_metadata(path).num_rows
            if progress:
                progress(day + 1, days)
    finally:
        con.close()
    return SyntheticLake(gpus=gpus, days=days, samples=samples, jobs=jobs.num_rows)


@dataclass(frozen=True, slots=True)
class HeldBack:
    """Sample partitions moved out of the lake, and where they go back."""

    moves: tuple[tuple[Path, Path], ...]

    def restore(self) -> None:
        """Put the held-back partitions back into the lake (new files, as if just landed)."""
        for original, aside in self.moves:
            shutil.move(str(aside), str(original))


def hold_back_last_day(lake: Lake, aside: Path) -> HeldBack:
    """Move the last day's sample partitions out of the lake, to append them later."""
    moves = []
    for table in _SAMPLE_TABLES:
        folders = sorted(lake.table_dir(table).glob("cluster=*/date=*"))
        if not folders:
            continue
        last = max(folder.name for folder in folders)
        for folder in folders:
            if folder.name == last:
                target = aside / table / folder.parent.name / folder.name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(folder), str(target))
                moves.append((folder, target))
    return HeldBack(tuple(moves))


def land_late_records(con: duckdb.DuckDBPyConnection, lake: Lake, jobs: int) -> int:
    """Land new records of `jobs` finished jobs, moved to another account, as one scheduler
    batch (sql/bench/late_job_records.sql); return how many landed."""
    rows = queries.run_arrow(con, "bench/late_job_records", jobs=jobs, account="late-account")
    schema = TABLES["jobs"].schema
    write_batch(lake.root, "jobs", rows.select(schema.names).cast(schema), "bench-late-records")
    return int(rows.num_rows)
