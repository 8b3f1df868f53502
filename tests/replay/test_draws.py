"""`replay_draws`: the mean of replays whose recorded run times are moved by a second, on a
hand-built workload where that second decides which of two jobs goes first
(detectors/replay/draws.py).

The draws' moves are those of `np.random.default_rng(draw).integers(-1, 2, size=3)`; the first
test pins them, and every expected time below is worked out from them in a comment."""

from __future__ import annotations

import math
from dataclasses import fields, replace

import numpy as np
import pytest

from detectors.replay.draws import redrawn, replay_draws, replay_each
from detectors.replay.engine import Outcome, Workload, replay
from detectors.replay.policy import apply_settings
from tests.replay.test_engine import workload
from tests.replay.test_qos import MULTIFACTOR, with_qos

NAN = math.nan

# C's QOS priority outranks B's age whenever both wait (see tests/replay/test_qos.py)
POLICY = apply_settings(MULTIFACTOR, ["priority.PriorityWeightQOS=100", "qos.high.Priority=10"])


def one_gpu(horizon: float = 10_000.0) -> Workload:
    # one GPU. A runs 0-10 as recorded; B (normal QOS) is submitted at 1 and waits for A;
    # C (high QOS) is submitted at 10.5. When A ends at 10 (or 9), B is alone in the queue and
    # starts then, C after B's 5 s; when A ends at 11, a second later, C is there too and,
    # higher, goes first: one second decides which of B and C goes first.
    w = workload(
        [
            {"submit": 0, "run": 10, "gpus": 1, "limit": 100},
            {"submit": 1, "run": 5, "gpus": 1, "limit": 100},
            {"submit": 10.5, "run": 5, "gpus": 1, "limit": 100},
        ],
        {"n1": 1},
        horizon=horizon,
    )
    return with_qos(w, ["normal", "normal", "high"])


def as_list(a: np.ndarray) -> list[float]:
    return [float(x) for x in a]


def test_a_draw_moves_each_known_run_time_by_a_second_at_most():
    # draw 1 moves A, B, C by 0, 0, +1 s; draw 2 by +1, -1, -1 s
    w = one_gpu()
    assert redrawn(w, 0) is w
    assert as_list(redrawn(w, 1).run_s) == [10, 5, 6]
    assert as_list(redrawn(w, 2).run_s) == [11, 4, 4]
    # an unknown run time stays unknown; none goes below 1 s (draw 2's -1 on a 1 s run)
    odd = replace(w, run_s=np.array([NAN, 1.0, 3.0]))
    assert np.isnan(redrawn(odd, 2).run_s[0])
    assert as_list(redrawn(odd, 2).run_s[1:]) == [1, 2]


def test_the_mean_start_is_the_average_of_the_draws_outcomes():
    w = one_gpu()
    each = replay_each(w, POLICY, 3)
    # draw 0 (as recorded): A 0-10, B 10-15, C 15-20; draw 1 (C 6 s): A 0-10, B 10-15, C 15-21;
    # draw 2 (A 11 s, B and C 4 s): A 0-11, then C first, 11-15, then B 15-19
    assert [as_list(o.start_e) for o in each] == [[0, 10, 15], [0, 10, 15], [0, 15, 11]]
    assert [as_list(o.end_e) for o in each] == [[10, 15, 20], [10, 15, 21], [11, 19, 15]]
    mean = replay_draws(w, POLICY, 3)
    # B starts at (10 + 10 + 15) / 3, C at (15 + 15 + 11) / 3; the ends likewise
    assert as_list(mean.start_e) == pytest.approx([0, 35 / 3, 41 / 3])
    assert as_list(mean.end_e) == pytest.approx([31 / 3, 49 / 3, 56 / 3])


def test_a_job_counts_as_started_when_draw_0_started_it():
    # the replay stops at the end of the data, 12: in draws 0 and 1 B starts at 10 and C not
    # before 12; in draw 2 C starts at 11 and B not before 12. B, started in draw 0, starts at
    # the mean over the draws it started in, (10 + 10) / 2; C, not started in draw 0, never
    w = one_gpu(horizon=12.0)
    mean = replay_draws(w, POLICY, 3)
    assert as_list(mean.start_e[:2]) == [0, 10]
    assert np.isnan(mean.start_e[2]) and np.isnan(mean.end_e[2])


def test_one_draw_is_the_replay_itself_and_draws_are_deterministic():
    w = one_gpu()
    assert_same(replay_draws(w, POLICY, 1), replay(w, POLICY))
    assert_same(
        replay_draws(w, POLICY, 5, past_end=True), replay_draws(w, POLICY, 5, past_end=True)
    )
    seen: list[tuple[int, float]] = []
    replay_draws(w, POLICY, 2, progress=lambda d, t: seen.append((d, t)))
    assert {d for d, _ in seen} == {0, 1}
    with pytest.raises(ValueError, match="at least 1"):
        replay_draws(w, POLICY, 0)


def assert_same(a: Outcome, b: Outcome) -> None:
    for f in fields(Outcome):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x is None or y is None:
            assert x is y, f.name
        else:
            np.testing.assert_array_equal(x, y, err_msg=f.name)
