"""`as_of(data, now)`: a replay sees only what was known at `now`."""

from __future__ import annotations

import datetime as dt

import polars as pl

from detectors.models import as_of
from detectors.models.training import TrainingData
from tests.detectors.models.frames import failures, hour, hourly, job, jobs


def data() -> TrainingData:
    node_days = pl.DataFrame(
        {
            "cluster": ["c", "c"],
            "node": ["n1", "n1"],
            "day": [dt.date(2026, 1, 5), dt.date(2026, 1, 6)],
        }
    )
    return TrainingData(
        hourly=hourly([0] * 30),
        failures=failures([("GPU-a", 5.5), ("GPU-a", 28.0)]),
        jobs=jobs([job("1", 0, 2, low_busy_frac=0.9), job("2", 1, 10), job("3", 12, 13)]),
        early={},
        node_days=node_days,
    )


def test_a_job_that_ends_after_now_is_still_running_then():
    known = as_of(data(), hour(5))
    rows = {r["job_id"]: r for r in known.jobs.to_dicts()}
    assert set(rows) == {"1", "2"}  # job 3 had not started
    assert rows["1"]["end_ts"] == hour(2) and rows["1"]["low_busy_frac"] == 0.9
    assert rows["2"]["end_ts"] is None and rows["2"]["runtime_s"] is None
    assert rows["2"]["low_busy_frac"] is None


def test_hours_events_and_days_after_now_are_unknown():
    known = as_of(data(), hour(24))
    assert known.hourly["hour"].max() == hour(23)  # the hour 23-24 ended at now
    assert known.failures.height == 1
    assert known.node_days["day"].to_list() == [dt.date(2026, 1, 5)]  # day 2 not over
