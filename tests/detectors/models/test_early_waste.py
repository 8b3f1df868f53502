"""Early waste: rows, labels, and the precision-at-recall comparison with the baseline."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.models import early_waste
from tests.detectors.models.frames import job, jobs
from tests.infra.examples import examples

EARLY_SCHEMA = {
    "cluster": pl.String,
    "job_id": pl.String,
    "early_observed_s": pl.Float64,
    "early_busy": pl.Float64,
    "early_idle_frac": pl.Float64,
    "early_sm": pl.Float64,
    "early_fb_mib_max": pl.Float64,
    "early_devices": pl.Int64,
    "early_devices_active": pl.Int64,
}


def early(rows):
    return pl.DataFrame(
        [
            {
                "cluster": "c",
                "job_id": j,
                "early_observed_s": 1800.0,
                "early_busy": b,
                "early_idle_frac": 1 - b,
                "early_sm": None,
                "early_fb_mib_max": 100.0,
                "early_devices": 2,
                "early_devices_active": a,
            }
            for j, b, a in rows
        ],
        schema=EARLY_SCHEMA,
    )


def test_only_jobs_still_running_after_the_window_are_predicted():
    frame = early_waste.frame(
        jobs([job("short", 0, 0.5), job("long", 0, 3, low_busy_frac=0.8), job("run", 1, None)]),
        early([("short", 0.5, 2), ("long", 0.0, 0), ("run", 0.9, 2)]),
        minutes=30,
    )
    rows = {r["job_id"]: r for r in frame.to_dicts()}
    assert set(rows) == {"long", "run"}  # 0.5 h is not 30 min + 5 min
    assert rows["long"]["label"] is True  # most of its run below 20 % busy
    assert rows["run"]["label"] is None  # still running: unknown
    assert rows["long"]["early_sm"] == 0.0  # falls back to busy where SM is not reported
    assert rows["run"]["early_active_frac"] == 1.0


@pytest.mark.parametrize(
    ("labels", "scores", "recall", "expected"),
    [
        ([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1], 0.5, 1.0),  # the top score alone reaches 0.5
        ([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1], 1.0, 2 / 3),  # both positives need 3 flags
        ([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5], 0.5, 0.5),  # ties go together
        ([0, 0], [0.3, 0.2], 0.5, None),  # no positive: undefined
    ],
)
def test_precision_at_recall_by_hand(labels, scores, recall, expected):
    got = early_waste.precision_at_recall(np.array(labels), np.array(scores), recall)
    assert got == (None if expected is None else pytest.approx(expected))


@settings(max_examples=examples(80), deadline=None)
@given(
    pairs=st.lists(st.tuples(st.booleans(), st.floats(0, 1)), min_size=1, max_size=40),
    r=st.floats(0.05, 1.0),
    extra=st.floats(0, 1),
)
def test_asking_for_more_recall_never_raises_precision(pairs, r, extra):
    y = np.array([int(p[0]) for p in pairs])
    s = np.array([p[1] for p in pairs])
    low = early_waste.precision_at_recall(y, s, r)
    high = early_waste.precision_at_recall(y, s, min(1.0, r + extra))
    if low is not None and high is not None:
        assert high <= low + 1e-12


def test_threshold_for_recall_flags_enough_positives():
    y, s = np.array([1, 0, 1, 1, 0]), np.array([0.9, 0.8, 0.6, 0.3, 0.1])
    t = early_waste.threshold_for_recall(y, s, 2 / 3)
    assert t == 0.6
    assert ((s >= t) & (y == 1)).sum() / y.sum() >= 2 / 3


def test_no_threshold_is_made_up_without_a_wasteful_job():
    # it was 0.5: a threshold nothing chose or checked, and detect raised findings with it
    y, s = np.array([0, 0, 0]), np.array([0.9, 0.5, 0.1])
    assert early_waste.threshold_for_recall(y, s, 0.8) is None


def test_the_model_uses_early_telemetry_where_the_baseline_cannot():
    rows, use = [], []
    draw = np.random.default_rng(7).random(60) < 0.5  # no pattern the history could learn
    for i in range(60):
        wasteful = bool(draw[i])
        rows.append(job(str(i), i, i + 4, low_busy_frac=0.9 if wasteful else 0.0))
        use.append((str(i), 0.02 if wasteful else 0.7, 0 if wasteful else 2))
    frame = early_waste.frame(jobs(rows), early(use), 30)
    out = early_waste.score(early_waste.fit(frame), frame)
    y = out["label"].cast(pl.Int64).to_numpy()
    model = early_waste.precision_at_recall(y, out["score"].to_numpy(), 0.8)
    baseline = early_waste.precision_at_recall(y, out["baseline"].to_numpy(), 0.8)
    assert model == 1.0
    assert baseline is not None and baseline < 0.8  # one user: history cannot tell them apart


def test_too_few_finished_jobs_teach_no_model():
    # 12 jobs (3 to test) stored an active model less precise than the user-history baseline
    from detectors.models.store import NotEnoughHistory

    def frame(n: int) -> pl.DataFrame:
        rows = [job(str(i), i, i + 4, low_busy_frac=0.9 if i % 2 else 0.0) for i in range(n)]
        use = [(str(i), 0.02 if i % 2 else 0.7, 0 if i % 2 else 2) for i in range(n)]
        return early_waste.frame(jobs(rows), early(use), 30)

    with pytest.raises(NotEnoughHistory, match="at least 20 finished jobs to learn from, got 12"):
        early_waste.fit(frame(12))
    early_waste.fit(frame(early_waste.MIN_JOBS))
