"""Run-time quantiles: the figures on completed jobs, computed by hand."""

from __future__ import annotations

import math

import polars as pl
import pytest

from detectors.models import runtime
from tests.detectors.models.frames import job, jobs


def test_metrics_by_hand():
    frame = pl.DataFrame(
        {
            "log_runtime": [math.log(100.0), math.log(400.0), None],
            "p50_s": [100.0, 200.0, 50.0],
            "p90_s": [200.0, 300.0, 60.0],
            "user_last2_log_runtime": [math.log(100.0), math.log(100.0), None],
            "time_limit_s": [3600, 3600, 3600],
            "gpus": [2, 1, 1],
        }
    )
    m = runtime.metrics(frame)
    assert m["jobs"] == 2
    assert m["p90_coverage"] == 0.5  # 400 s is above its p90 of 300 s
    assert m["underestimation_rate"] == 0.5
    assert m["mae_p50_log"] == pytest.approx(math.log(2) / 2)
    assert m["mae_baseline_last2_log"] == pytest.approx(math.log(4) / 2)
    assert m["limit_gpu_h_freed_at_p90"] == pytest.approx((2 * 3400 + 3300) / 3600)


def test_no_completed_job_no_figures():
    frame = pl.DataFrame({"log_runtime": [None]}, schema={"log_runtime": pl.Float64})
    assert runtime.metrics(frame) == {"jobs": 0}


def test_quantiles_follow_the_users_run_times_and_p90_is_never_below_p50():
    rows = [
        job(str(i), 10 * i, 10 * i + (1 if i % 2 else 8), user="u" + str(i % 2)) for i in range(40)
    ]
    frame = runtime.frame(jobs(rows))
    out = runtime.predict_quantiles(runtime.fit(frame), frame)
    late = out.filter(pl.col("start_ts") >= out["start_ts"].sort()[20])
    short = late.filter(pl.col("user") == "u1")["p50_s"].mean()
    long = late.filter(pl.col("user") == "u0")["p50_s"].mean()
    assert short < 2 * 3600 < 6 * 3600 < long
    assert (out["p90_s"] >= out["p50_s"]).all()


def test_jobs_without_a_time_limit_are_left_out_and_too_few_left_is_said():
    # a Philly trace sets no time limit: every feature fell back to a null limit, NaN reached
    # scikit-learn and `gpuledger train` ended in a traceback
    rows = [job(str(i), 10 * i, 10 * i + 2, user="u" + str(i % 2)) for i in range(40)]
    unlimited = [{**row, "time_limit_s": None} for row in rows]
    frame = runtime.frame(jobs(unlimited))
    assert frame.is_empty()
    with pytest.raises(runtime.NotEnoughHistory, match="completed jobs with a time limit, got 0"):
        runtime.fit(frame)
    mixed = runtime.frame(jobs(rows[:25] + unlimited[25:]))
    assert mixed.height == 25
    out = runtime.predict_quantiles(runtime.fit(mixed), mixed)
    assert out["p50_s"].is_finite().all()
