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


# --- requeues: the runs before the last one were thrown away -----------------------------------


@pytest.fixture(scope="module")
def requeues(tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("lake")
    gpu = r.job_gpu
    jobs = [
        # requeued twice (a node failure, a preemption), then completed: runs [0, 100) on GPU 0,
        # [200, 300) on GPUs 1-2 and the last [400, 1000) on GPU 0
        r.job("twice", 400, 1000, submit_ts=r.at(0), requeues=2),
        # requeued once, then failed; the collector ended the first run where the second began,
        # so the two rows on GPU 3 touch (one island of job_gpu_intervals)
        r.job("then_failed", 300, 600, state="FAILED", requeues=1),
        # never requeued: a row starting before the job (an NVML agent's clock ahead) is no run
        r.job("never", 100, 700, requeues=0),
        # requeued and pending again: every run it had was thrown away
        r.job("pending", 0, None, state="PENDING", requeues=1, start_ts=None),
        # its latest record is the requeued run itself
        r.job("requeued", 0, 500, state="REQUEUED", requeues=1),
        # the Philly trace: start_ts is the first attempt's, the rows say when the last began
        r.job("attempts", 0, 900, requeues=1),
        # requeued then completed, sharing GPU 7 with "peer" over its first run [0, 200)
        r.job("shared", 300, 600, requeues=1),
        r.job("peer", 0, 200),
    ]
    job_gpus = [
        gpu("twice", 0, 100, gpu_index=0),
        gpu("twice", 200, 300, gpu_index=1),
        gpu("twice", 200, 300, gpu_index=2),
        gpu("twice", 400, 1000, gpu_index=0),
        gpu("then_failed", 0, 300, gpu_index=3),
        gpu("then_failed", 300, 600, gpu_index=3),
        gpu("never", 98, 700, gpu_index=4, mapping="nvml-cgroup"),
        gpu("pending", 0, 250, gpu_index=5),
        gpu("requeued", 0, 500, gpu_index=6),
        gpu("attempts", 0, 300, gpu_index=8, mapping="trace"),
        gpu("attempts", 500, 900, gpu_index=9, mapping="trace"),
        gpu("shared", 0, 200, gpu_index=7),
        gpu("shared", 300, 600, gpu_index=7),
        gpu("peer", 0, 200, gpu_index=7),
    ]
    con = r.build_lake(root, jobs=jobs, job_gpus=job_gpus)
    return r.by_job(con, "job_outcomes")


def lost(job: dict) -> tuple[float, float, float]:
    return job["alloc_gpu_h"], job["gpu_h_lost_requeue"], job["gpu_h_lost"]


def test_a_job_requeued_twice_then_completed_lost_its_first_two_runs(requeues):
    job = requeues["twice"]
    assert (job["outcome"], job["requeued"]) == ("completed", True)
    # runs 1 and 2: 100 s of one GPU and 100 s of two; the last run (600 s) was not lost
    assert lost(job) == pytest.approx((900 / H, 300 / H, 300 / H))


def test_a_job_requeued_then_failed_lost_both_runs_the_first_to_the_requeue(requeues):
    job = requeues["then_failed"]
    assert (job["outcome"], job["failed"], job["requeued"]) == ("failed", True, True)
    assert lost(job) == pytest.approx((600 / H, 300 / H, 600 / H))


def test_a_job_never_requeued_loses_nothing_to_requeues(requeues):
    job = requeues["never"]
    assert job["requeued"] is False
    assert lost(job) == pytest.approx((602 / H, 0.0, 0.0))


def test_a_job_pending_again_after_a_requeue_lost_all_it_held(requeues):
    job = requeues["pending"]
    assert lost(job) == pytest.approx((250 / H, 250 / H, 250 / H))


def test_a_job_whose_latest_record_is_the_requeued_run_lost_it(requeues):
    job = requeues["requeued"]
    assert (job["outcome"], job["requeued"]) == ("requeued", True)
    assert lost(job) == pytest.approx((500 / H, 500 / H, 500 / H))


def test_a_trace_job_lost_its_attempts_before_the_last(requeues):
    job = requeues["attempts"]
    assert lost(job) == pytest.approx((700 / H, 300 / H, 300 / H))


def test_a_requeued_run_on_a_shared_gpu_lost_only_its_share(requeues):
    # [0, 200) on GPU 7 was split with "peer": 100 s each
    assert lost(requeues["shared"]) == pytest.approx((400 / H, 100 / H, 100 / H))
    assert lost(requeues["peer"]) == pytest.approx((100 / H, 0.0, 0.0))


def test_a_job_without_requeues_keeps_its_lost_hours_as_before(outcomes):
    assert {j: o["gpu_h_lost_requeue"] for j, o in outcomes.items()} == dict.fromkeys(outcomes, 0.0)
