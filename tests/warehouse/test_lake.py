"""`Lake`: one lake's layout, engine connections, writer lock, state and damage checks, each
delegated to the module that defines it (warehouse/lake.py)."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from tests.marts import rows as r
from warehouse import layout, state_files
from warehouse.errors import EmptyWarehouse
from warehouse.lake import Lake
from warehouse.writer_lock import writer_step


def test_the_lake_at_no_path_is_the_default_and_names_itself_by_its_path(tmp_path):
    assert Lake.at(None) == Lake.at("") == Lake(layout.DEFAULT_ROOT)
    assert Lake.at(str(tmp_path)) == Lake.at(tmp_path) == Lake(tmp_path)
    assert str(Lake.at(tmp_path)) == str(tmp_path)  # as messages named the path before
    assert not Lake.at(tmp_path / "missing").exists()
    assert len({Lake.at(tmp_path), Lake(tmp_path)}) == 1  # hashable: a cache key


def test_a_lake_spelled_two_ways_is_one_lake_and_its_build_state_holds(tmp_path, monkeypatch):
    # The probe: `attribute --lake lake` and `--lake /abs/lake` each rebuilt every day the
    # other had built (the build state records files by path), and prune kept such days
    from click.testing import CliRunner

    from app.cli import cli

    monkeypatch.chdir(tmp_path)
    assert Lake.at("lake") == Lake.at(tmp_path / "lake") == Lake(Path("x/../lake"))
    assert Lake.at("lake").root.is_absolute()
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})

    def gpuledger(*args: str) -> str:
        result = runner.invoke(cli, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    gpuledger("simulate", "--lake", "lake", "--gpus", "4", "--days", "2", "-q")
    assert "2 day partition(s) built" in gpuledger("attribute", "--lake", "lake")
    for spelled in (str(tmp_path / "lake"), "./lake", "lake"):
        assert "the day partitions were up to date" in gpuledger("attribute", "--lake", spelled)


def test_layout_is_the_layout_modules(tmp_path):
    lake = Lake.at(tmp_path)
    r.land(tmp_path, "gpu_samples", r.samples(range(0, 300, 30)))
    day = r.T0.date()
    assert lake.table_files("gpu_samples") == layout.table_files(tmp_path, "gpu_samples") != []
    assert lake.table_dir("jobs") == layout.table_dir(tmp_path, "jobs")
    assert lake.partition_dir("gpu_samples", r.CLUSTER, day) == layout.partition_dir(
        tmp_path, "gpu_samples", r.CLUSTER, day
    )
    assert lake.state_dir() == tmp_path / "_state" and lake.state_dir().is_dir()


def test_connect_opens_the_lakes_views_and_says_what_is_missing(tmp_path):
    r.land(tmp_path, "gpu_samples", r.samples(range(0, 300, 30)))
    lake = Lake.at(tmp_path)
    con = lake.connect(require=("gpu_samples",))
    try:
        assert con.sql("SELECT count(*) FROM gpu_samples").fetchall() == [(10,)]
    finally:
        con.close()
    with pytest.raises(EmptyWarehouse, match="jobs"):
        lake.connect(require=("jobs",))
    assert lake.config(memory_limit="1GB").root == tmp_path


def test_the_writer_lock_names_its_holder_and_a_step_may_take_the_lake(tmp_path):
    lake = Lake.at(tmp_path)
    assert lake.writer_holder() is None

    @writer_step("detect", root_arg="lake")
    def step(lake: Lake) -> str:
        held = lake.writer_holder()
        assert held is not None
        return held.step

    with lake.writer("attribute", command="gpuledger attribute"):
        held = lake.writer_holder()
        assert held is not None and (held.step, held.pid) == ("attribute", os.getpid())
        assert step(lake) == "attribute"  # re-entrant: the holder holds on
    assert step(lake) == "detect"
    assert lake.writer_holder() is None


def test_state_files_open_at_their_schema(tmp_path):
    lake = Lake.at(tmp_path)
    with lake.state(state_files.ATTRIBUTION) as db:
        tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    db.close()
    assert lake.state_path(state_files.ATTRIBUTION).is_file()
    assert "summary_built" in tables


def test_damage_checks_pass_other_errors_through(tmp_path: Path):
    # DuckDB's unclassified base error is searched for behind the connection's files: with its
    # connection named, only that lake's (without it, every live connection's in the process,
    # other tests' damaged lakes among them while a reference cycle keeps one alive)
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 600, 30)),
        jobs=[r.job("1", 0, 600)],
        job_gpus=[r.job_gpu("1", 0, 600)],
    )
    error = duckdb.Error("Catalog Error: no such table")
    with con:
        assert Lake.at(tmp_path).damaged(error, con) is error
