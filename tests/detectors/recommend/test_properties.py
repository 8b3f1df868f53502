"""Invariants of the recommenders that are easier to state than to enumerate (Hypothesis)."""

from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from detectors.recommend.idle_cancel import replay
from detectors.recommend.recommendation import hhmmss, rec_id, round_up

# one idle run per job: (gpus, job length, run start, run length, active again after?)
run_rows = st.lists(
    st.tuples(
        st.integers(1, 8),
        st.integers(1, 48),
        st.integers(0, 47),
        st.integers(1, 48),
        st.booleans(),
    ),
    max_size=15,
)


def runs_frame(rows) -> pl.DataFrame:
    """Idle runs in 5-minute units, clipped to each job like sql/recommend/idle_runs.sql."""
    out = []
    for i, (gpus, length, start, run, again) in enumerate(rows):
        job_end = length * 300.0
        run_start = min(start, length - 1) * 300.0
        run_end = min(run_start + run * 300.0, job_end)
        out.append(
            {
                "job_id": f"j{i}",
                "user": "u",
                "interactive": False,
                "gpus": gpus,
                "job_end_e": job_end,
                "run_start_e": run_start,
                "run_end_e": run_end,
                "last_active_e": job_end if again and run_end < job_end else None,
            }
        )
    schema = {
        "job_id": pl.String,
        "user": pl.String,
        "interactive": pl.Boolean,
        "gpus": pl.Int64,
        "job_end_e": pl.Float64,
        "run_start_e": pl.Float64,
        "run_end_e": pl.Float64,
        "last_active_e": pl.Float64,
    }
    return pl.DataFrame(out, schema=schema)


@given(rows=run_rows, cancel=st.integers(5, 240), later=st.integers(0, 240))
def test_cancelling_later_never_recovers_more_or_hits_more_jobs(rows, cancel, later):
    runs = runs_frame(rows)
    early, late = replay(runs, 1, cancel), replay(runs, 1, cancel + later)

    assert late["gpu_h_recovered"] <= early["gpu_h_recovered"] + 1e-9
    assert late["jobs_cancelled"] <= early["jobs_cancelled"]
    assert late["false_kills"] <= early["false_kills"]


@given(rows=run_rows, warn=st.integers(1, 120), cancel=st.integers(5, 240))
def test_the_gain_is_never_more_than_what_is_recovered_and_never_negative(rows, warn, cancel):
    s = replay(runs_frame(rows), warn, cancel)

    assert 0 <= s["gpu_h_disrupted"] <= s["gpu_h_recovered"] + 1e-9
    assert s["gain_gpu_h"] >= -1e-9
    assert s["false_kills"] <= s["jobs_cancelled"] <= len(rows)


@given(
    key=st.tuples(st.text(max_size=8), st.text(max_size=8), st.text(max_size=8)),
    other=st.text(max_size=8),
)
def test_rec_ids_are_stable_and_tell_scopes_apart(key, other):
    cluster, kind, scope = key
    same = rec_id(cluster, kind, scope, "slurm")

    assert same == rec_id(cluster, kind, scope, "slurm")
    if other != scope:
        assert rec_id(cluster, kind, other, "slurm") != same


@given(seconds=st.floats(0, 10 * 86400), step=st.sampled_from([60, 900, 3600]))
def test_round_up_and_slurm_time_format(seconds, step):
    up = round_up(seconds, step)
    text = hhmmss(up)
    days, _, clock = text.rpartition("-")
    h, m, s = (int(x) for x in clock.split(":"))

    assert up >= seconds and up - seconds < step + 1e-6 and up % step == 0
    assert (int(days) if days else 0) * 86400 + h * 3600 + m * 60 + s == up
