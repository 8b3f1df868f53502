"""The state that keeps an update's cost to what changed: the allocations held in one file
(warehouse/allocations.py) and the row counts kept per file (warehouse/row_counts.py) read the
same rows as the lake's files, whatever changed since the last read."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.marts import rows as r
from warehouse import layout, state_files
from warehouse.allocations import hold_allocations
from warehouse.attribution import AttributionConfig
from warehouse.connection import WarehouseConfig, open_engine, register_files
from warehouse.row_counts import table_rows
from warehouse.summary import record_summary_state

DAY_S = 86400


def held(root: Path) -> pa.Table:
    con = open_engine(WarehouseConfig(root=root))
    try:
        hold_allocations(con, root, "held")
        return con.table("held").to_arrow_table()
    finally:
        con.close()


def viewed(root: Path) -> pa.Table:
    """What a view over every file of job_gpus reads (what the allocations stood for before)."""
    con = open_engine(WarehouseConfig(root=root))
    try:
        register_files(con, "job_gpus", layout.table_files(root, "job_gpus"))
        return con.table("job_gpus").to_arrow_table()
    finally:
        con.close()


def state_file(root: Path) -> Path:
    return root / "_state" / "allocations" / "job_gpus.parquet"


def test_held_allocations_are_the_files_rows_as_they_change(tmp_path):
    root = tmp_path / "lake"
    assert held(root).num_rows == 0  # no file: typed, empty
    r.land(root, "job_gpus", [r.job_gpu("j1", 0, 3600), r.job_gpu("j2", DAY_S, None)], "a")
    assert held(root).equals(viewed(root))
    assert state_file(root).exists()

    # a new batch, a rewritten one (an allocation closed), one removed: each read again or
    # dropped, the rows in the files' order
    r.land(root, "job_gpus", [r.job_gpu("j3", 2 * DAY_S, None, gpu_index=1)], "b")
    assert held(root).equals(viewed(root))
    r.land(root, "job_gpus", [r.job_gpu("j2", DAY_S, DAY_S + 60)], "a")
    assert held(root).equals(viewed(root))
    assert held(root).num_rows == 3
    for path in layout.table_files(root, "job_gpus"):
        if "b.parquet" in path.name:
            path.unlink()
    assert held(root).equals(viewed(root))
    assert sorted(held(root).column("job_id").to_pylist()) == ["j1", "j2"]


def test_held_allocations_ignore_a_damaged_or_foreign_state_file(tmp_path):
    root = tmp_path / "lake"
    r.land(root, "job_gpus", [r.job_gpu("j1", 0, 3600)], "a")
    held(root)
    state_file(root).write_bytes(b"not parquet")
    assert held(root).equals(viewed(root))
    pq.write_table(pa.table({"x": [1]}), state_file(root))  # another contract's
    assert held(root).equals(viewed(root))


def test_row_counts_follow_the_files(tmp_path):
    root = tmp_path / "lake"
    r.land(root, "job_gpus", [r.job_gpu("j1", 0, 3600), r.job_gpu("j2", DAY_S, None)], "a")

    def footers() -> int:
        return sum(pq.read_metadata(p).num_rows for p in layout.table_files(root, "job_gpus"))

    assert table_rows(root, "job_gpus") == footers() == 2
    r.land(root, "job_gpus", [r.job_gpu("j3", 2 * DAY_S, None)], "b")
    assert table_rows(root, "job_gpus") == footers() == 3
    # rewritten with other rows and its old time: a new size, counted again
    path = layout.table_files(root, "job_gpus")[0]
    stat = path.stat()
    r.land(root, "job_gpus", [r.job_gpu("j1", 0, 3600), r.job_gpu("j4", 60, 120)], "a")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert table_rows(root, "job_gpus") == footers() == 4
    (root / "_state" / "row_counts" / "job_gpus.json").write_text("{torn")
    assert table_rows(root, "job_gpus") == footers()
    assert table_rows(root, "no_such_table") == 0


def summary_state(root: Path) -> dict[str, object]:
    """The summary marts' recorded state: the index and derived files' rows (sorted) and the
    SQLite rows (the marts' and index files' fingerprints left out: files written again)."""
    folder = layout.state_dir(root) / "summary_index"
    files = {
        str(p.relative_to(folder)): sorted(map(str, pq.read_table(p).to_pylist()))
        for p in layout.folder_files(folder)
    }
    with state_files.open_state(root, state_files.ATTRIBUTION) as db:
        built = db.execute("SELECT inputs FROM summary_built").fetchall()
        tables = {
            t: sorted(db.execute(f"SELECT * FROM {t}").fetchall())  # noqa: S608 - ours
            for t in ("summary_days", "summary_records", "summary_record_jobs")
        }
    return {"files": files, "built": built, **tables}


def test_the_state_a_whole_build_records_is_the_state_recorded_on_its_own(tmp_path):
    # attribute records the summary state from what the whole build computed (its index,
    # jobs_latest and job_gpu_intervals); recorded again by an engine of its own, it is the same.
    con = r.build_lake(tmp_path, **r.mixed_lake())
    con.close()
    from_build = summary_state(tmp_path)
    assert from_build["files"] and from_build["summary_days"] and from_build["summary_records"]
    record_summary_state(tmp_path, AttributionConfig())
    assert summary_state(tmp_path) == from_build
