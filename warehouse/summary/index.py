"""The per-day index that stands in for `gpu_job_buckets` (`<lake>/_state/summary_index/`,
`sql/attribution/summary_index.sql`) and the derived views cached beside it (`jobs_latest`,
`job_gpu_intervals` as of the last build).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import sql
from warehouse import layout, queries
from warehouse.arrow_arrays import dates, read_parquet, string_scalar, strings
from warehouse.connection import (
    DERIVED_VIEWS,
    register_files,
)
from warehouse.partitions import DayKey
from warehouse.summary.views import _arrow_view, _register_raw

if TYPE_CHECKING:
    import duckdb


_INDEX_DIR = "summary_index"


def _index_path(root: Path, key: DayKey) -> Path:
    return layout.state_dir(root) / _INDEX_DIR / key[0] / f"{key[1].isoformat()}.parquet"


def _index_files(root: Path) -> list[Path]:
    folder = layout.state_dir(root) / _INDEX_DIR
    return layout.folder_files(folder)


def _index_fingerprint(root: Path) -> str:
    return layout.files_fingerprint(_index_files(root))


def _whole_index_path(root: Path) -> Path:
    return layout.state_dir(root) / _INDEX_DIR / "_whole" / "index.parquet"


def _write_whole_index(root: Path, days: Iterable[pa.Table]) -> None:
    """Write every day's index rows (the tables its day files hold) to one file too, sorted by
    cluster and date: an update reads the days it did not change from it, one file however
    long the history (`_read_kept`)."""
    tables = list(days)
    if not tables:
        _whole_index_path(root).unlink(missing_ok=True)
        return
    schema = tables[0].schema
    whole = pa.concat_tables([t.cast(schema) for t in tables])
    _write_state_file(
        whole.sort_by([("cluster", "ascending"), ("date", "ascending")]), _whole_index_path(root)
    )


def _read_kept(root: Path, changed: Iterable[DayKey]) -> list[pa.Table] | None:
    """The index rows of every day but the `changed` ones, from the whole index file; None if
    there is none (a lake indexed before it existed: read the day files)."""
    path = _whole_index_path(root)
    if not path.exists():
        return None
    whole = read_parquet(path)
    keys = list(changed)
    drop = None
    for cluster in pc.unique(whole.column("cluster")).to_pylist():
        folder = layout.safe_name(cluster)
        days = [day for key_folder, day in keys if key_folder == folder]
        if not days:
            continue
        hit = pc.and_(
            pc.equal(whole.column("cluster"), string_scalar(cluster)),
            pc.is_in(whole.column("date"), dates(days)),
        )
        drop = hit if drop is None else pc.or_(drop, hit)
    if drop is None:
        return [whole]
    # a null `date` matches no day: kept
    return [whole.filter(pc.invert(pc.and_kleene(drop, pc.is_valid(drop))))]


def _write_index(root: Path, index: pa.Table, keys: Iterable[DayKey]) -> list[pa.Table]:
    """Write the index rows of each day in `keys` to its file (none: the file is removed);
    return the tables written."""
    written = []
    clusters = pc.unique(index.column("cluster")).to_pylist()
    for key in keys:
        path = _index_path(root, key)
        names = strings([c for c in clusters if layout.safe_name(c) == key[0]])
        rows = index.filter(
            pc.and_(
                pc.is_in(index.column("cluster"), names),
                pc.equal(index.column("date"), dates([key[1]])[0]),
            )
        )
        if not rows.num_rows:
            path.unlink(missing_ok=True)
            continue
        _write_state_file(rows, path)
        written.append(rows)
    return written


def _read_index(root: Path, keys: Iterable[DayKey]) -> list[pa.Table]:
    return [read_parquet(p) for k in keys if (p := _index_path(root, k)).exists()]


def _index_of(con: duckdb.DuckDBPyConnection, files: list[Path]) -> pa.Table:
    register_files(con, "gpu_job_buckets", files, view="gpu_job_buckets")
    return queries.run_arrow(con, "attribution/summary_index")


def _derived_path(root: Path, view: str) -> Path:
    return layout.state_dir(root) / _INDEX_DIR / "_derived" / f"{view}.parquet"


def _write_state_file(table: pa.Table, path: Path) -> None:
    """Write a state file (re-derivable, so no fsync: a torn one fails the fingerprint check)."""
    layout.ensure_dir(path.parent)
    fd, tmp = layout.create_temp(path)  # like every state file: the lake's group only
    try:
        with os.fdopen(fd, "wb") as handle:
            pq.write_table(table, handle)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # renamed into place already, unless the write failed


def _write_derived(con: duckdb.DuckDBPyConnection, root: Path, index: pa.Table) -> None:
    """Cache `jobs_latest` and `job_gpu_intervals` as of this build: they read only raw tables
    other than samples (unchanged while updates are incremental) and, for allocations still
    open, the data's end (whose jobs an update recomputes)."""
    _register_raw(con, root, ("jobs", "job_gpus", "gpus"))
    _arrow_view(con, "gpu_job_buckets", index)
    for view in ("jobs_latest", "cluster_data_end", "job_gpu_intervals"):
        queries.define_view(con, view, sql.load(DERIVED_VIEWS[view]))
    for view in ("jobs_latest", "job_gpu_intervals"):
        _write_state_file(queries.run_arrow(con, DERIVED_VIEWS[view]), _derived_path(root, view))
