"""job_outcomes: GPU-hours lost by jobs that did not finish, and hardware events before it."""

from __future__ import annotations

import pytest

from tests.marts import rows as r

H = 3600.0


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("lake")
    # Five one-GPU jobs on node g001, each on its own GPU over [0, 600).
    jobs = {
        "hw": ("FAILED", 0),  # GPU 0 falls off the bus (XID 79) at 300 s
        "app": ("FAILED", 1),  # an application XID 13 on GPU 1 at 300 s
        "late": ("FAILED", 2),  # XID 79 on GPU 2 only 301 s after the job ended
        "ok": ("COMPLETED", 3),  # an XID 79 on GPU 3, but the job completed
        "slow": ("TIMEOUT", 4),
    }
    con = r.build_lake(
        root,
        jobs=[r.job(job_id, 0, 600, state=state) for job_id, (state, _) in jobs.items()],
        job_gpus=[r.job_gpu(job_id, 0, 600, gpu_index=i) for job_id, (_, i) in jobs.items()],
        events=[
            r.event(300, "xid", 79, gpu_index=0),
            r.event(300, "xid", 13, gpu_index=1),
            r.event(600 + 301, "xid", 79, gpu_index=2),  # grace is 300 s
            r.event(200, "xid", 79, gpu_index=3),
        ],
    )
    return r.by_job(con, "job_outcomes")


def test_a_failed_job_after_a_fatal_xid_on_its_gpu_lost_its_gpu_hours_to_hardware(outcomes):
    job = outcomes["hw"]
    assert job["outcome"] == "failed"
    assert job["failed"] is True
    assert job["hw_event_before_end"] is True
    assert job["hw_event_kinds"] == "xid 79"
    assert job["alloc_gpu_h"] == pytest.approx(600 / H)
    assert job["gpu_h_lost"] == pytest.approx(600 / H)  # all of it


def test_an_application_xid_is_not_a_hardware_event(outcomes):
    job = outcomes["app"]
    assert job["failed"] is True
    assert job["hw_event_before_end"] is False  # XID 13, and GPU 0's XID 79 is not its GPU
    assert job["hw_event_kinds"] is None
    assert job["gpu_h_lost"] == pytest.approx(600 / H)


def test_a_hardware_event_after_the_grace_period_does_not_count(outcomes):
    assert outcomes["late"]["hw_event_before_end"] is False


def test_a_completed_job_loses_nothing(outcomes):
    job = outcomes["ok"]
    assert job["outcome"] == "completed"
    assert job["failed"] is False
    assert job["gpu_h_lost"] == 0.0
    assert job["hw_event_before_end"] is True  # the event is still reported


def test_a_timed_out_job_loses_its_gpu_hours(outcomes):
    job = outcomes["slow"]
    assert job["outcome"] == "timeout"
    assert job["timed_out"] is True
    assert job["failed"] is False
    assert job["gpu_h_lost"] == pytest.approx(600 / H)
