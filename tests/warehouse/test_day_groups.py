"""Consecutive small days are built in one pass (warehouse/partitions.py, `GROUP_BYTES`): each
day gets the partitions its own pass gives, a day after a gap or past the size starts a new
pass, and each day is recorded as built."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from app.pipeline import default_pipeline_config
from collector.sim import SimConfig, simulate
from warehouse import layout, partitions
from warehouse.connection import WarehouseConfig
from warehouse.lake import Lake

PARAMS = default_pipeline_config().attribution.values()
BUILD_DAY = partitions.build_day
GROUP_BYTES = partitions.GROUP_BYTES


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> Path:
    """Four simulated days of eight GPUs (the noisier telemetry), the third day removed."""
    root = tmp_path_factory.mktemp("simulated")
    simulate(SimConfig(gpus=8, days=4, interval_s=120, seed=11, hard=True), Lake.at(root))
    days = sorted(partitions.sample_days(root))
    assert len(days) == 4
    for path in partitions.sample_days(root)[days[2]]:
        path.unlink()
    return root


def _rows(root: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every sample-level mart's rows, sorted, floats rounded to 9 significant digits."""

    def value(x: object) -> object:
        return float(f"{x:.9g}") if isinstance(x, float) else x

    out = {}
    con = duckdb.connect()
    for mart, _ in partitions.SAMPLE_MARTS:
        files = [str(p) for p in layout.table_files(root, mart)]
        found = con.execute(
            "SELECT * EXCLUDE (_batch) FROM read_parquet($files, hive_partitioning = false)",
            {"files": files},
        ).fetchall()
        out[mart] = sorted((tuple(value(x) for x in row) for row in found), key=repr)
    return out


def _built(simulated: Path, to: Path, group_bytes: int, monkeypatch) -> list[tuple]:
    """Build `simulated`'s sample-level marts in a copy at `to`; return each pass's days."""
    shutil.copytree(simulated, to)
    passes = []

    def spy(con, root, key, files, next_files, params, **kwargs):
        passes.append((key[1], kwargs.get("through")))
        return BUILD_DAY(con, root, key, files, next_files, params, **kwargs)

    monkeypatch.setattr(partitions, "GROUP_BYTES", group_bytes)
    monkeypatch.setattr(partitions, "build_day", spy)
    report = partitions.build_sample_marts(WarehouseConfig(to), PARAMS)
    assert len(report.rebuilt) == 3
    return passes


def test_small_consecutive_days_are_built_in_one_pass_with_the_same_rows(
    simulated, tmp_path, monkeypatch
):
    one_by_one = _built(simulated, tmp_path / "days", 0, monkeypatch)
    grouped = _built(simulated, tmp_path / "grouped", GROUP_BYTES, monkeypatch)

    days = sorted(day for _, day in partitions.sample_days(simulated))
    assert one_by_one == [(day, None) for day in days]
    # the first two days together; the last, after the missing day, alone
    assert grouped == [(days[0], days[1]), (days[2], None)]
    assert _rows(tmp_path / "grouped") == _rows(tmp_path / "days")
    # every day is recorded as built from its own files: nothing is built again
    again = partitions.build_sample_marts(WarehouseConfig(tmp_path / "grouped"), PARAMS)
    assert again.rebuilt == () and again.tails == () and again.unchanged == 3


def test_a_group_stops_at_its_size(simulated, tmp_path, monkeypatch):
    """A day whose files would take the group past GROUP_BYTES starts a pass of its own."""
    first = sorted(partitions.sample_days(simulated))[0]
    size = sum(p.stat().st_size for p in partitions.sample_days(simulated)[first])

    passes = _built(simulated, tmp_path / "lake", size + 1, monkeypatch)

    assert [through for _, through in passes] == [None, None, None]
