"""The failing-GPU model's features, labels, alarm episodes and self-check, on hand-made hours."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.models import failing_gpu as fg
from tests.detectors.models.frames import failures, hour, hourly
from tests.infra.examples import examples


def test_corrected_ecc_trend_is_the_difference_over_the_past_hours():
    frame = fg.features(hourly([0, 0, 2, 5, None, 9, 20]))
    assert frame["sbe"].to_list() == [0, 0, 2, 5, 5, 9, 20]  # a missing count keeps the last one
    assert frame["sbe_d1"].to_list() == [0, 0, 2, 3, 0, 4, 11]
    assert frame["sbe_d3"].to_list() == [0, 0, 0, 5, 5, 7, 15]
    assert frame["hour_end"][0] == hour(1)


def test_xids_are_summed_over_the_last_six_hours():
    frame = fg.features(hourly([0] * 8, xids=[1, 0, 0, 0, 0, 0, 2, 0]))
    assert frame["xids_6h"].to_list() == [1, 1, 1, 1, 1, 1, 2, 2]
    assert frame["xids_total"].to_list() == [1, 1, 1, 1, 1, 1, 3, 3]


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="sbe_max"):
        fg.features(hourly([0]).drop("sbe_max"))


def test_label_is_a_failure_within_the_horizon_after_the_hour():
    # failure at T0 + 10.5 h; hour 0 ends at 1 h: 9.5 h ahead
    frame = fg.label(fg.features(hourly([0] * 14)), failures([("GPU-a", 10.5)]), horizon_h=5)
    ahead = dict(zip(frame["hour"].to_list(), frame["hours_to_failure"].to_list(), strict=True))
    assert ahead[hour(0)] == pytest.approx(9.5)
    labels = frame["label"].to_list()
    # hours 0-4 end 5.5+ h before; hours 5-9 end within 5 h before; 10+ end after the failure
    assert labels == [False] * 5 + [True] * 5 + [False] * 4
    # hours ending after the failure are the broken GPU's, not predictions
    assert frame["failed_recently"].to_list() == [False] * 10 + [True] * 4


def test_failures_of_another_gpu_do_not_label_this_one():
    frame = fg.label(fg.features(hourly([0] * 5)), failures([("GPU-b", 3)]), horizon_h=24)
    assert not frame["label"].any()


def scored(scores, gpu="GPU-a"):
    frame = fg.features(hourly([0] * len(scores), gpu=gpu))
    return frame.with_columns(pl.Series("score", scores, pl.Float64))


def test_consecutive_alarm_hours_are_one_episode_raised_at_the_first():
    frame = scored([0.1, 0.9, 0.8, 0.2, 0.95, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.9])
    episodes = fg.alarm_episodes(frame, threshold=0.5, merge_gap_h=6)
    # hours 1, 2, 4 alarm (gap 2 h <= 6: one episode); hour 11 is 7 h after hour 4: a new one
    assert episodes["detected_ts"].to_list() == [hour(2), hour(12)]
    assert episodes["end_ts"].to_list() == [hour(5), hour(12)]
    assert episodes["hours"].to_list() == [3, 1]
    assert episodes["score"].to_list() == [0.9, 0.9]


def test_no_alarm_no_episode():
    assert fg.alarm_episodes(scored([0.1, 0.2]), 0.5, 6).is_empty()


@settings(max_examples=examples(60), deadline=None)
@given(
    scores=st.lists(st.floats(0, 1), min_size=1, max_size=30),
    low=st.floats(0, 1),
    extra=st.floats(0, 1),
)
def test_raising_the_threshold_never_adds_alarm_hours(scores, low, extra):
    frame = scored(scores)
    at_low = fg.alarm_episodes(frame, low, 6)
    at_high = fg.alarm_episodes(frame, low + extra, 6)
    assert at_high["hours"].sum() <= at_low["hours"].sum()


def test_self_check_counts_warnings_and_false_alarms_by_hand():
    config = fg.FailingGpuConfig(alarm_window_h=24, min_lead_h=1)
    a = scored([0.0] * 10 + [0.9] + [0.0] * 9, gpu="GPU-a")  # alarm at 11 h, fails at 15 h
    b = scored([0.9] + [0.0] * 19, gpu="GPU-b")  # alarm at 1 h, never fails: a false alarm
    c = scored([0.0] * 20, gpu="GPU-c")  # fails at 12 h unwarned
    fails = failures([("GPU-a", 15.0), ("GPU-c", 12.0)])
    check = fg.self_check(pl.concat([a, b, c]), fails, 0.5, config)
    assert (check.failures, check.warned, check.alarms, check.false_alarms) == (2, 1, 2, 1)
    assert check.gpu_days == pytest.approx(60 / 24)
    assert check.false_alarms_per_1000_gpu_days == pytest.approx(1000 / 2.5)
    assert check.recall == 0.5


def test_a_warning_less_than_the_minimum_lead_does_not_count():
    config = fg.FailingGpuConfig(min_lead_h=1)
    a = scored([0.0] * 14 + [0.9] + [0.0] * 5)  # alarm at 15 h, fails at 15.5 h
    check = fg.self_check(a, failures([("GPU-a", 15.5)]), 0.5, config)
    assert (check.warned, check.false_alarms) == (0, 0)


def test_the_model_learns_that_a_rising_corrected_ecc_count_precedes_failure():
    parts, fails = [], []
    for i in range(12):
        rising = [0] * 30 + [int(2 ** (k / 2)) for k in range(18)]
        parts.append(hourly(rising, gpu=f"GPU-f{i}"))
        fails.append((f"GPU-f{i}", 48.5))
        parts.append(hourly([3] * 48, gpu=f"GPU-h{i}"))  # a flat count: healthy
    frame = fg.label(fg.features(pl.concat(parts)), failures(fails), horizon_h=12)
    model = fg.fit(frame)
    out = fg.score(model, frame)
    last = out.filter(pl.col("hour") == hour(46))
    failing = last.filter(pl.col("gpu_uuid").str.starts_with("GPU-f"))["score"].min()
    healthy = last.filter(pl.col("gpu_uuid").str.starts_with("GPU-h"))["score"].max()
    assert failing > 0.5 > healthy


def test_the_time_splits_training_hours_end_a_horizon_before_its_test_hours():
    # a training hour labels itself by the next 24 h: the last training hours learnt the test
    # part's failure, which the card then counted as held out (recall 1.0 on one failure)
    import datetime as dt

    from detectors.models.training import _folds

    start = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
    hours = [start + dt.timedelta(hours=h) for h in range(100)]
    one = pl.DataFrame({"cluster": ["a"] * 100, "hour": hours})
    [(train, test)] = _folds(one, "hour", 24.0)
    first_test = min(one.filter(test)["hour"])
    last_train = max(one.filter(train)["hour"])
    assert first_test == start + dt.timedelta(hours=70)
    assert last_train + dt.timedelta(hours=25) <= first_test  # the hour, then its 24 h label
    assert last_train == start + dt.timedelta(hours=45)
    assert not (train & test).any()
    [(plain, _)] = _folds(one, "hour")  # no horizon: nothing purged
    assert max(one.filter(plain)["hour"]) == start + dt.timedelta(hours=69)
    two = pl.concat([one, one.with_columns(pl.lit("b").alias("cluster"))])
    folds = _folds(two, "hour", 24.0)  # clusters apart: nothing of one is in the other's label
    assert [int(t.sum()) for t, _ in folds] == [100, 100]
