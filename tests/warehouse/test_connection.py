"""connect(): one view per contract table, files of other tools, jobs_latest, gpu_models."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse import connection, writer
from warehouse.arrow_arrays import TIMESTAMP
from warehouse.connection import WarehouseConfig, connect, open_engine, set_engine_threads
from warehouse.errors import DamagedFile, EmptyWarehouse, WarehouseError
from warehouse.schema import TABLES

UTC = dt.UTC


def columns(con: duckdb.DuckDBPyConnection, view: str) -> list[tuple[str, str]]:
    relation = con.table(view)
    return [(name, str(kind)) for name, kind in zip(relation.columns, relation.types, strict=True)]


def test_missing_lake_with_require_raises_naming_the_path(tmp_path):
    root = tmp_path / "no-such-lake"

    with pytest.raises(EmptyWarehouse) as info:
        connect(root, require=("gpu_samples",))

    assert str(root) in str(info.value)
    assert "does not exist" in str(info.value)
    assert info.value.root == root
    assert isinstance(info.value, WarehouseError)
    assert not root.exists()


def test_empty_lake_with_require_raises_naming_path_and_table(lake, make_samples, t0):
    writer.write_batch(
        lake,
        "jobs",
        pa.table(
            {
                "cluster": ["della"],
                "job_id": ["1"],
                "source": ["slurm"],
                "updated_ts": pa.array([t0], TIMESTAMP),
            }
        ),
        "sacct",
    )

    with pytest.raises(EmptyWarehouse) as info:
        connect(lake, require=("jobs", "gpu_samples"))

    message = str(info.value)
    assert str(lake) in message
    assert "'gpu_samples'" in message
    assert "'jobs'" not in message
    assert "gpuledger simulate" in message  # says what to do about it


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(path.read_bytes()[:200]),  # truncated: a copy cut short
        lambda path: path.write_text("hello, not parquet\n"),  # another file under the name
        lambda path: path.write_bytes(b""),
    ],
    ids=["truncated", "text", "empty"],
)
def test_a_damaged_parquet_file_is_one_error_naming_it(lake, make_samples, t0, damage):
    writer.write_batch(lake, "gpu_samples", make_samples([t0]), "w1")
    [good] = writer.write_batch(
        lake, "gpu_samples", make_samples([t0 + dt.timedelta(days=1)]), "w2"
    )
    damage(good)

    with pytest.raises(DamagedFile) as info:
        connect(lake)

    message = str(info.value)
    assert str(good) in message
    assert "\n" not in message
    assert isinstance(info.value, WarehouseError)


def test_files_that_are_not_parquet_in_a_table_folder_are_ignored(lake, make_samples, t0):
    [landed] = writer.write_batch(lake, "gpu_samples", make_samples([t0]), "w1")
    (landed.parent / "README.txt").write_text("notes\n")

    with connect(lake, require=("gpu_samples",)) as con:
        assert con.sql("SELECT count(*) FROM gpu_samples").fetchall() == [(1,)]


def test_require_is_met_once_the_table_has_a_file(lake, make_samples, t0):
    writer.write_batch(lake, "gpu_samples", make_samples([t0]), "w1")

    with connect(lake, require=("gpu_samples",)) as con:
        assert con.sql("SELECT count(*) FROM gpu_samples").fetchall() == [(1,)]


def test_without_require_every_table_has_an_empty_view_with_the_contract_columns(tmp_path):
    with connect(tmp_path / "nothing-here") as con:
        for name, table_spec in TABLES.items():
            assert con.table(name).columns == table_spec.schema.names, name
            assert con.sql(f'SELECT count(*) FROM "{name}"').fetchall() == [(0,)], name
    assert not (tmp_path / "nothing-here").exists()  # reading never creates the lake


def test_views_over_files_have_the_same_types_as_empty_views(lake, make_samples, t0):
    with connect(lake) as con:
        empty = columns(con, "gpu_samples")
    writer.write_batch(lake, "gpu_samples", make_samples([t0]), "w1")

    with connect(lake) as con:
        landed = columns(con, "gpu_samples")

    assert landed == empty
    assert dict(landed)["ts"] == "TIMESTAMP WITH TIME ZONE"
    assert dict(landed)["gpu_index"] == "SMALLINT"
    assert "_batch" not in dict(landed)


def test_a_file_from_another_tool_is_read_extra_ignored_missing_null(lake, make_samples, t0):
    ours = make_samples([t0], node="g001")
    writer.write_batch(lake, "gpu_samples", ours, "w1")
    theirs = (
        make_samples([t0, t0 + dt.timedelta(minutes=1)], node="x001")
        .drop_columns(["power_w", "gpu_uuid"])
        .append_column("site_rack", pa.array(["r12", "r12"]))
    )
    partition = lake / "gpu_samples" / "cluster=della" / "date=2024-03-01"
    pq.write_table(theirs, partition / "part-00000-c000.snappy.parquet")

    with connect(lake, require=("gpu_samples",)) as con:
        assert con.table("gpu_samples").columns == TABLES["gpu_samples"].schema.names
        got = con.sql(
            "SELECT node, gpu_uuid, power_w, gpu_util_pct FROM gpu_samples ORDER BY node, ts"
        ).fetchall()

    assert got == [
        ("g001", "GPU-g001-0", 300.0, 0.0),
        ("x001", None, None, 0.0),
        ("x001", None, None, 1.0),
    ]


def test_jobs_latest_keeps_the_newest_version_of_each_job(lake, t0):
    def versions(cluster, job_id, states_by_hour):
        n = len(states_by_hour)
        return pa.table(
            {
                "cluster": [cluster] * n,
                "job_id": [job_id] * n,
                "state": [s for _, s in states_by_hour],
                "submit_ts": pa.array([t0] * n, TIMESTAMP),
                "source": ["slurm"] * n,
                "updated_ts": pa.array(
                    [t0 + dt.timedelta(hours=h) for h, _ in states_by_hour], TIMESTAMP
                ),
            }
        )

    writer.write_batch(
        lake, "jobs", versions("della", "7", [(0, "PENDING"), (5, "COMPLETED")]), "a"
    )
    writer.write_batch(lake, "jobs", versions("della", "7", [(2, "RUNNING")]), "b")  # older, later
    writer.write_batch(lake, "jobs", versions("della", "8", [(1, "RUNNING")]), "b2")
    writer.write_batch(lake, "jobs", versions("tiger", "7", [(1, "FAILED")]), "c")

    with connect(lake) as con:
        latest = con.sql(
            "SELECT cluster, job_id, state, updated_ts FROM jobs_latest ORDER BY cluster, job_id"
        ).fetchall()
        assert con.sql("SELECT count(*) FROM jobs").fetchall() == [(5,)]

    assert [(c, j, s) for c, j, s, _ in latest] == [
        ("della", "7", "COMPLETED"),
        ("della", "8", "RUNNING"),
        ("tiger", "7", "FAILED"),
    ]
    assert latest[0][3] == t0 + dt.timedelta(hours=5)


def test_jobs_latest_exists_on_an_empty_lake_with_the_jobs_columns(tmp_path):
    with connect(tmp_path) as con:
        assert con.table("jobs_latest").columns == TABLES["jobs"].schema.names
        assert con.sql("SELECT count(*) FROM jobs_latest").fetchall() == [(0,)]


def test_gpu_models_has_rows(tmp_path):
    with connect(tmp_path) as con:
        [(n,)] = con.sql("SELECT count(*) FROM gpu_models").fetchall()
        [(h100,)] = con.sql(
            "SELECT peak_bf16_dense_tflops FROM gpu_models WHERE model = 'NVIDIA H100 80GB HBM3'"
        ).fetchall()
        assert "fb_total_mib" in con.table("gpu_models").columns
    assert n > 5
    assert h100 > 0


def test_a_config_object_sets_memory_limit_and_threads(tmp_path):
    config = WarehouseConfig(root=tmp_path, memory_limit="1GB", threads=2)

    with connect(config) as con:
        [(threads,)] = con.sql("SELECT current_setting('threads')").fetchall()
        [(zone,)] = con.sql("SELECT current_setting('TimeZone')").fetchall()
        [(limit,)] = con.sql("SELECT current_setting('memory_limit')").fetchall()

    assert threads == 2
    assert zone == "UTC"
    assert limit == "953.6 MiB"  # DuckDB shows 1GB (10^9 bytes) in MiB


def test_temporary_spill_files_live_under_state(tmp_path):
    with connect(tmp_path) as con:
        [(spill,)] = con.sql("SELECT current_setting('temp_directory')").fetchall()

    assert Path(spill) == tmp_path / "_state" / "duckdb_tmp"


def test_a_file_removed_after_listing_is_not_called_damaged(tmp_path):
    """Compaction or a rebuild can remove a file between listing and reading: DuckDB's own
    IOException comes back (callers retry on it), not DamagedFile."""
    from warehouse.connection import register_files

    kept, gone = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(pa.table({"cluster": ["c"]}), kept)
    with connect(tmp_path) as con:
        with pytest.raises(duckdb.IOException):
            register_files(con, "gpus", [kept, gone])


def test_reference_views_read_the_same_rows_when_registered_again():
    # the second registration in a process reads with the types the first one sniffed
    from importlib.resources import files

    from warehouse.connection import REFERENCE_VIEWS, register_reference

    first, again, sniffed = duckdb.connect(), duckdb.connect(), duckdb.connect()
    register_reference(first)
    register_reference(again)
    for view, filename in REFERENCE_VIEWS.items():
        path = str(files("warehouse").joinpath("data", filename))
        expected = sniffed.read_csv(path, header=True).to_arrow_table()
        assert expected.num_rows > 0
        for con in (first, again):
            got = con.table(view).to_arrow_table()
            assert got.schema == expected.schema, view
            assert got.equals(expected), view


def _threads(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT current_setting('threads')").fetchone()
    assert row is not None
    return int(row[0])


def test_engine_threads_follow_the_process_cap_unless_the_config_names_some(tmp_path):
    before = connection._engine_threads
    try:
        set_engine_threads(None)
        default = _threads(open_engine(WarehouseConfig(tmp_path)))
        set_engine_threads(1)
        assert _threads(open_engine(WarehouseConfig(tmp_path))) == 1
        assert _threads(connect(tmp_path)) == 1
        assert _threads(open_engine(WarehouseConfig(tmp_path, threads=3))) == 3
        set_engine_threads(None)
        assert _threads(open_engine(WarehouseConfig(tmp_path))) == default
        with pytest.raises(ValueError, match="1 or more"):
            set_engine_threads(0)
    finally:
        set_engine_threads(before)
