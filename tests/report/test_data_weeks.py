"""A week has data only where some sample interval or allocation lies inside it for a positive
length and something was recorded in it — not the week that begins as the data end.

T0 (tests.marts.rows) is Friday 2024-03-01; 2024-W09 ends at Monday 00:00 = T0 + 3 days.
"""

from __future__ import annotations

import datetime as dt

import pytest

from app.report.data import data_weeks
from app.report.week import IsoWeek, covered
from tests.marts.rows import T0, build_lake, gpu, job, job_gpu, samples

MONDAY_S = 3 * 86400.0  # the end of W09, seconds after T0
HOUR = 3600.0
W09, W10 = IsoWeek(2024, 9), IsoWeek(2024, 10)
NOW = T0 + dt.timedelta(days=30)


def lake(root, *, running_samples_to: float | None):
    """j1: 1 GPU over the last hour of W09, ending exactly at Monday 00:00, with a 2 h limit (the
    unused hour is booked to W10), sampled every 30 s to the end (the last interval ends at
    Monday 00:00 exactly). With `running_samples_to`: j2 still running on a second GPU, sampled
    every 30 s from an hour before Monday to that time (seconds after T0)."""
    rows = samples(range(int(MONDAY_S - HOUR), int(MONDAY_S), 30), engine_active=1.0)
    jobs = [job("j1", MONDAY_S - HOUR, MONDAY_S, time_limit_s=7200)]
    job_gpus = [job_gpu("j1", MONDAY_S - HOUR, MONDAY_S)]
    if running_samples_to is not None:
        times = [MONDAY_S - HOUR + 10 + 30 * k for k in range(300)]
        rows += samples([t for t in times if t <= running_samples_to], gpu_index=1)
        jobs.append(job("j2", MONDAY_S - HOUR, None, state="RUNNING"))
        job_gpus.append(job_gpu("j2", MONDAY_S - HOUR, None, gpu_index=1))
    return build_lake(
        root, samples=rows, jobs=jobs, job_gpus=job_gpus, gpus=[gpu(), gpu(gpu_index=1)]
    )


def test_data_ending_exactly_at_monday_make_no_week_of_the_next(tmp_path):
    con = lake(tmp_path, running_samples_to=None)
    found = data_weeks(con, ["della"])
    assert found.data_end == T0 + dt.timedelta(seconds=MONDAY_S)
    assert found.weeks == [W09]  # not W10, where only j1's unused limit is booked
    assert found.span == "2024-W09"
    assert found.default(NOW) == W09
    assert covered(W09, found.data_end, NOW)


def test_the_last_sample_interval_reaching_past_monday_makes_no_week(tmp_path):
    # j2's last sample at Monday − 20 s stands for 30 s: the data (and j2, running, counted to
    # their end) reach 10 s into W10, but nothing was recorded there.
    con = lake(tmp_path, running_samples_to=MONDAY_S - 20)
    found = data_weeks(con, ["della"])
    assert found.data_end == T0 + dt.timedelta(seconds=MONDAY_S + 10)
    assert found.weeks == [W09]
    assert found.default(NOW) == W09


@pytest.mark.parametrize("last_sample", [MONDAY_S + 10, MONDAY_S + HOUR + 10])
def test_a_sample_taken_in_the_next_week_makes_it_a_week_with_data(tmp_path, last_sample):
    con = lake(tmp_path, running_samples_to=last_sample)
    found = data_weeks(con, ["della"])
    assert found.weeks == [W09, W10]
    assert found.span == "2024-W09 to 2024-W10"
    assert found.data_end == T0 + dt.timedelta(seconds=last_sample + 30)


def test_the_reports_data_end_is_every_rules_with_the_records_collection(tmp_path):
    """The scheduler's records alone: j2 still running, its record collected 5 h after the
    last start or end. The report ended its data at that start (and counted j2 to 5 h later
    in its figures); it now ends where data_extent, every rule's "now", does."""
    collected = T0 + dt.timedelta(seconds=MONDAY_S - HOUR + 5 * HOUR)
    con = build_lake(
        tmp_path,
        jobs=[
            job("j1", MONDAY_S - 2 * HOUR, MONDAY_S - HOUR),
            job("j2", MONDAY_S - HOUR, None, state="RUNNING", updated_ts=collected),
        ],
        job_gpus=[job_gpu("j1", MONDAY_S - 2 * HOUR, MONDAY_S - HOUR)],
    )

    found = data_weeks(con, ["della"])

    assert found.data_end == collected
    [(extent,)] = con.sql("SELECT data_end FROM data_extent").fetchall()
    assert extent == collected
