"""`Lake.read_settled`: a read that failed while a writer replaced lake files under it is run
again; one that failed on files nobody changed is raised at once."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.marts import rows as r
from warehouse.lake import Lake


def lake_of_samples(root: Path) -> Lake:
    r.land(root, "gpu_samples", r.samples([0, 30, 60]))
    return Lake.at(root)


def test_a_read_that_failed_while_a_writer_replaced_a_file_is_read_again(tmp_path):
    # detect failed in 6 of 14 runs beside a collector re-landing its windows
    lake = lake_of_samples(tmp_path)
    calls = []

    def read() -> int:
        calls.append(1)
        if len(calls) == 1:  # a collector lands its window again meanwhile
            r.land(tmp_path, "gpu_samples", r.samples([0, 30, 60, 90]))
            raise duckdb.Error("TProtocolException: Invalid data")
        (count,) = lake.connect().execute("SELECT count(*) FROM gpu_samples").fetchone() or (0,)
        return int(count)

    assert lake.read_settled(read, wait_s=0) == 4
    assert len(calls) == 2


def test_a_read_that_failed_on_files_nobody_changed_is_raised_at_once(tmp_path):
    lake = lake_of_samples(tmp_path)
    calls = []

    def read() -> None:
        calls.append(1)
        raise duckdb.Error("a damaged file")

    with pytest.raises(duckdb.Error, match="a damaged file"):
        lake.read_settled(read, wait_s=0)
    assert len(calls) == 1


def test_a_lake_that_keeps_changing_is_given_up_on_after_the_attempts(tmp_path):
    lake = lake_of_samples(tmp_path)
    calls = []

    def read() -> None:
        calls.append(1)
        r.land(tmp_path, "gpu_samples", r.samples(range(0, 30 * (len(calls) + 3), 30)))
        raise duckdb.Error("Invalid data")

    with pytest.raises(duckdb.Error):
        lake.read_settled(read, attempts=3, wait_s=0)
    assert len(calls) == 3


def test_a_file_gone_under_the_read_is_the_race_too_and_only_the_named_tables_count(tmp_path):
    # `attribute` beside an import re-landing its batches: "No such file or directory" for a
    # file listed a moment before, as a traceback (the CLI's attribute did not read again)
    lake = lake_of_samples(tmp_path)
    calls = []

    def read() -> int:
        calls.append(1)
        if len(calls) == 1:
            r.land(tmp_path, "gpu_samples", r.samples([0, 30, 60, 90]))
            raise FileNotFoundError(2, "No such file or directory", "gone.parquet")
        return len(calls)

    assert lake.read_settled(read, wait_s=0, tables=["gpu_samples"]) == 2
    # a change to another table than those named is no reason to read again
    calls.clear()

    def other_changed() -> None:
        calls.append(1)
        r.land(tmp_path, "job_usage", [{"cluster": r.CLUSTER, "job_id": str(len(calls))}])
        raise duckdb.Error("a damaged sample file")

    with pytest.raises(duckdb.Error, match="damaged"):
        lake.read_settled(other_changed, wait_s=0, tables=["gpu_samples"])
    assert len(calls) == 1
