"""DESIGN §3's layout for rows whose partition date is not a sample time: jobs, pending or not.

The contract places rows by the UTC date of `ts`/`start_ts`; a pending job has no `start_ts`,
so `jobs` is placed by `submit_ts` (which never changes between a job's versions), else by
`updated_ts`. Every version of a job then lands in one partition.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from warehouse import writer
from warehouse.arrow_arrays import TIMESTAMP
from warehouse.connection import connect
from warehouse.schema import RAW_TABLES

UTC = dt.UTC
SUBMIT = dt.datetime(2024, 3, 1, 23, 50, tzinfo=UTC)
START = dt.datetime(2024, 3, 2, 0, 10, tzinfo=UTC)  # the next UTC day


def version(state: str, start: dt.datetime | None, updated: dt.datetime) -> pa.Table:
    return pa.table(
        {
            "cluster": ["della"],
            "job_id": ["42"],
            "state": [state],
            "submit_ts": pa.array([SUBMIT], TIMESTAMP),
            "start_ts": pa.array([start], TIMESTAMP),
            "source": ["slurm"],
            "updated_ts": pa.array([updated], TIMESTAMP),
        }
    )


def test_jobs_are_placed_by_submit_date_so_a_pending_job_and_its_later_versions_share_it(
    tmp_path,
):
    [pending] = writer.write_batch(tmp_path, "jobs", version("PENDING", None, SUBMIT), "poll-1")
    [running] = writer.write_batch(tmp_path, "jobs", version("RUNNING", START, START), "poll-2")

    assert RAW_TABLES["jobs"].date_column == "submit_ts"
    assert pending.parent == running.parent
    assert pending.parent.relative_to(tmp_path).as_posix() == "jobs/cluster=della/date=2024-03-01"
    with connect(tmp_path) as con:
        assert con.sql("SELECT state, start_ts FROM jobs_latest").fetchall() == [("RUNNING", START)]


def test_relanding_a_poll_of_a_pending_job_does_not_add_a_version(tmp_path):
    for _ in range(2):
        writer.write_batch(tmp_path, "jobs", version("PENDING", None, SUBMIT), "poll-1")

    with connect(tmp_path) as con:
        assert con.sql("SELECT count(*) FROM jobs").fetchall() == [(1,)]
