"""The mean of several replays whose recorded run times are moved by a second: `replay_draws`.

Slurm runs a job's `sleep N` for N or N + 1 s from one run to the next (its clock, the epilog,
the end reaching the controller), so a record's run times are one draw of several, and one
replay of them is one draw of the outcomes. Under a tight limit that second decides things: a
4-GPU job under a 4-GPU account cap starts only when the account's running jobs have all ended,
and whether one ends a second before or after a scheduling pass moves an account's mean wait by
±10 % (docs/policy-lab.md, "Against a real Slurm"). The mean over draws is the prediction that
does not hang on that second.

Draw 0 is the record as it is; draw d ≥ 1 moves each known run time by −1, 0 or +1 s drawn from
`np.random.default_rng(d)` (at least 1 s; an unknown run time stays unknown), so the same draws
give the same outcome.

The mean outcome, per job: it started when it started in draw 0 (the jobs that start, and so
the counts every figure is over, are the single replay's); its start and end are the means over
the draws in which it started (a job started in draw 0 but not in another, which a replay that
stops at the end of the data can give, is averaged over those it started in). Whether a limit
cut it or held it, its preemptions and its requeued seconds are draw 0's: they are counts and
flags, not times, and a second's wobble rarely changes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from detectors.replay.engine import Outcome, Workload, replay
from detectors.replay.policy import Policy

__all__ = ["mean_outcome", "redrawn", "replay_draws", "replay_each"]


def redrawn(w: Workload, draw: int) -> Workload:
    """`w` with each known run time moved by −1, 0 or +1 s (at least 1 s) from the random
    generator seeded `draw`; draw 0: `w` itself, as recorded."""
    if draw == 0:
        return w
    moved = w.run_s + np.random.default_rng(draw).integers(-1, 2, size=w.size)
    return replace(w, run_s=np.where(np.isnan(w.run_s), w.run_s, np.maximum(moved, 1)))


def replay_each(
    w: Workload,
    policy: Policy,
    draws: int,
    *,
    past_end: bool = False,
    progress: Callable[[int, float], None] | None = None,
) -> list[Outcome]:
    """The outcome of each draw 0 … draws − 1 (see the module docstring); `progress` is called
    with (the draw, the replay's clock)."""
    if draws < 1:
        raise ValueError(f"draws must be at least 1, not {draws}")
    outs = []
    for d in range(draws):
        tick = None if progress is None else (lambda t, d=d: progress(d, t))
        outs.append(replay(redrawn(w, d), policy, tick, past_end=past_end))
    return outs


def mean_outcome(outs: list[Outcome]) -> Outcome:
    """Per job, the mean start and end over the draws in which it started, for the jobs draw 0
    (`outs[0]`) started; the rest as draw 0 has it. One outcome: that outcome itself."""
    first = outs[0]
    if len(outs) == 1:
        return first
    starts = np.vstack([o.start_e for o in outs])
    ends = np.vstack([o.end_e for o in outs])
    started = ~np.isnan(starts)
    n = started.sum(axis=0)
    keep = ~np.isnan(first.start_e)
    with np.errstate(invalid="ignore", divide="ignore"):
        start = np.where(started, starts, 0.0).sum(axis=0) / n
        # a job started in a draw has an end there (the replay runs it to its end or horizon)
        end = np.where(started, np.nan_to_num(ends, nan=0.0), 0.0).sum(axis=0) / n
    ended = ~np.isnan(ends) | ~started
    end = np.where(ended.all(axis=0), end, first.end_e)
    return replace(
        first,
        start_e=np.where(keep, start, np.nan),
        end_e=np.where(keep, end, np.nan),
    )


def replay_draws(
    w: Workload,
    policy: Policy,
    draws: int,
    *,
    past_end: bool = False,
    progress: Callable[[int, float], None] | None = None,
) -> Outcome:
    """The mean outcome of `draws` replays of `w` under `policy` (see the module docstring);
    draws=1: `replay(w, policy)` itself."""
    return mean_outcome(replay_each(w, policy, draws, past_end=past_end, progress=progress))
