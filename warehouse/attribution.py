"""Attribution: give every sample its owning job, then build the marts (DESIGN §4).

Samples are attributed when they land if the allocation is known. `reattribute` re-checks the
sample files that are new or whose allocations may have changed (late scheduler records) and
rewrites only the files whose owners differ. `build_marts` then rebuilds the day partitions of
the sample-level marts whose files changed (warehouse/partitions.py: the one pass over
samples), and builds the job- and cluster-level marts from those small per-bucket tables.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse import compaction_log, layout, queries, state_files
from warehouse.connection import WarehouseConfig, register_files, register_table
from warehouse.emissions import CarbonIntensity
from warehouse.partitions import SAMPLE_MARTS, build_sample_marts
from warehouse.summary import (
    SUMMARY_MARTS,
    build_summary_marts,
    mart_rows,
    refresh_summary_marts,
)
from warehouse.writer import atomic_write
from warehouse.writer_lock import writer_step

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
# A sample file replaced (landed again, compacted) while its owners were checked is checked
# again at once, up to this many times in all; then it is left for the next round.
_CHECK_ATTEMPTS = 3

# A test's hook between the steps of one file's check: ("checked", path) once its new owners
# are known, ("read", path) once it was read for its rewrite, before the rename.
Seam = Callable[[str, Path], None]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AttributionConfig:
    """Thresholds of DESIGN §4: idle below `idle_below` busy, 5-minute occupancy buckets; a job
    below `low_efficiency_below` mean busy counts as low-efficiency in `fairness_weekly`.
    `emissions`: each cluster's carbon intensity (`[emissions]`), which only the summary marts
    read (kg_co2e); it is not one of `values()`, so changing it never rebuilds the day
    partitions of the sample-level marts."""

    idle_below: float = 0.01
    bucket_s: int = 300
    hw_event_grace_s: int = 300
    low_efficiency_below: float = 0.25
    emissions: CarbonIntensity = field(default_factory=CarbonIntensity)

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
    return state_files.open_state(root, state_files.ATTRIBUTION)


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


def _same_file(pinned: os.stat_result, path: Path) -> bool:
    """Whether `path` is still the file `pinned` describes (held open, so its inode cannot be
    reused: a file landed again or merged since is a new inode)."""
    try:
        now = path.stat()
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) == (
        pinned.st_dev,
        pinned.st_ino,
        pinned.st_size,
        pinned.st_mtime_ns,
    )


def _rewrite_owners(
    path: Path, source: BinaryIO, changes: pa.Table, seam: Seam | None = None
) -> None:
    """Rewrite one sample file with new job_id values at the given row numbers (a file of
    another tool without the column gets it; its other columns stay as they are). `source`:
    the open file the owners were computed from. Call it under the table's lock."""
    table = pq.read_table(source)
    if seam:
        seam("read", path)
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


def _check_owners(
    con: duckdb.DuckDBPyConnection, root: Path, path: Path, seam: Seam | None
) -> tuple[int, os.stat_result] | None:
    """Check one sample file's owners, rewriting it where they changed; return the rows
    changed and the stat of the file checked, or None when the file was replaced meanwhile
    (by a landing or a compaction, as often as `_CHECK_ATTEMPTS`) or is gone: not checked.

    The file is held open while it is checked, and rewritten under the table's lock (which
    landing and compaction hold) only if it is still that file: a batch landed again meanwhile
    is never overwritten by the older rows, nor given the owners of another version's rows.
    """
    for _attempt in range(_CHECK_ATTEMPTS):
        try:
            pinned = path.open("rb")
        except FileNotFoundError:
            return None  # merged into another file meanwhile: that one is checked next round
        with pinned:
            version = os.fstat(pinned.fileno())
            # typed by the contract, like the views: a file of another tool may leave
            # cluster to its folder and lack nullable columns (job_id, gpu_uuid, …)
            register_files(con, "gpu_samples", [path], "partition_samples", row_numbers=True)
            changes = queries.run_arrow(con, OWNER_CHANGES)
            if seam:
                seam("checked", path)
            if not changes.num_rows:
                # recorded as the version pinned: if another replaced it, it differs next round
                return (0, version) if _same_file(version, path) else None
            with layout.table_lock(root, "gpu_samples"):
                if not _same_file(version, path):
                    logger.info("%s: landed again while its owners were checked; again", path)
                    continue
                _rewrite_owners(path, pinned, changes, seam)
                return changes.num_rows, path.stat()
    logger.warning("%s: replaced while its owners were checked; left for the next round", path)
    return None


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


@writer_step("attribute")
def reattribute(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    progress: Callable[[int, int], None] | None = None,
    *,
    since: dt.date | None = None,
    seam: Seam | None = None,
) -> tuple[int, int, int]:
    """Re-check sample files against `job_gpus`; return (checked, rewritten, samples changed).

    A file is skipped when neither it nor the allocations changed since it was last checked
    (a merge of partitions of either changes their files, not their rows), and, with `since`,
    when its date partition is before that day (older history stays as it was attributed). A
    rewritten file keeps its name, rows, order and `_batch`; only `job_id` changes.

    Sources land beside it (`gpuledger run`'s Prometheus puller, the spool): a file is
    rewritten under the table's lock, and only if it is still the file whose owners were
    computed; one landed again meanwhile is checked again (see `_check_owners`). `seam`: a
    test's hook between the steps of a file's check.
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
            try:
                stat = path.stat()
            except FileNotFoundError:  # merged into another file since it was listed
                continue
            seen = db.execute(
                "SELECT size, mtime_ns, allocations FROM checked_files WHERE path = ?", (str(path),)
            ).fetchone()
            if seen != (stat.st_size, stat.st_mtime_ns, allocations):
                checked += 1
                outcome = _check_owners(con, root, path, seam)
                if outcome is not None:
                    rows, stat = outcome
                    if rows:
                        rewritten += 1
                        changed_rows += rows
                    db.execute(
                        "INSERT OR REPLACE INTO checked_files VALUES (?, ?, ?, ?)",
                        (str(path), stat.st_size, stat.st_mtime_ns, allocations),
                    )
            if progress:
                progress(done, len(files))
    if rewritten:
        register_table(con, root, "gpu_samples")
    return checked, rewritten, changed_rows


@writer_step("attribute")
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
    rebuilt whole when something else they read changed (warehouse/summary/). `force`
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


@writer_step("attribute")
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
