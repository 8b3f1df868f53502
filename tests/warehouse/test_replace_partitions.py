"""Marts are rebuilt whole per cluster: stale partitions go, other clusters stay."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse import layout, writer
from warehouse.connection import connect
from warehouse.errors import SchemaMismatch
from warehouse.schema import spec

D1, D2, D3 = dt.date(2024, 3, 1), dt.date(2024, 3, 2), dt.date(2024, 3, 3)


def usage_daily(cluster: str, dates: list[dt.date], gpu_h: float = 1.0) -> pa.Table:
    n = len(dates)
    return pa.table(
        {
            "cluster": pa.array([cluster] * n, pa.string()),
            "date": pa.array(dates, pa.date32()),
            "account": pa.array(["physics"] * n, pa.string()),
            "alloc_gpu_h": pa.array([gpu_h] * n, pa.float64()),
        }
    )


def partitions(root: Path, table: str) -> list[str]:
    return sorted(
        p.parent.relative_to(root / table).as_posix() for p in layout.table_files(root, table)
    )


def rows(root: Path, sql: str) -> list[tuple]:
    with connect(root) as con:
        return con.sql(sql).fetchall()


def test_rebuild_removes_partitions_no_longer_produced_and_leaves_other_clusters(lake):
    writer.replace_partitions(lake, "usage_daily", usage_daily("della", [D1, D2, D3]), "della")
    writer.replace_partitions(lake, "usage_daily", usage_daily("tiger", [D1]), "tiger")

    written = writer.replace_partitions(
        lake, "usage_daily", usage_daily("della", [D2, D3], gpu_h=2.0), "della"
    )

    assert partitions(lake, "usage_daily") == [
        "cluster=della/date=2024-03-02",
        "cluster=della/date=2024-03-03",
        "cluster=tiger/date=2024-03-01",
    ]
    assert sorted(written) == layout.table_files(lake, "usage_daily")[:2]
    assert rows(lake, "SELECT cluster, date, alloc_gpu_h FROM usage_daily ORDER BY ALL") == [
        ("della", D2, 2.0),
        ("della", D3, 2.0),
        ("tiger", D1, 1.0),
    ]


def test_rebuild_replaces_compacted_and_extra_files_of_the_cluster(lake):
    writer.write_batch(lake, "usage_daily", usage_daily("della", [D1]), "old-a")
    writer.write_batch(lake, "usage_daily", usage_daily("della", [D1]), "old-b")
    writer.compact(lake, "usage_daily")

    writer.replace_partitions(lake, "usage_daily", usage_daily("della", [D1], 5.0), "della")

    assert rows(lake, "SELECT alloc_gpu_h FROM usage_daily") == [(5.0,)]
    assert [p.name for p in layout.table_files(lake, "usage_daily")] == ["mart.parquet"]


def test_an_empty_rebuild_empties_the_cluster_only(lake):
    writer.replace_partitions(lake, "usage_daily", usage_daily("della", [D1, D2]), "della")
    writer.replace_partitions(lake, "usage_daily", usage_daily("tiger", [D1]), "tiger")

    assert writer.replace_partitions(lake, "usage_daily", usage_daily("della", []), "della") == []

    assert partitions(lake, "usage_daily") == ["cluster=tiger/date=2024-03-01"]


def test_rebuild_of_a_mart_without_date_column(lake):
    jobs = pa.table({"cluster": ["della", "della"], "job_id": ["1", "2"]})
    writer.replace_partitions(lake, "job_usage", jobs, "della")
    writer.replace_partitions(
        lake, "job_usage", pa.table({"cluster": ["tiger"], "job_id": ["9"]}), "tiger"
    )

    writer.replace_partitions(lake, "job_usage", jobs.slice(1), "della")

    assert rows(lake, "SELECT cluster, job_id FROM job_usage ORDER BY ALL") == [
        ("della", "2"),
        ("tiger", "9"),
    ]


def test_a_cluster_name_that_prefixes_another_is_not_touched(lake):
    writer.replace_partitions(lake, "usage_daily", usage_daily("della", [D1]), "della")
    writer.replace_partitions(lake, "usage_daily", usage_daily("della2", [D1]), "della2")

    writer.replace_partitions(lake, "usage_daily", usage_daily("della", [D2]), "della")

    assert partitions(lake, "usage_daily") == [
        "cluster=della/date=2024-03-02",
        "cluster=della2/date=2024-03-01",
    ]


def test_rows_of_another_cluster_are_refused(lake):
    writer.replace_partitions(lake, "usage_daily", usage_daily("tiger", [D1, D2]), "tiger")
    mixed = pa.concat_tables([usage_daily("della", [D1]), usage_daily("tiger", [D1], 9.0)])

    with pytest.raises(SchemaMismatch) as info:
        writer.replace_partitions(lake, "usage_daily", mixed, "della")

    assert str(info.value) == (
        "usage_daily: rebuilding cluster 'della' but the batch has rows of ['tiger']"
    )
    assert partitions(lake, "usage_daily") == [
        "cluster=tiger/date=2024-03-01",
        "cluster=tiger/date=2024-03-02",
    ]
    assert rows(lake, "SELECT max(alloc_gpu_h) FROM usage_daily") == [(1.0,)]


def test_replacing_one_day_partition_leaves_the_other_days_alone(tmp_path):
    writer.replace_partitions(tmp_path, "usage_daily", usage_daily("della", [D1, D2]), "della")
    untouched = next(
        p for p in layout.table_files(tmp_path, "usage_daily") if "2024-03-01" in str(p)
    )
    mtime = untouched.stat().st_mtime_ns

    writer.replace_partition(tmp_path, "usage_daily", usage_daily("della", [D2], 5.0), "della", D2)
    writer.replace_partition(tmp_path, "usage_daily", usage_daily("della", [D3], 7.0), "della", D3)

    assert untouched.stat().st_mtime_ns == mtime
    assert partitions(tmp_path, "usage_daily") == [
        "cluster=della/date=2024-03-01",
        "cluster=della/date=2024-03-02",
        "cluster=della/date=2024-03-03",
    ]
    assert rows(tmp_path, "SELECT date, alloc_gpu_h FROM usage_daily ORDER BY date") == [
        (D1, 1.0),
        (D2, 5.0),
        (D3, 7.0),
    ]


def test_an_empty_batch_removes_the_day_partition(tmp_path):
    writer.replace_partitions(tmp_path, "usage_daily", usage_daily("della", [D1, D2]), "della")

    writer.replace_partition(tmp_path, "usage_daily", usage_daily("della", []), "della", D2)

    assert partitions(tmp_path, "usage_daily") == ["cluster=della/date=2024-03-01"]


def _reader(*tables: pa.Table) -> pa.RecordBatchReader:
    schema = spec("usage_daily").schema
    batches = [b for t in tables for b in writer.conform(spec("usage_daily"), t).to_batches()]
    return pa.RecordBatchReader.from_batches(schema, batches)


def test_a_streamed_day_partition_lands_every_batch_in_one_file_in_row_groups(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(writer, "_ROW_GROUP", 3)  # small row groups: several per file
    writer.replace_partitions(tmp_path, "usage_daily", usage_daily("della", [D1, D2]), "della")
    batches = [usage_daily("della", [D2] * n, gpu_h=float(n)) for n in (1, 2, 4)]

    written = writer.replace_partition(tmp_path, "usage_daily", _reader(*batches), "della", D2)

    assert written == 7
    [path] = [p for p in layout.table_files(tmp_path, "usage_daily") if "2024-03-02" in str(p)]
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [3, 3, 1]
    assert rows(
        tmp_path, "SELECT date, sum(alloc_gpu_h) FROM usage_daily GROUP BY 1 ORDER BY 1"
    ) == [
        (D1, 1.0),
        (D2, 1.0 + 2 * 2.0 + 4 * 4.0),
    ]


def test_an_empty_stream_removes_the_day_partition(tmp_path):
    writer.replace_partitions(tmp_path, "usage_daily", usage_daily("della", [D1, D2]), "della")

    written = writer.replace_partition(tmp_path, "usage_daily", _reader(), "della", D2)

    assert written == 0
    assert partitions(tmp_path, "usage_daily") == ["cluster=della/date=2024-03-01"]
