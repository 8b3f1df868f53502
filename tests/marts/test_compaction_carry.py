"""Compaction merges a closed day's small sample files without changing a row, so the per-day
pass must not rebuild that day (nor the tail of the day before) for it: the marts stay as they
were built and equal a rebuild from scratch. Whenever the rows may differ from the ones a day
was built from, the day is rebuilt all the same: a batch landed again between the build and the
compaction, or after it; a day never built; a compaction that died before it was recorded."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import cli
from tests.marts import rows as r
from tests.marts.test_incremental import (
    DAY_S,
    assert_same_marts,
    build,
    day_of,
    day_samples,
    partition_files,
    rebuilt_from_scratch,
    snapshot,
)
from warehouse import compaction_log, layout, writer
from warehouse.attribution import AttributionConfig
from warehouse.connection import WarehouseConfig
from warehouse.partitions import PartitionReport, build_sample_marts
from warehouse.schema import MARTS

pytestmark = pytest.mark.slow  # many attribute passes: `make test` runs it, `make check` not

SCRAPES = writer.COMPACT_MIN_FILES + 4  # files a day: enough to be compacted
TODAY = dt.date(2024, 3, 10)  # days 0-2 (2024-03-01..03) are closed


JOB = (3600, 2 * DAY_S + 7200)  # j1 holds GPU 0 from day 0 into day 2


def land_day_in_scrapes(root: Path, day: int, power_w: float = 200.0) -> None:
    """One day of two GPUs, landed as SCRAPES files (a collector landing one per scrape); the
    samples' owner is decided from `job_gpus` when their day is built."""
    rows = day_samples(day, 0) + day_samples(day, 1)
    rows.sort(key=lambda row: row["ts"])
    for row in rows:
        row["power_w"] = power_w
    per = -(-len(rows) // SCRAPES)
    for i in range(SCRAPES):
        part = rows[i * per : (i + 1) * per]
        r.land(root, "gpu_samples", part, batch_id=f"d{day}-scrape-{i:03d}")


def lake(root: Path, days: int = 3) -> None:
    for day in range(days):
        land_day_in_scrapes(root, day)
    r.land(root, "jobs", [r.job("j1", *JOB)])
    r.land(root, "job_gpus", [r.job_gpu("j1", *JOB, gpu_index=0)])
    r.land(root, "gpus", [r.gpu(), r.gpu(gpu_index=1)])


def sample_files_per_day(root: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in layout.table_files(root, "gpu_samples"):
        counts[path.parent.name] = counts.get(path.parent.name, 0) + 1
    return counts


def days(keys: tuple[tuple[str, dt.date], ...]) -> list[str]:
    return [day.isoformat() for _, day in keys]


def raw_samples(root: Path) -> dict[str, bytes]:
    """Every gpu_samples file (relative path) -> its bytes."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in layout.table_files(root, "gpu_samples")
    }


def compact(root: Path) -> None:
    assert writer.compact_closed_days(root, TODAY) >= 1
    assert set(sample_files_per_day(root).values()) == {1}


def sample_pass(root: Path) -> PartitionReport:
    """`attribute`'s first step: the sample-level marts' day partitions (each sample's owner
    decided there); it reads the raw sample files and never rewrites one."""
    files = raw_samples(root)
    report = build_sample_marts(WarehouseConfig(root), AttributionConfig().values())
    assert raw_samples(root) == files
    return report


def every_mart_file(root: Path) -> dict[str, tuple[int, int]]:
    """Every mart file (relative path) -> (mtime_ns, size)."""
    found = {}
    for mart in MARTS:
        for path in (root / mart).rglob("*.parquet"):
            stat = path.stat()
            found[str(path.relative_to(root))] = (stat.st_mtime_ns, stat.st_size)
    return found


def test_attribute_after_compaction_leaves_every_mart_file_as_it_was(tmp_path):
    root = tmp_path / "lake"
    lake(root)
    build(root)  # built from the small files, before compaction existed
    before = every_mart_file(root)
    built = snapshot(root)

    # the days of 2024 are long closed: `attribute` compacts them, then brings the marts up
    result = CliRunner().invoke(cli, ["attribute", "--lake", str(root), "-q"])

    assert result.exit_code == 0, result.output
    assert "3 day partition(s) of small files compacted" in result.output
    assert sample_files_per_day(root) == {f"date=2024-03-0{d}": 1 for d in (1, 2, 3)}
    assert every_mart_file(root) == before  # not one rewritten: same names, times, sizes
    assert_same_marts(snapshot(root), built)
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))


def test_the_pass_carries_the_days_across_once_and_forgets_the_record(tmp_path):
    root = tmp_path / "lake"
    lake(root)
    build(root)
    compact(root)
    assert len(compaction_log.merges(root, "sample_days", "gpu_samples")) == 3

    report = sample_pass(root)

    assert (report.rebuilt, report.tails) == ((), ())
    assert days(report.carried) == ["2024-03-01", "2024-03-02", "2024-03-03"]
    assert compaction_log.merges(root, "sample_days", "gpu_samples") == {}
    again = sample_pass(root)
    assert (again.rebuilt, again.tails, again.carried, again.unchanged) == ((), (), (), 3)


def test_a_batch_landed_again_between_the_build_and_the_compaction_rebuilds_its_day(tmp_path):
    root = tmp_path / "lake"
    lake(root)
    build(root)
    before = partition_files(root)
    land_day_in_scrapes(root, 1, power_w=350.0)  # every batch of day 1 again, other values
    compact(root)

    report = sample_pass(root)

    assert days(report.rebuilt) == ["2024-03-02"]
    assert days(report.tails) == ["2024-03-01"]  # its first samples end day 0's last spans
    assert days(report.carried) == ["2024-03-03"]
    after = partition_files(root)
    assert all(after[p] == v for p, v in before.items() if day_of(p) == "date=2024-03-03")
    build(root)
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))


def test_a_batch_landed_again_after_the_compaction_rebuilds_its_day(tmp_path):
    root = tmp_path / "lake"
    lake(root)
    build(root)
    compact(root)
    land_day_in_scrapes(root, 2, power_w=350.0)  # evicts its rows from the compacted file

    report = sample_pass(root)

    assert days(report.rebuilt) == ["2024-03-03"]
    assert days(report.tails) == ["2024-03-02"]
    assert days(report.carried) == ["2024-03-01"]
    build(root)
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))


def test_a_day_never_built_is_built(tmp_path):
    root = tmp_path / "lake"
    lake(root, days=2)
    build(root)
    land_day_in_scrapes(root, 2)  # lands after the build
    compact(root)

    report = sample_pass(root)

    assert days(report.rebuilt) == ["2024-03-03"]
    assert days(report.tails) == ["2024-03-02"]  # built when it had no next day
    assert days(report.carried) == ["2024-03-01"]
    build(root)
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))


def test_a_compaction_that_died_before_its_record_rebuilds_the_days(tmp_path):
    root = tmp_path / "lake"
    lake(root)
    build(root)
    compact(root)
    # the record is written after the merges' renames: a compaction killed between them
    # leaves the lake as it is now, without the record
    (root / "_state" / "compaction.sqlite").unlink()

    report = sample_pass(root)

    assert days(report.rebuilt) == ["2024-03-01", "2024-03-02", "2024-03-03"]
    assert report.carried == ()
    build(root)
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))


def test_a_day_built_with_other_settings_is_rebuilt(tmp_path):
    # the record says which files hold the same rows, not that the marts were built right
    root = tmp_path / "lake"
    lake(root)
    build_sample_marts(WarehouseConfig(root), AttributionConfig(idle_below=0.5).values())
    compact(root)

    report = sample_pass(root)

    assert days(report.rebuilt) == ["2024-03-01", "2024-03-02", "2024-03-03"]
    build(root)
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))
