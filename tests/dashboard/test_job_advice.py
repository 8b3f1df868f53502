"""What the job page tells a job's owner to change, on rows made by hand."""

from __future__ import annotations

import datetime as dt

import pytest

from app.job_advice import advise

ENDED = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
WELL_USED = {
    "gpus": 4,
    "gpus_never_active": 0,
    "observed_gpu_h": 40.0,
    "idle_gpu_h": 1.0,
    "busy_mean": 0.8,
    "tensor_active_mean": 0.4,
    "runtime_h": 10.0,
    "time_limit_h": 12.0,
    "fb_used_mib_max": 70_000.0,
    "end_ts": ENDED,
    "hw_event_before_end": False,
}


def options(job):
    return [a.option for a in advise({**WELL_USED, **job})]


def headlines(job):
    return [a.headline for a in advise({**WELL_USED, **job})]


def test_a_well_used_job_gets_no_advice():
    assert advise(WELL_USED) == []


def test_never_active_gpus_ask_for_fewer():
    # 3 of 4 GPUs idle: busy 0.2 over 4 GPUs is 0.8 on the one that worked, so no input advice
    assert options({"gpus_never_active": 3, "busy_mean": 0.2}) == ["--gres=gpu:1"]


def test_mostly_idle_job_is_told_to_release_gpus():
    assert headlines({"idle_gpu_h": 20.0}) == ["Release GPUs you are not using"]
    assert headlines({"idle_gpu_h": 19.9}) == []  # below half of the observed time


def test_input_bound_job_gets_more_cpus():
    assert options({"busy_mean": 0.2}) == ["--cpus-per-gpu=8"]


def test_busy_job_without_tensor_cores_is_told_mixed_precision():
    assert headlines({"tensor_active_mean": 0.01}) == ["Use the tensor cores"]


@pytest.mark.parametrize(
    ("runtime_h", "limit_h", "expected"),
    [
        (2.0, 24.0, ["--time=03:00:00"]),  # 1.5 × 2 h
        (1.1, 24.0, ["--time=01:45:00"]),  # 1.65 h rounded up to a quarter hour
        (5.0, 10.0, []),  # exactly twice: fine
    ],
)
def test_time_limit_far_above_run_time(runtime_h, limit_h, expected):
    assert options({"runtime_h": runtime_h, "time_limit_h": limit_h}) == expected


def test_no_time_limit_advice_while_the_job_runs():
    assert options({"runtime_h": 1.0, "time_limit_h": 24.0, "end_ts": None}) == []


def test_small_idle_one_gpu_job_fits_a_mig_slice():
    job = {"gpus": 1, "observed_gpu_h": 10, "fb_used_mib_max": 4096.0, "busy_mean": 0.1}
    assert options(job)[-1] == "--gres=gpu:1g.10gb:1"


def test_a_hardware_fault_is_not_the_users_fault():
    assert headlines({"hw_event_before_end": True}) == ["Resubmit: a hardware fault ended it"]
