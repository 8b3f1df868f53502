"""History features see only jobs that had ended before a job started."""

from __future__ import annotations

import math

import pytest

from detectors.models.history import PRIOR_WASTE_RATE, PRIOR_WEIGHT, time_split, with_history
from tests.detectors.models.frames import job, jobs


def by_id(frame):
    return {r["job_id"]: r for r in frame.to_dicts()}


def test_a_users_waste_rate_counts_only_jobs_ended_before_the_start():
    rows = by_id(
        with_history(
            jobs(
                [
                    job("1", 0, 2, low_busy_frac=0.9),  # wasteful
                    job("2", 1, 3, low_busy_frac=0.1),  # fine, but still running at 2.5 h
                    job("3", 2.5, 4),
                    job("4", 5, 6),
                ]
            )
        )
    )
    prior = PRIOR_WASTE_RATE * PRIOR_WEIGHT
    assert rows["1"]["user_waste_rate"] == pytest.approx(PRIOR_WASTE_RATE)  # nothing before
    assert rows["1"]["user_jobs_before"] == 0
    assert rows["3"]["user_waste_rate"] == pytest.approx((1 + prior) / (1 + PRIOR_WEIGHT))
    assert rows["3"]["user_jobs_before"] == 1
    assert rows["4"]["user_waste_rate"] == pytest.approx((1 + 0 + 0 + prior) / (3 + PRIOR_WEIGHT))


def test_last_two_run_times_are_the_tsafrir_baseline():
    rows = by_id(
        with_history(jobs([job("1", 0, 1), job("2", 1, 5), job("3", 5, 13), job("4", 20, 21)]))
    )
    assert rows["1"]["user_last2_log_runtime"] is None
    assert rows["2"]["user_last2_log_runtime"] == pytest.approx(math.log(3600))
    assert rows["4"]["user_last2_log_runtime"] == pytest.approx(
        (math.log(4 * 3600) + math.log(8 * 3600)) / 2
    )
    assert rows["4"]["user_mean_log_runtime"] == pytest.approx(
        (math.log(3600) + math.log(4 * 3600) + math.log(8 * 3600)) / 3
    )


def test_failed_jobs_do_not_count_as_run_times():
    rows = by_id(with_history(jobs([job("1", 0, 0.1, state="FAILED"), job("2", 1, 2)])))
    assert rows["2"]["user_mean_log_runtime"] is None
    assert rows["2"]["user_jobs_before"] == 1  # but count for the waste rate


def test_other_users_history_is_not_mine():
    rows = by_id(
        with_history(jobs([job("1", 0, 1, user="bob", low_busy_frac=1.0), job("2", 2, 3)]))
    )
    assert rows["2"]["user_waste_rate"] == pytest.approx(PRIOR_WASTE_RATE)
    assert rows["2"]["account_waste_rate"] > PRIOR_WASTE_RATE  # same account


def test_time_split_keeps_the_first_part_for_training():
    frame = jobs([job(str(i), i, i + 1) for i in range(11)])
    assert time_split(frame, "start_ts", 0.7).to_list() == [True] * 8 + [False] * 3


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="low_busy_frac"):
        with_history(jobs([job("1", 0, 1)]).drop("low_busy_frac"))
