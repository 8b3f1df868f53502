"""Compacting the raw tables other than samples keeps every row, so what was derived from their
files holds after the merge: compacting `jobs`/`job_gpus` must not rebuild a day partition of
the sample-level marts (a day's allocations are digested by their rows, not their files) nor
put every job of the merged batches in the summary update's scope (late records, to it), and
compacting `gpu_events` (or `gpus`, `sim_truth`, ...) must not rebuild the summary marts whole.
A scheduler batch landed again with other rows rebuilds exactly the days its allocations cover,
with the same rows none. Whenever the rows may differ from the ones the state was built from,
the work is done all the same: a batch landed again between the build and the merge or after
it, a compaction that died before its record, state never built. The raw sample files are
never rewritten. (Samples: tests/marts/test_compaction_carry.py.)"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import cli
from tests.marts import rows as r
from tests.marts.test_compaction_carry import days, every_mart_file, raw_samples
from tests.marts.test_incremental import (
    DAY_S,
    assert_same_marts,
    build,
    land_day,
    partition_files,
    rebuilt_from_scratch,
    snapshot,
)
from warehouse import compaction_log, writer
from warehouse.attribution import AttributionConfig
from warehouse.connection import WarehouseConfig, connect
from warehouse.partitions import PartitionReport, build_sample_marts
from warehouse.summary import SummaryUpdate, refresh_summary_marts

pytestmark = pytest.mark.slow  # many attribute passes: `make test` runs it, `make check` not

BATCHES = writer.COMPACT_MIN_FILES + 2  # files a partition: enough to be compacted
TODAY = dt.date(2024, 3, 10)  # days 0-2 (2024-03-01..03) are closed
SAMPLE_FILES = 3  # a file a day: too few to be compacted


def job_batch(root: Path, i: int, end_s: float = 2000.0) -> None:
    """Job j<i> holds GPU i % 2 from i × 40 min on day 0, landed as the Slurm collector lands
    a job: a batch of its own in `jobs` and in `job_gpus`."""
    start = i * 2400.0
    r.land(root, "jobs", [r.job(f"j{i}", start, start + end_s)], batch_id=f"job-{i}")
    gpu = r.job_gpu(f"j{i}", start, start + end_s, gpu_index=i % 2)
    r.land(root, "job_gpus", [gpu], batch_id=f"job-{i}")


def event_batch(root: Path, i: int, code: int = 79) -> None:
    """An XID event on day 1, a batch of its own."""
    r.land(root, "gpu_events", [r.event(DAY_S + 600 * i, "xid", code)], batch_id=f"ev-{i}")


def lake(root: Path, jobs: int = BATCHES) -> None:
    for day in range(3):
        land_day(root, day)  # owners unknown: the per-day pass decides them from job_gpus
    for i in range(BATCHES):
        if i < jobs:
            job_batch(root, i)
        event_batch(root, i)
    r.land(root, "gpus", [r.gpu(), r.gpu(gpu_index=1)])


def compact(root: Path, partitions: int = 3) -> None:
    """Compact the closed days: jobs, job_gpus (day 0) and gpu_events (day 1) by default."""
    assert writer.compact_closed_days(root, TODAY) == partitions


def sample_pass(root: Path) -> PartitionReport:
    """`attribute`'s first step: the sample-level marts' day partitions (each sample's owner
    decided there); it never rewrites a raw sample file."""
    files = raw_samples(root)
    report = build_sample_marts(WarehouseConfig(root), AttributionConfig().values())
    assert raw_samples(root) == files
    return report


def summary_update(root: Path) -> SummaryUpdate:
    """`attribute`'s step after the per-day pass."""
    return refresh_summary_marts(connect(root), root, AttributionConfig())


def attribute_steps(root: Path) -> tuple[PartitionReport, SummaryUpdate]:
    """`attribute`'s steps: the per-day pass, then the summary marts."""
    return sample_pass(root), summary_update(root)


def unread(root: Path) -> dict[tuple[str, str], int]:
    """Each reader's entries of each table still to read."""
    found = {}
    for reader, tables in compaction_log.READERS.items():
        for table in tables:
            if entries := compaction_log.merges(root, reader, table):
                found[reader, table] = len(entries)
    return found


def test_attribute_after_compacting_the_raw_tables_rebuilds_no_day_and_rewrites_no_mart(
    tmp_path,
):
    root = tmp_path / "lake"
    lake(root)
    build(root)
    before = every_mart_file(root)
    built = snapshot(root)
    samples = raw_samples(root)

    result = CliRunner().invoke(cli, ["attribute", "--lake", str(root), "-q"])

    assert result.exit_code == 0, result.output
    assert "the day partitions were up to date" in result.output
    assert "3 day partition(s) of small files compacted" in result.output
    assert every_mart_file(root) == before  # not one rewritten: same names, times, sizes
    assert raw_samples(root) == samples
    assert_same_marts(snapshot(root), built)
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))
    assert unread(root) == {}


def test_each_reader_carries_its_state_once_and_forgets_only_its_entries(tmp_path):
    root = tmp_path / "lake"
    lake(root)
    build(root)
    compact(root)
    summary_reads = {("summary", t): 1 for t in ("jobs", "job_gpus", "gpu_events")}
    assert unread(root) == summary_reads

    report = sample_pass(root)
    assert (report.rebuilt, report.tails, report.unchanged) == ((), (), SAMPLE_FILES)
    assert unread(root) == summary_reads  # the summary update's entries wait for it

    done = summary_update(root)
    assert done.mode == "unchanged", done.reason
    assert unread(root) == {}
    again, update = attribute_steps(root)
    assert (again.rebuilt, again.tails, update.mode) == ((), (), "unchanged")


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_scheduler_batch_landed_again_with_the_same_rows_rebuilds_no_day(tmp_path, when):
    root = tmp_path / "lake"
    lake(root)
    build(root)
    before = partition_files(root)
    if when == "before":
        job_batch(root, 5)  # the Slurm collector re-lands j5 as it was, before the compaction
        compact(root)
    else:
        compact(root)
        job_batch(root, 5)  # ... after it: evicts j5's rows from the compacted files

    report, done = attribute_steps(root)

    assert (report.rebuilt, report.tails, report.unchanged) == ((), (), SAMPLE_FILES)
    assert partition_files(root) == before  # not one day partition's file rewritten
    assert done.mode == "incremental", done.reason  # the jobs' files changed: late records
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))


def test_a_scheduler_batch_landed_again_before_the_compaction_is_a_late_record(tmp_path):
    root = tmp_path / "lake"
    lake(root)
    build(root)
    job_batch(root, 5, end_s=1000.0)  # the Slurm collector re-lands j5: it ended earlier
    compact(root)

    report, done = attribute_steps(root)

    assert days(report.rebuilt) == ["2024-03-01"]  # j5's day, and no other
    assert (report.tails, report.unchanged) == ((), SAMPLE_FILES - 1)
    assert done.mode == "incremental", done.reason
    assert done.late_jobs == BATCHES  # the merged files' jobs: every one, nothing carried
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))


def test_a_scheduler_batch_landed_again_after_the_compaction_is_a_late_record(tmp_path):
    root = tmp_path / "lake"
    lake(root)
    build(root)
    compact(root)
    # evicts j5's rows from the compacted files: j5 now runs on into day 1
    job_batch(root, 5, end_s=float(DAY_S))

    report, done = attribute_steps(root)

    assert days(report.rebuilt) == ["2024-03-01", "2024-03-02"]  # the days j5 covers
    assert (report.tails, report.unchanged) == ((), SAMPLE_FILES - 2)
    assert done.mode == "incremental", done.reason
    assert done.late_jobs == BATCHES  # the merged files' jobs: every one, as before the carry
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))


def test_a_compaction_that_died_before_its_record_redoes_the_work(tmp_path):
    root = tmp_path / "lake"
    lake(root)
    build(root)
    compact(root)
    # the record is written after the merges' renames: a compaction killed between them
    # leaves the lake as it is now, without the record
    (root / "_state" / "compaction.sqlite").unlink()

    report, done = attribute_steps(root)

    # the days' allocations are digested by their rows: the merged job_gpus files hold the same
    assert (report.rebuilt, report.tails, report.unchanged) == ((), (), SAMPLE_FILES)
    assert done.mode == "rebuilt" and "raw tables" in done.reason  # gpu_events' files changed
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))


def test_state_never_built_is_built(tmp_path):
    root = tmp_path / "lake"
    lake(root)
    compact(root)

    report, done = attribute_steps(root)

    assert days(report.rebuilt) == ["2024-03-01", "2024-03-02", "2024-03-03"]
    assert done.mode == "rebuilt" and "no record" in done.reason
    assert unread(root) == {}
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))


def test_compacting_gpu_events_does_not_rebuild_the_summary_marts(tmp_path):
    root = tmp_path / "lake"
    lake(root, jobs=2)
    build(root)
    before = every_mart_file(root)
    compact(root, partitions=1)  # gpu_events only

    report, done = attribute_steps(root)

    assert (report.rebuilt, report.tails) == ((), ())
    assert done.mode == "unchanged", done.reason
    assert every_mart_file(root) == before
    assert unread(root) == {}


def test_a_gpu_event_landed_again_before_the_compaction_rebuilds_the_summary_marts(tmp_path):
    root = tmp_path / "lake"
    lake(root, jobs=2)
    build(root)
    event_batch(root, 3, code=48)  # landed again between the build and the compaction
    compact(root, partitions=1)

    report, done = attribute_steps(root)

    assert (report.rebuilt, report.tails) == ((), ())  # samples' days read no gpu_events
    assert done.mode == "rebuilt" and "raw tables" in done.reason
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))
