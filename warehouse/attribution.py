"""Attribution: give every sample its owning job, then build the marts (DESIGN §4).

Samples are attributed when they land if the allocation is known. `reattribute` re-checks the
sample files that are new or whose allocations may have changed (late scheduler records) and
rewrites only the files whose owners differ. `build_marts` then rebuilds the day partitions of
the sample-level marts whose files changed (warehouse/partitions.py: the one pass over
samples), and builds the job- and cluster-level marts from those small per-bucket tables.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse import compaction_log, layout, queries
from warehouse.connection import WarehouseConfig, register_files, register_table
from warehouse.partitions import SAMPLE_MARTS, build_sample_marts
from warehouse.summary import (
    SUMMARY_MARTS,
    build_summary_marts,
    mart_rows,
    refresh_summary_marts,
)
from warehouse.writer import atomic_write

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "MART_ORDER",
    "SUMMARY_MARTS",
    "AttributionConfig",
    "AttributionResult",
    "attribute",
    "build_marts",
    "build_summary_marts",
    "reattribute",
    "record_attributed",
]

# Each mart and its query; a mart may read the ones before it.
MART_ORDER: tuple[tuple[str, str], ...] = (*SAMPLE_MARTS, *SUMMARY_MARTS)
OWNER_CHANGES = "attribution/owner_changes"


@dataclass(frozen=True, slots=True)
class AttributionConfig:
    """Thresholds of DESIGN §4: idle below `idle_below` busy, 5-minute occupancy buckets; a job
    below `low_efficiency_below` mean busy counts as low-efficiency in `fairness_weekly`."""

    idle_below: float = 0.01
    bucket_s: int = 300
    hw_event_grace_s: int = 300
    low_efficiency_below: float = 0.25

    def values(self) -> dict[str, float | int]:
        """Every value by the `$param` name the mart SQL binds it as."""
        return {
            "idle_below": self.idle_below,
            "bucket_s": self.bucket_s,
            "grace_s": self.hw_event_grace_s,
            "low_eff_below": self.low_efficiency_below,
        }

    def params(self, query: str, con: duckdb.DuckDBPyConnection) -> dict[str, float | int]:
        """The subset of this config's values that `query` binds."""
        wanted = queries.parameters(con, query)
        return {k: v for k, v in self.values().items() if k in wanted}


@dataclass(frozen=True, slots=True)
class AttributionResult:
    files_checked: int
    files_rewritten: int
    samples_reattributed: int
    mart_rows: dict[str, int]


def _state(root: Path) -> sqlite3.Connection:
    db = layout.open_state_db(root, "attribution.sqlite")
    db.execute(
        "CREATE TABLE IF NOT EXISTS checked_files ("
        " path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, allocations TEXT)"
    )
    return db


def record_attributed(root: Path, paths: list[Path]) -> None:
    """Record that sample files were attributed at ingest against the current `job_gpus`.

    A source that knows each sample's owner by the rule of DESIGN §4 when it lands them (the
    simulator does; so does a collector that looked up `job_gpus`) calls this, so `reattribute`
    does not check those files again until they or the allocations change.
    """
    allocations = layout.files_fingerprint(layout.table_files(root, "job_gpus"))
    with _state(root) as db:
        for path in paths:
            stat = path.stat()
            db.execute(
                "INSERT OR REPLACE INTO checked_files VALUES (?, ?, ?, ?)",
                (str(path), stat.st_size, stat.st_mtime_ns, allocations),
            )


def _rewrite_owners(path: Path, changes: pa.Table) -> None:
    """Rewrite one sample file with new job_id values at the given row numbers (a file of
    another tool without the column gets it; its other columns stay as they are)."""
    table = pq.read_table(path)
    index = table.schema.get_field_index("job_id")
    if index < 0:
        table = table.append_column("job_id", pa.nulls(table.num_rows, pa.string()))
        index = table.num_columns - 1
    owners = table.column(index).to_pylist()
    rows = changes.column("file_row_number").to_pylist()
    for row, job_id in zip(rows, changes.column("job_id").to_pylist(), strict=True):
        owners[row] = job_id
    updated = table.set_column(index, table.schema.field(index), pa.array(owners, pa.string()))
    atomic_write(updated, path, batches=None)


def _carry_checks(root: Path) -> str:
    """The allocations' digest now. A sample file checked against the allocations as they were
    before merges of `job_gpus` partitions that still hold (warehouse/compaction_log.py) was
    checked against the same rows: it is recorded as checked against them now."""
    carried = compaction_log.carry(root, "owner_check", "job_gpus")
    allocations = layout.listing_fingerprint(carried.now)
    if carried.holds:
        with _state(root) as db:
            db.execute(
                "UPDATE checked_files SET allocations = ? WHERE allocations = ?",
                (allocations, layout.listing_fingerprint(carried.before)),
            )
    compaction_log.forget(root, "owner_check", "job_gpus", carried.read)
    return allocations


def _carry_checked_files(root: Path) -> None:
    """Record the sample files after merges that still hold as checked against the allocations
    their files before were all checked against (the same rows, the same owners)."""
    if not compaction_log.merges(root, "owner_check", "gpu_samples"):
        return  # nothing merged: no need to list and stat every sample file here a second time
    carried = compaction_log.carry(root, "owner_check", "gpu_samples")
    with _state(root) as db:
        for merge in carried.holds.values():
            before = compaction_log.stamps(merge.before)
            seen = {
                path: db.execute(
                    "SELECT size, mtime_ns, allocations FROM checked_files WHERE path = ?", (path,)
                ).fetchone()
                for path in before
            }
            against = {row[2] for row in seen.values() if row is not None}
            if len(against) != 1 or any(
                row is None or f"{row[0]}|{row[1]}" != before[path] for path, row in seen.items()
            ):
                continue  # a file before not checked, or not as it was merged: check the new
            db.executemany("DELETE FROM checked_files WHERE path = ?", [(p,) for p in before])
            db.executemany(
                "INSERT OR REPLACE INTO checked_files VALUES (?, ?, ?, ?)",
                [
                    (path, *map(int, stamp.split("|")), *against)
                    for path, stamp in compaction_log.stamps(merge.after).items()
                ],
            )
    compaction_log.forget(root, "owner_check", "gpu_samples", carried.read)


def reattribute(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    progress: Callable[[int, int], None] | None = None,
    *,
    since: dt.date | None = None,
) -> tuple[int, int, int]:
    """Re-check sample files against `job_gpus`; return (checked, rewritten, samples changed).

    A file is skipped when neither it nor the allocations changed since it was last checked
    (a merge of partitions of either changes their files, not their rows), and, with `since`,
    when its date partition is before that day (older history stays as it was attributed). A
    rewritten file keeps its name, rows, order and `_batch`; only `job_id` changes.
    """
    allocations = _carry_checks(root)
    _carry_checked_files(root)
    # The files are checked against the allocations as they are now, not as they were when
    # `con` was opened: a stale view would record files as checked against rows it never saw.
    register_table(con, root, "job_gpus")
    files = layout.table_files(root, "gpu_samples")
    if since is not None:
        files = [f for f in files if (key := layout.partition_key(f)) is None or key[1] >= since]
    checked = rewritten = changed_rows = 0
    with _state(root) as db:
        for done, path in enumerate(files, start=1):
            stat = path.stat()
            seen = db.execute(
                "SELECT size, mtime_ns, allocations FROM checked_files WHERE path = ?", (str(path),)
            ).fetchone()
            if seen != (stat.st_size, stat.st_mtime_ns, allocations):
                checked += 1
                # typed by the contract, like the views: a file of another tool may leave
                # cluster to its folder and lack nullable columns (job_id, gpu_uuid, …)
                register_files(con, "gpu_samples", [path], "partition_samples", row_numbers=True)
                changes = queries.run_arrow(con, OWNER_CHANGES)
                if changes.num_rows:
                    _rewrite_owners(path, changes)
                    rewritten += 1
                    changed_rows += changes.num_rows
                    stat = path.stat()
                db.execute(
                    "INSERT OR REPLACE INTO checked_files VALUES (?, ?, ?, ?)",
                    (str(path), stat.st_size, stat.st_mtime_ns, allocations),
                )
            if progress:
                progress(done, len(files))
    if rewritten:
        register_table(con, root, "gpu_samples")
    return checked, rewritten, changed_rows


def build_marts(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    config: AttributionConfig,
    progress: Callable[[str], None] | None = None,
    *,
    force: bool = False,
    warehouse: WarehouseConfig | None = None,
) -> dict[str, int]:
    """Bring every mart up to date with the lake; return the row count of each.

    The day partitions of the sample-level marts are rebuilt where their sample files changed;
    the summary marts are then updated in place for the day partitions that changed, or
    rebuilt whole when something else they read changed (warehouse/summary.py). `force`
    rebuilds everything. `warehouse` sets the memory limit and spill folder of the builds.
    """
    warehouse = warehouse or WarehouseConfig(root=root)
    build_sample_marts(warehouse, config.values(), force=force)
    for mart, _ in SAMPLE_MARTS:
        register_table(con, root, mart)
        if progress:
            progress(mart)
    counts = {mart: mart_rows(root, mart) for mart, _ in SAMPLE_MARTS}
    update = refresh_summary_marts(con, root, config, progress, force=force, warehouse=warehouse)
    return counts | update.counts


def attribute(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    config: AttributionConfig,
    progress: Callable[[str], None] | None = None,
    *,
    force: bool = False,
) -> AttributionResult:
    """Re-attribute what changed, then rebuild the marts (if anything they read changed)."""
    checked, rewritten, changed = reattribute(con, root)
    counts = build_marts(con, root, config, progress, force=force)
    return AttributionResult(checked, rewritten, changed, counts)
