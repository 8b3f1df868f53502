"""open_engine(): engines of one configuration are cursors of one database, each on its own."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from warehouse import connection, queries
from warehouse.connection import WarehouseConfig, connect, open_engine


def _memory(con: duckdb.DuckDBPyConnection) -> int:
    [(used,)] = con.sql(
        "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()"
    ).fetchall()
    return int(used)


def _schemas(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.sql("SELECT schema_name FROM duckdb_schemas() WHERE NOT internal").fetchall()
    return {str(name) for (name,) in rows}


def test_engines_of_one_configuration_share_a_database_not_their_views(tmp_path: Path) -> None:
    config = WarehouseConfig(tmp_path, threads=1)
    first, second = open_engine(config), open_engine(config)
    key = (1, config.memory_limit, str(tmp_path / "_state" / "duckdb_tmp"))
    assert key in connection._DATABASES  # one database for both

    first.execute("CREATE VIEW probe AS SELECT 'first' AS who")
    second.execute("CREATE VIEW probe AS SELECT 'second' AS who")
    queries.create_table(first, "held", "SELECT 1 AS x", {})
    queries.create_table(second, "held", "SELECT 2 AS x", {})
    first.sql("SELECT 'made' AS how").create_view("made")
    first.register("arrow", pa.table({"y": [3]}))

    assert first.sql("SELECT who FROM probe").fetchall() == [("first",)]
    assert second.sql("SELECT who FROM probe").fetchall() == [("second",)]
    assert first.sql("SELECT x FROM held").fetchall() == [(1,)]
    assert second.sql("SELECT x FROM held").fetchall() == [(2,)]
    assert first.sql("SELECT how FROM made").fetchall() == [("made",)]
    for name in ("made", "arrow"):
        with pytest.raises(duckdb.CatalogException):
            second.table(name)


def test_connect_of_one_lake_twice_gives_two_sets_of_views(tmp_path: Path) -> None:
    first, second = connect(tmp_path), connect(tmp_path)
    first.register("gpus", pa.table({"cluster": ["mine"]}))  # hides this engine's view only

    assert first.sql("SELECT cluster FROM gpus").fetchall() == [("mine",)]
    assert second.sql("SELECT count(*) FROM gpus").fetchall() == [(0,)]
    assert "jobs_latest" in second.sql("SELECT view_name FROM duckdb_views()").pl()["view_name"]


def test_closing_an_engine_frees_its_tables_and_a_collected_one_its_schema(
    tmp_path: Path,
) -> None:
    config = WarehouseConfig(tmp_path, threads=1)
    watcher = open_engine(config)
    before = _memory(watcher)
    engine = open_engine(config)
    [(own,)] = engine.sql("SELECT current_schema()").fetchall()
    assert own in _schemas(watcher) and own != "main"
    queries.create_table(engine, "big", "SELECT range AS x FROM range(2000000)", {})
    engine.execute("CREATE VIEW over_big AS SELECT x FROM big")
    assert _memory(watcher) > before

    engine.close()
    assert _memory(watcher) == before
    assert own in _schemas(watcher)  # its schema goes once the engine object is collected
    del engine
    gc.collect()
    open_engine(config).close()
    assert own not in _schemas(watcher)


def test_engines_with_other_settings_have_other_databases(tmp_path: Path) -> None:
    small = open_engine(WarehouseConfig(tmp_path, memory_limit="1GB", threads=1))
    large = open_engine(WarehouseConfig(tmp_path, memory_limit="3GB", threads=2))

    [(limit, threads)] = small.sql(
        "SELECT current_setting('memory_limit'), current_setting('threads')"
    ).fetchall()
    assert (limit, threads) == ("953.6 MiB", 1)
    [(limit, threads)] = large.sql(
        "SELECT current_setting('memory_limit'), current_setting('threads')"
    ).fetchall()
    assert (limit, threads) == ("2.7 GiB", 2)


def test_own_database_lets_cursors_read_the_views(tmp_path: Path) -> None:
    con = connect(tmp_path, own_database=True)  # the dashboard's and the API's way

    cursor = con.cursor()
    assert cursor.sql("SELECT count(*) FROM jobs_latest").fetchall() == [(0,)]


def test_a_forked_child_opens_its_own_database(tmp_path: Path) -> None:
    config = WarehouseConfig(tmp_path, threads=1)
    parent = open_engine(config)
    parent.execute("CREATE VIEW here AS SELECT 'parent' AS who")
    database = next(reversed(connection._DATABASES.values()))
    pid = os.fork()
    if pid == 0:  # the child: no assertion may escape it
        status = 1
        try:
            child = open_engine(config)
            own = next(reversed(connection._DATABASES.values()))
            fresh = own is not database and database in connection._INHERITED
            try:
                child.table("here")
                unseen = False
            except duckdb.CatalogException:
                unseen = True
            answer = child.sql("SELECT 42").fetchall() == [(42,)]
            status = 0 if fresh and unseen and answer else 2
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)

    assert os.waitstatus_to_exitcode(status) == 0
    assert parent.sql("SELECT who FROM here").fetchall() == [("parent",)]
