"""Files a hive writer placed in the lake (DESIGN §3, the open format): Spark's partitionBy and
pyarrow's hive partitioning keep `cluster` (and a mart's `date`) out of the files and write the
values into the folder names, percent-encoded; the views read them from there."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

from app.cli import cli
from collector.sim import SimConfig, simulate
from warehouse import layout, writer
from warehouse.attribution import AttributionConfig, build_marts
from warehouse.connection import connect
from warehouse.lake import Lake
from warehouse.schema import MARTS, RAW_TABLES, TABLES

# Names a hive writer must escape (space, '/', '%', '=', non-ASCII), and '+', which it keeps.
NAMES = ["della", "gpu farm/1", "100%", "a=b", "x+y", "é"]


def hive_write(table: pa.Table, folder: Path, keys: list[str]) -> list[Path]:
    """Write `table` as pyarrow's hive partitioning does: `keys` become folders, not columns."""
    ds.write_dataset(
        table,
        folder,
        format="parquet",
        partitioning=keys,
        partitioning_flavor="hive",
        existing_data_behavior="overwrite_or_ignore",
    )
    return sorted(folder.rglob("*.parquet"))


def with_date(table: pa.Table, day: dt.date) -> pa.Table:
    return table.append_column("date", pa.array([day.isoformat()] * table.num_rows))


def test_a_cluster_left_to_the_folder_reads_as_the_folder_names_it(lake, make_samples, t0):
    rows = pa.concat_tables(
        [make_samples([t0], cluster=name, node=f"n{i}") for i, name in enumerate(NAMES)]
    )
    files = hive_write(with_date(rows, t0.date()), lake / "gpu_samples", ["cluster", "date"])
    assert all("cluster" not in pq.read_schema(f).names for f in files)
    assert any("%2F" in str(f) for f in files)  # escaped, as a hive writer does

    with connect(lake) as con:
        got = con.sql("SELECT node, cluster FROM gpu_samples ORDER BY node").fetchall()

    assert got == [(f"n{i}", name) for i, name in enumerate(NAMES)]
    assert sorted(layout.folder_cluster(f) for f in files) == sorted(NAMES)


def test_hive_written_rows_read_exactly_as_the_same_rows_landed_by_the_writer(
    tmp_path, make_samples, t0
):
    rows = pa.concat_tables(
        [
            make_samples([t0, t0 + dt.timedelta(seconds=30)], cluster=name, node=f"n{i}")
            for i, name in enumerate(NAMES)
        ]
    )
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for name in NAMES:
        one = rows.filter(pa.compute.equal(rows.column("cluster"), name))
        writer.write_batch(ours, "gpu_samples", one, f"w-{name}")
    hive_write(with_date(rows, t0.date()), theirs / "gpu_samples", ["cluster", "date"])

    def view(root: Path) -> pl.DataFrame:
        with connect(root) as con:
            return con.sql("SELECT * FROM gpu_samples ORDER BY cluster, node, ts").pl()

    assert_frame_equal(view(theirs), view(ours))


def test_a_null_cluster_is_the_folders_and_a_value_in_the_file_wins(lake, make_samples, t0):
    rows = make_samples([t0, t0, t0], node="x001")
    cluster = pa.array([None, "della", "elsewhere"], pa.string())
    rows = rows.set_column(rows.schema.get_field_index("cluster"), "cluster", cluster)
    folder = lake / "gpu_samples" / "cluster=della" / f"date={t0.date()}"
    folder.mkdir(parents=True)
    pq.write_table(rows, folder / "part-0.parquet")
    # the lake's own writer names the folder of 'gpu farm' cluster=gpu_farm: the column says
    # which it is
    writer.write_batch(lake, "gpu_samples", make_samples([t0], cluster="gpu farm"), "w1")
    assert (lake / "gpu_samples" / "cluster=gpu_farm").is_dir()

    with connect(lake) as con:
        got = con.sql("SELECT cluster FROM gpu_samples ORDER BY cluster").fetchall()

    assert got == [("della",), ("della",), ("elsewhere",), ("gpu farm",)]


def test_a_cluster_column_of_integers_reads_as_text(lake, make_samples, t0):
    # another tool's numbered clusters: the file's integers met the folder's text in one CASE,
    # and every command ended in a binder error's traceback
    rows = make_samples([t0, t0], node="x001")
    cluster = pa.array([None, 7], pa.int64())
    rows = rows.set_column(rows.schema.get_field_index("cluster"), "cluster", cluster)
    folder = lake / "gpu_samples" / "cluster=della" / f"date={t0.date()}"
    folder.mkdir(parents=True)
    pq.write_table(rows, folder / "part-0.parquet")

    with connect(lake) as con:
        got = con.sql("SELECT cluster FROM gpu_samples ORDER BY cluster").fetchall()

    assert got == [("7",), ("della",)]


def test_outside_the_layout_or_undecodable_a_missing_cluster_stays_null(lake, make_samples, t0):
    rows = make_samples([t0]).drop_columns(["cluster"])
    (lake / "gpu_samples" / "cluster=%FF").mkdir(parents=True)
    pq.write_table(rows, lake / "gpu_samples" / "loose.parquet")
    pq.write_table(rows, lake / "gpu_samples" / "cluster=%FF" / "bad.parquet")

    with connect(lake) as con:
        got = con.sql("SELECT cluster FROM gpu_samples").fetchall()

    assert got == [(None,), (None,)]
    assert layout.folder_cluster(lake / "gpu_samples" / "cluster=%FF" / "bad.parquet") is None


def test_a_mart_partitioned_by_date_reads_cluster_and_date_from_its_folders(lake):
    day = dt.date(2024, 3, 1)
    schema = TABLES["usage_daily"].schema
    row = {f.name: None for f in schema}
    row |= {"cluster": "gpu farm", "date": day, "account": "physics", "user": "alice"}
    rows = pa.Table.from_pylist([row], schema=schema)
    hive_write(rows, lake / "usage_daily", ["cluster", "date"])

    with connect(lake) as con:
        got = con.sql("SELECT cluster, date, account FROM usage_daily").fetchall()

    assert got == [("gpu farm", day, "physics")]


def test_hive_written_samples_without_job_id_get_owners_and_stay_as_written(lake, t0):
    """The per-day pass reads the file as the views do (cluster from the folder, a missing
    job_id null), gives its samples their owners in the marts, and leaves the file as it is."""
    from tests.marts import rows as r

    r.land(lake, "job_gpus", [r.job_gpu("1", 0, 600)])
    samples = r.table("gpu_samples", r.samples(range(0, 600, 30))).drop_columns(["cluster"])
    folder = lake / "gpu_samples" / f"cluster={r.CLUSTER}" / f"date={r.T0.date()}"
    folder.mkdir(parents=True)
    pq.write_table(samples, folder / "part-0.parquet")
    assert "job_id" not in samples.column_names
    written = (folder / "part-0.parquet").read_bytes()

    build_marts(connect(lake), lake, AttributionConfig())

    assert (folder / "part-0.parquet").read_bytes() == written
    with connect(lake) as con:
        got = con.sql("SELECT cluster, job_id, sum(samples) FROM gpu_job_buckets GROUP BY ALL")
        assert got.fetchall() == [(r.CLUSTER, "1", 20)]


def _runner() -> CliRunner:
    return CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})


def hive_copy(ours: Path, theirs: Path, *, drop: tuple[str, ...] = ()) -> None:
    """Every raw table of `ours` rewritten into `theirs` as a hive writer partitioned by
    (cluster, date) would write it (no `cluster` column; `drop`: columns it does not have)."""
    for table in RAW_TABLES:
        files = layout.table_files(ours, table)
        if not files:
            continue
        parts = []
        for path in files:
            key = layout.partition_key(path)
            assert key is not None
            rows = pq.read_table(path).drop_columns(["_batch", *drop])
            parts.append(with_date(rows, key[1]))
        rows = pa.concat_tables(parts, promote_options="default")
        if table == "gpu_samples":
            rows = rows.drop_columns([c for c in ("job_id",) if c in rows.column_names])
        hive_write(rows, theirs / table, ["cluster", "date"])


@pytest.mark.slow
def test_attribute_and_query_give_the_same_marts_for_a_hive_written_lake(tmp_path):
    """A simulated day of 8 GPUs in a cluster whose name hive writers escape, and the same raw
    rows as a Spark or pyarrow job would write them (samples without job_id, too: attribution
    finds their owners); `gpuledger attribute` and `gpuledger query` agree on every mart."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    simulate(SimConfig(gpus=8, days=1, seed=3, cluster="gpu farm/1"), Lake.at(ours))
    hive_copy(ours, theirs)
    assert not any("cluster" in pq.read_schema(f).names for f in layout.table_files(theirs, "jobs"))

    outputs = {}
    for root in (ours, theirs):
        attributed = _runner().invoke(cli, ["attribute", "--lake", str(root), "--quiet"])
        assert attributed.exit_code == 0, attributed.output
        for mart in MARTS:
            out = tmp_path / f"{root.name}-{mart}.parquet"
            args = ["query", mart, "--lake", str(root), "--format", "parquet", "--out", str(out)]
            queried = _runner().invoke(cli, args)
            assert queried.exit_code == 0, queried.output
            outputs[root.name, mart] = pl.read_parquet(out)

    for mart, spec in MARTS.items():
        mine = outputs["ours", mart].sort(list(spec.key), nulls_last=True)
        hive = outputs["theirs", mart].sort(list(spec.key), nulls_last=True)
        assert mine.height > 0, mart
        assert mine["cluster"].unique().to_list() == ["gpu farm/1"], mart
        assert_frame_equal(hive, mine, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)


def test_a_file_with_a_filename_column_of_its_own_is_read(lake, make_samples, t0):
    """DuckDB's `filename` column (the file's path) does not clash with a file's own column."""
    rows = make_samples([t0]).drop_columns(["cluster"]).append_column("filename", pa.array(["x"]))
    folder = lake / "gpu_samples" / "cluster=della" / f"date={t0.date()}"
    folder.mkdir(parents=True)
    pq.write_table(rows, folder / "part-0.parquet")

    with connect(lake) as con:
        assert con.sql("SELECT cluster FROM gpu_samples").fetchall() == [("della",)]
