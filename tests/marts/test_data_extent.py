"""data_extent (sql/views/data_extent.sql): the end of each cluster's data, every rule's "now",
on hand-made rows. A time after tomorrow by this machine's clock comes from a wrong clock and
is no end of the data; one up to tomorrow is."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.marts import rows as r
from warehouse.checks import run_checks

H = 3600.0


def _from_now(delta: dt.timedelta) -> float:
    """Seconds after T0 of the wall clock's now + `delta` (rows.py's times are after T0)."""
    return (dt.datetime.now(dt.UTC) + delta - r.T0).total_seconds()


# The lakes' data: two hours from midnight two days ago (near the wall clock, so that a record
# a month ahead does not make the marts span the years since rows.py's T0). A month ahead is
# past tomorrow, as a clock years off is.
BASE = _from_now(-dt.timedelta(days=2)) // 86400 * 86400
AHEAD = _from_now(dt.timedelta(days=30))


def _extent(con) -> tuple[dt.datetime, dt.datetime]:
    [(start, end)] = con.sql("SELECT data_start, data_end FROM data_extent").fetchall()
    return start, end


def _lake(tmp_path, jobs, events=(), end=BASE + 2 * H):
    return r.build_lake(
        tmp_path,
        samples=r.samples(range(int(BASE), int(BASE + 2 * H), 30), engine_active=0.5),
        jobs=[r.job("j1", BASE, end), *jobs],
        job_gpus=[r.job_gpu("j1", BASE, end)],
        events=list(events),
    )


def test_a_scheduler_record_or_event_from_a_clock_ahead_moves_no_end_of_the_data(tmp_path):
    # collected by a host whose clock is ahead: its submit, end and collection times
    late = r.job("j2", BASE, AHEAD, submit_ts=r.at(AHEAD), updated_ts=r.at(AHEAD))
    con = _lake(tmp_path, [late], [r.event(AHEAD, "xid", 79)])

    start, end = _extent(con)

    assert start == r.at(BASE)
    assert end == r.at(BASE + 2 * H)  # the last sample's interval and j1's end, not a month on


def test_a_record_stamped_tomorrow_is_still_the_end_of_the_data(tmp_path):
    tomorrow = _from_now(dt.timedelta(hours=20))
    con = _lake(tmp_path, [r.job("j2", BASE, BASE + H, updated_ts=r.at(tomorrow))])

    _, end = _extent(con)

    assert abs((end - r.at(tomorrow)).total_seconds()) < 0.001


def test_a_job_whose_end_and_collection_are_a_month_ahead_claims_no_gpu_hours(tmp_path):
    """The record stays in the lake; neither its end nor its collection is a time the data
    reached (jobs_latest): its run is unknown, and no GPU-hour is claimed for it. It ran a
    month past the data, and the audit named it."""
    con = _lake(tmp_path, [], end=AHEAD)

    [(alloc,)] = con.sql("SELECT alloc_gpu_h FROM job_usage WHERE job_id = 'j1'").fetchall()
    assert alloc == 0
    assert run_checks(con, ("job_gpu_hours",)) == []


def test_a_cluster_without_samples_runs_its_open_allocations_to_its_records_latest_time(
    tmp_path,
):
    """Scheduler records alone (Slurm or Kubernetes collected, no GPU telemetry): a job still
    running holds its GPUs to the latest time the records give (j2's end, 3 h in), in every
    mart; with job_gpus rows or without (its gpus over its run). A record from a clock a month
    ahead moves it not. Before, the cluster had no end of data: the job held 0 GPU-hours."""
    ahead = r.job("j3", BASE, BASE + H, submit_ts=r.at(AHEAD), updated_ts=r.at(AHEAD))
    con = r.build_lake(
        tmp_path,
        jobs=[
            r.job("run", BASE, None, state="RUNNING", gpus=2),
            r.job("free", BASE + H, None, state="RUNNING", gpus=1),
            r.job("j2", BASE, BASE + 3 * H),
            ahead,
        ],
        job_gpus=[
            r.job_gpu("run", BASE, None),
            r.job_gpu("run", BASE, None, gpu_index=1),
            r.job_gpu("j2", BASE, BASE + 3 * H, gpu_index=2),
            r.job_gpu("j3", BASE, BASE + H, gpu_index=3),
        ],
    )

    usage = {row["job_id"]: row["alloc_gpu_h"] for row in r.fetch(con, "SELECT * FROM job_usage")}
    assert usage["run"] == pytest.approx(6.0)
    assert usage["free"] == pytest.approx(2.0)
    [(daily,)] = con.sql("SELECT sum(alloc_gpu_h) FROM usage_daily").fetchall()
    [(weekly,)] = con.sql(
        "SELECT sum(alloc_gpu_h) FROM fairness_weekly WHERE level = 'account'"
    ).fetchall()
    assert daily == pytest.approx(6.0 + 2.0 + 3.0 + 1.0)
    assert weekly == pytest.approx(daily)


def test_an_end_after_tomorrow_is_no_end_the_job_ended_by_its_records_collection(tmp_path):
    """A "9999-12-31" end (a trace's unknown, a wrong clock): taken as an end, `attribute`
    built a day partition of every day to the year 9999 (hours, gigabytes) and counted
    GPU-hours that had not happened. It is no end the data reached: the job had ended by its
    record's collection (2 h in), and its allocation runs to there (the job_gpus row with that
    end too), on the days of the data alone."""
    far = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC)
    collected = r.at(BASE + 2 * H)
    ahead = r.job("j2", BASE, None) | {"end_ts": far, "state": "COMPLETED", "updated_ts": collected}
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(int(BASE), int(BASE + 2 * H), 30), engine_active=0.5),
        jobs=[r.job("j1", BASE, BASE + H), ahead],
        job_gpus=[
            r.job_gpu("j1", BASE, BASE + H),
            r.job_gpu("j2", BASE, None, gpu_index=1) | {"end_ts": far},
        ],
    )

    usage = {row["job_id"]: row["alloc_gpu_h"] for row in r.fetch(con, "SELECT * FROM job_usage")}
    assert usage == {"j1": pytest.approx(1.0), "j2": pytest.approx(2.0)}
    [(days, last)] = con.sql("SELECT count(DISTINCT date), max(date) FROM usage_daily").fetchall()
    assert days <= 2 and last <= r.at(BASE + 2 * H).date()
