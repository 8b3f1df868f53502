"""A reader sees a table's files now and, for the merges it has not read whose partition holds
exactly the files after, the listing before them: the same rows under other files."""

from __future__ import annotations

import shutil

from tests.marts import rows as r
from warehouse import compaction_log, layout, writer

DAY_S = 86400


def lake_with_small_batches(root):
    for i in range(3):  # day 0: three batches, merged below
        r.land(root, "job_gpus", [r.job_gpu(f"j{i}", 600.0 * i, 600.0 * i + 300)], f"b{i}")
    r.land(root, "job_gpus", [r.job_gpu("j9", DAY_S, DAY_S + 300)], "b9")  # day 1: one
    first = layout.table_files(root, "job_gpus")[0]
    outside = root / "job_gpus" / "cluster=della" / "another-tool.parquet"  # no date folder
    shutil.copy(first, outside)


def test_a_reader_sees_the_listing_before_a_merge_that_holds(tmp_path):
    root = tmp_path / "lake"
    lake_with_small_batches(root)
    listed = layout.files_listing(layout.table_files(root, "job_gpus"))

    assert writer.compact(root, "job_gpus", 2, log=True) == 1
    carried = compaction_log.carry(root, "summary", "job_gpus")

    assert carried.now == layout.files_listing(layout.table_files(root, "job_gpus"))
    assert carried.now != listed
    assert carried.before == listed
    assert [day.isoformat() for _, day in carried.holds] == ["2024-03-01"]


def test_a_batch_landed_after_the_merge_leaves_the_files_as_they_are(tmp_path):
    root = tmp_path / "lake"
    lake_with_small_batches(root)
    writer.compact(root, "job_gpus", 2, log=True)
    r.land(root, "job_gpus", [r.job_gpu("j1", 600.0, 700.0)], "b1")  # evicts j1's row

    carried = compaction_log.carry(root, "summary", "job_gpus")

    assert carried.holds == {}
    assert carried.before == carried.now
    assert len(compaction_log.merges(root, "summary", "jobs")) == 0  # no merge of jobs
    compaction_log.forget(root, "summary", "job_gpus", carried.read)
    assert compaction_log.merges(root, "summary", "job_gpus") == {}
