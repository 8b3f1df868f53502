"""`gpuledger prune`: old days' raw samples go once their derived partitions stand for them;
every mart and the weekly report's figures stay as they were."""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

from app.cli import cli
from collector.sim import SimConfig, simulate
from tests.marts import rows as r
from warehouse import layout
from warehouse.lake import Lake
from warehouse.partitions import sample_days
from warehouse.spark import PrunedDays, build_marts_on_spark

START = dt.date(2026, 11, 2)  # the simulator's first day, a Monday (2026-W45)
DAYS = 30
WEEKS = ("2026-W45", "2026-W46", "2026-W47", "2026-W48")  # W45-W47 pruned whole, W48 in part


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def weekly_tables(lake: Path, out: Path) -> dict[str, pl.DataFrame]:
    """Every table of the weekly report of each week of WEEKS, by path under `out`."""
    for week in WEEKS:
        run("report", "weekly", "--week", week, "--no-pdf", "--out", str(out), "--lake", str(lake))
    tables = {
        str(p.relative_to(out)): pl.read_csv(p, infer_schema_length=None)
        for p in sorted(out.rglob("tables/*.csv"))
    }
    assert len(tables) > len(WEEKS)
    assert sum(frame.height for frame in tables.values()) > 0
    return tables


def lake_digest(lake: Path) -> dict[str, str]:
    """Every file of the lake (state included), by path: what a dry run must not change."""
    return {
        str(p.relative_to(lake)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(lake.rglob("*"))
        if p.is_file() and "duckdb_tmp" not in p.parts and not p.name.endswith(".lock")
    }


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lake = tmp_path_factory.mktemp("prune") / "lake"
    simulate(SimConfig(gpus=8, days=DAYS, seed=5), Lake.at(lake))
    return lake


@pytest.fixture
def built(simulated: Path, tmp_path: Path) -> Path:
    """A copy of the simulated lake, attributed where it lies (a day's record of what it was
    built from names its files by path)."""
    lake = tmp_path / "lake"
    shutil.copytree(simulated, lake)
    run("attribute", "-q", "--lake", str(lake))
    return lake


@pytest.mark.slow
def test_pruning_keeps_every_figure_and_removes_only_old_sample_files(built, tmp_path):
    lake = built
    before, reports = r.marts_by_key(lake), weekly_tables(lake, tmp_path / "before")
    untouched = lake_digest(lake)

    said = run("prune", "--keep-raw-days", "7", "--dry-run", "--lake", str(lake))
    assert "Would delete the raw samples of 23 day(s)" in said
    assert lake_digest(lake) == untouched  # a dry run changes nothing

    said = run("prune", "--keep-raw-days", "7", "--lake", str(lake))
    assert "Deleted the raw samples of 23 day(s)" in said
    last = START + dt.timedelta(days=DAYS - 1)
    left = sorted(day for _, day in sample_days(lake))
    assert left == [last - dt.timedelta(days=n) for n in range(6, -1, -1)]
    assert not any(
        layout.partition_key(p)[1] <= last - dt.timedelta(days=7)  # type: ignore[index]
        for p in layout.table_files(lake, "gpu_samples")
    )

    # the marts, as they stand and once the lake is attributed again, are those of before
    for now in (r.marts_by_key(lake), None):
        if now is None:
            said = run("attribute", "--lake", str(lake))
            assert "the day partitions were up to date" in said
            now = r.marts_by_key(lake)
        for name, frame in before.items():
            assert frame.height > 0 or name == "job_outcomes", name
            assert_frame_equal(now[name], frame, check_exact=False, rel_tol=1e-12)
    after = weekly_tables(lake, tmp_path / "after")
    assert set(after) == set(reports)
    for path, frame in reports.items():  # the sums' last digits vary with the engine's order
        assert_frame_equal(after[path], frame, check_exact=False, rel_tol=1e-12)
    # nothing left to prune
    assert "of 0 day(s)" in run("prune", "--keep-raw-days", "7", "--lake", str(lake))

    # the pruned days hold 300 s buckets and cannot be built again: another width is refused
    # (the marts added 600 s buckets of the kept days to them: 8 GPUs of 16 unobserved)
    refused = CliRunner().invoke(cli, ["attribute", "-q", "--bucket", "600", "--lake", str(lake)])
    assert refused.exit_code == 1
    assert "were pruned from partitions of 300 s buckets" in refused.output
    assert "attribute.bucket_s = 300" in refused.output
    assert "Traceback" not in refused.output
    # pruned by a version that recorded no width (attribution.sqlite before version 3: its
    # migration makes the record empty): the width is read from the pruned days' buckets
    # (another width was taken, and the marts counted half the fleet unobserved)
    with sqlite3.connect(lake / "_state" / "attribution.sqlite") as db:
        db.execute("DELETE FROM pruned_buckets")
    refused = CliRunner().invoke(cli, ["attribute", "-q", "--bucket", "600", "--lake", str(lake)])
    assert refused.exit_code == 1 and "partitions of 300 s buckets" in refused.output
    for name, frame in before.items():
        assert_frame_equal(r.marts_by_key(lake)[name], frame, check_exact=False, rel_tol=1e-12)


@pytest.mark.slow
def test_a_pruned_day_is_frozen_against_samples_landed_in_it_later(built, tmp_path):
    lake = built
    run("prune", "--keep-raw-days", "7", "--lake", str(lake))
    before = r.marts_by_key(lake)
    # a few of a pruned day's samples land again (a collector re-landing a window, a restore)
    kept = layout.table_files(lake, "gpu_samples")[0]
    pruned_day = START + dt.timedelta(days=2)
    folder = lake / "gpu_samples" / "cluster=sim" / f"date={pruned_day}"
    folder.mkdir(parents=True)
    rows = pq.read_table(kept).slice(0, 100)
    shift = dt.datetime.combine(pruned_day, dt.time(), dt.UTC) - rows.column("ts")[0].as_py()
    rows = rows.set_column(
        rows.schema.get_field_index("ts"),
        rows.schema.field("ts"),
        pa.array([t.as_py() + shift for t in rows.column("ts")], rows.schema.field("ts").type),
    )
    pq.write_table(rows, folder / "restored.parquet")

    said = run("attribute", "--lake", str(lake))

    assert "the day partitions were up to date" in said
    after = r.marts_by_key(lake)
    for name, frame in before.items():  # the day's 100 samples replaced none of its figures
        assert_frame_equal(after[name], frame, check_exact=False, rel_tol=1e-12)
    assert "Deleted the raw samples of 1 day(s)" in run(
        "prune", "--keep-raw-days", "7", "--lake", str(lake)
    )
    assert not folder.exists()
    with pytest.raises(PrunedDays, match="23 day"):  # Spark rebuilds from raw samples only
        build_marts_on_spark(None, lake, {}, ())  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_day_without_its_derived_data_or_built_from_other_samples_is_kept(built):
    lake = built
    missing, changed = START + dt.timedelta(days=3), START + dt.timedelta(days=5)
    no_daily = START + dt.timedelta(days=9)
    shutil.rmtree(lake / "gpu_job_buckets" / "cluster=sim" / f"date={missing}")
    # a file landed in an old day after its partitions were built: they no longer stand for it
    (day_file,) = (lake / "gpu_samples" / "cluster=sim" / f"date={changed}").glob("*.parquet")
    shutil.copy(day_file, day_file.with_name("another-tool.parquet"))
    # the jobs' part of a day gone (its buckets stand): only its samples could give it back
    shutil.rmtree(lake / "job_gpu_daily" / "cluster=sim" / f"date={no_daily}")

    said = run("prune", "--keep-raw-days", "7", "--lake", str(lake))

    assert "Deleted the raw samples of 17 day(s)" in said
    assert f"sim {missing}: its gpu_job_buckets partition is missing" in said
    assert f"sim {changed}: its partitions are not built from its samples as they are now" in said
    before = changed - dt.timedelta(days=1)  # its last spans end at the changed day's samples
    assert f"sim {before}: the next day's samples changed since its partitions were built" in said
    assert f"sim {no_daily}: its job_gpu_daily partition is missing" in said
    # the day after a day to build again holds the first samples that end its last spans
    for kept in (changed, no_daily):
        after = kept + dt.timedelta(days=1)
        assert f"sim {after}: {kept} is kept to be built again" in said
    assert {day for _, day in sample_days(lake)} >= {
        missing,
        before,
        changed,
        changed + dt.timedelta(days=1),
        no_daily,
        no_daily + dt.timedelta(days=1),
    }


@pytest.mark.parametrize("days", ["36501", "1000000"])
def test_a_retention_past_a_century_is_one_clear_error(days, tmp_path, monkeypatch):
    # a cutoff that far back lay before the calendar's first year: an OverflowError
    result = CliRunner().invoke(cli, ["prune", "--keep-raw-days", days, "--lake", str(tmp_path)])
    assert result.exit_code == 2 and "36500" in result.output
    monkeypatch.setenv("GPULEDGER_RETENTION_FINDINGS_DAYS", days)
    result = CliRunner().invoke(cli, ["prune", "--lake", str(tmp_path)])
    assert result.exit_code != 0 and "36,500" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_the_width_of_the_first_prune_stands(tmp_path):
    # a pruned day's leftover files are pruned again by a prune at another width: the record
    # stays the width the pruned days' buckets have, and attribute at the other is refused
    from warehouse.connection import WarehouseConfig
    from warehouse.partitions import PrunedBucketWidth, build_sample_marts, mark_pruned

    mark_pruned(tmp_path, ("sim", START), 300)
    mark_pruned(tmp_path, ("sim", START), 60)
    with pytest.raises(PrunedBucketWidth, match="partitions of 300 s buckets"):
        build_sample_marts(WarehouseConfig(root=tmp_path), {"bucket_s": 60})
