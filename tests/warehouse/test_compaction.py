"""Compaction merges small files per partition without changing rows or breaking re-landing."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse import layout, writer
from warehouse.connection import connect


def files_by_partition(root: Path, table: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in layout.table_files(root, table):
        found.setdefault(path.parent.relative_to(root).as_posix(), []).append(path.name)
    return found


def view_rows(root: Path, sql: str) -> list[tuple]:
    with connect(root) as con:
        return con.sql(sql).fetchall()


def land_three_batches(lake: Path, make_samples, t0: dt.datetime) -> None:
    """Batches w0..w2: each has one row on March 1st and one on March 2nd, on its own node."""
    for i in range(3):
        times = [t0, t0 + dt.timedelta(days=1)]
        writer.write_batch(lake, "gpu_samples", make_samples(times, node=f"g00{i}"), f"w{i}")


def test_compaction_leaves_one_file_per_partition_and_the_same_rows(lake, make_samples, t0):
    land_three_batches(lake, make_samples, t0)
    before = view_rows(lake, "SELECT node, ts, power_w FROM gpu_samples ORDER BY ALL")
    assert [len(v) for v in files_by_partition(lake, "gpu_samples").values()] == [3, 3]

    assert writer.compact(lake, "gpu_samples") == 2

    after = files_by_partition(lake, "gpu_samples")
    assert sorted(after) == [
        "gpu_samples/cluster=della/date=2024-03-01",
        "gpu_samples/cluster=della/date=2024-03-02",
    ]
    assert all(len(names) == 1 for names in after.values())
    assert view_rows(lake, "SELECT node, ts, power_w FROM gpu_samples ORDER BY ALL") == before
    assert len(before) == 6


def test_compacting_again_or_below_min_files_does_nothing(lake, make_samples, t0):
    land_three_batches(lake, make_samples, t0)
    writer.compact(lake, "gpu_samples")
    compacted = files_by_partition(lake, "gpu_samples")

    assert writer.compact(lake, "gpu_samples") == 0
    assert files_by_partition(lake, "gpu_samples") == compacted
    assert writer.compact(lake, "jobs") == 0  # a table with no files at all


def test_min_files_is_respected(lake, make_samples, t0):
    land_three_batches(lake, make_samples, t0)

    assert writer.compact(lake, "gpu_samples", min_files=4) == 0
    assert [len(v) for v in files_by_partition(lake, "gpu_samples").values()] == [3, 3]


def test_relanding_a_batch_after_compaction_replaces_its_rows(lake, make_samples, t0):
    land_three_batches(lake, make_samples, t0)
    writer.compact(lake, "gpu_samples")

    times = [t0, t0 + dt.timedelta(days=1)]
    writer.write_batch(lake, "gpu_samples", make_samples(times, node="g001", power_w=50.0), "w1")

    rows = view_rows(
        lake, "SELECT node, count(*), max(power_w) FROM gpu_samples GROUP BY node ORDER BY node"
    )
    assert rows == [("g000", 2, 300.0), ("g001", 2, 50.0), ("g002", 2, 300.0)]


def test_relanding_every_batch_after_compaction_empties_the_compacted_files(lake, make_samples, t0):
    land_three_batches(lake, make_samples, t0)
    writer.compact(lake, "gpu_samples")

    land_three_batches(lake, make_samples, t0)

    assert view_rows(lake, "SELECT count(*) FROM gpu_samples") == [(6,)]
    names = sorted({n for v in files_by_partition(lake, "gpu_samples").values() for n in v})
    assert names == ["w0.parquet", "w1.parquet", "w2.parquet"]


def test_compaction_then_relanding_keeps_rows_of_files_from_other_tools(lake, make_samples, t0):
    """A file placed by another tool has no `_batch` column; its rows belong to no batch."""
    land_three_batches(lake, make_samples, t0)
    foreign = make_samples([t0], node="x999").drop_columns(["power_w"])
    partition = lake / "gpu_samples/cluster=della/date=2024-03-01"
    pq.write_table(foreign, partition / "part-00000-spark.snappy.parquet")
    writer.compact(lake, "gpu_samples")

    times = [t0, t0 + dt.timedelta(days=1)]
    writer.write_batch(lake, "gpu_samples", make_samples(times, node="g001"), "w1")

    rows = view_rows(lake, "SELECT node, count(*) FROM gpu_samples GROUP BY node ORDER BY node")
    assert rows == [("g000", 2), ("g001", 2), ("g002", 2), ("x999", 1)]


def test_compaction_keeps_the_contract_types(lake, make_samples, t0):
    land_three_batches(lake, make_samples, t0)
    writer.compact(lake, "gpu_samples")

    [path, *_] = layout.table_files(lake, "gpu_samples")
    schema = pq.read_schema(path)
    assert schema.field("ts").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("gpu_index").type == pa.int16()
    assert schema.field(writer.BATCH_COLUMN).type == pa.string()
