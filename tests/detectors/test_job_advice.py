"""The one advice engine the Job page and `gpuledger job` share, on rows made by hand.

A job is the row of sql/jobs/job_detail.sql, its GPUs rows of sql/jobs/job_gpu_activity.sql,
its findings rows of sql/jobs/job_findings.sql, plus the bottleneck diagnosis.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from detectors.job_advice import Advice, advise

H = 3600.0
WELL_USED: dict[str, Any] = {
    "gpus": 4,
    "state": "COMPLETED",
    "source": "slurm",
    "interactive": False,
    "time_limit_s": 12 * H,
    "runtime_s": 10 * H,
    "cpus": 32,
    "cpu_time_s": 24 * 10 * H,  # 24 of 32 cores busy
    "observed_gpu_h": 40.0,
    "idle_gpu_h": 1.0,
    "busy_mean": 0.8,
    "tensor_active_mean": 0.4,
    "fb_used_mib_max": 70_000.0,
    "hw_event_before_end": False,
}


def gpus_of(n: int, active_h: float = 10.0, idle_h: float = 0.0) -> list[dict[str, Any]]:
    return [
        {
            "gpu_index": i,
            "observed_h": active_h + idle_h,
            "active_h": active_h,
            "idle_h": idle_h,
            "fb_total_mib": 81920.0,
        }
        for i in range(n)
    ]


def finding(detector: str, **evidence: Any) -> dict[str, Any]:
    return {"detector": detector, "severity": "warn", "evidence": json.dumps(evidence)}


def run(
    diagnosis: str = "compute_bound",
    findings: list[dict[str, Any]] | None = None,
    gpu_rows: list[dict[str, Any]] | None = None,
    **job: Any,
) -> list[Advice]:
    row = {**WELL_USED, **job}
    n, observed, idle = row["gpus"], row["observed_gpu_h"], row["idle_gpu_h"]
    gpus = gpus_of(n, (observed - idle) / n, idle / n) if gpu_rows is None else gpu_rows
    return advise(row, gpus, diagnosis, findings or [])


def options(**kw: Any) -> list[str | None]:
    return [a.option for a in run(**kw)]


def headlines(**kw: Any) -> list[str]:
    return [a.headline for a in run(**kw)]


def said(advice: list[Advice]) -> str:
    return " ".join(f"{a.headline} {a.reason} {a.option or ''}" for a in advice)


def test_a_well_used_job_gets_no_advice():
    assert run() == []


# ---------------------------------------------------------------- hung jobs

HUNG = {
    "state": "TIMEOUT",
    "gpus": 8,
    "time_limit_s": 50 * H,
    "runtime_s": 50 * H,
    "cpus": 64,
    "cpu_time_s": 3 * 50 * H,  # the CPUs idled through the hang as well
    "observed_gpu_h": 400.0,
    "idle_gpu_h": 380.0,
    "busy_mean": 0.04,
    "tensor_active_mean": 0.01,
}


@pytest.mark.parametrize(
    ("diagnosis", "findings"),
    [
        ("stalled", []),
        ("idle", [finding("hung_job", state="hung", state_gpu_h=378.0)]),
        ("stalled", [finding("hung_job", state="hung", state_gpu_h=378.0)]),
    ],
    ids=["diagnosed-stalled", "hung-finding", "both"],
)
def test_a_hung_batch_job_is_told_to_fail_fast_not_to_ask_for_time(diagnosis, findings):
    advice = run(diagnosis=diagnosis, findings=findings, **HUNG)
    text = said(advice)

    assert [a.headline for a in advice] == ["Make a hang fail fast"]
    assert "NCCL" in text and "watchdog" in text and "checkpoint" in text
    assert "--time" not in text  # it hit the limit because it hung, not because it needed more
    assert "--cpus-per-gpu" not in text  # not input-bound: it waited on a collective
    assert "interactive" not in text.lower() and "Release" not in text


def test_a_hung_job_that_hit_its_limit_is_told_the_limit_was_not_the_problem():
    [advice] = run(diagnosis="stalled", **HUNG)

    assert "time limit" in advice.reason and "more time" in advice.reason


def test_a_hung_interactive_session_is_also_told_to_end_it():
    assert headlines(diagnosis="stalled", **{**HUNG, "interactive": True}) == [
        "Make a hang fail fast",
        "Release GPUs you are not using",
    ]


# ---------------------------------------------------------------- hardware failures

NODE_FAIL = {
    "state": "NODE_FAIL",
    "gpus": 64,
    "time_limit_s": 72 * H,
    "runtime_s": 23 * H,
    "cpus": 768,
    "cpu_time_s": 322.5 * 23 * H,  # 42 % of the cores: no --cpus-per-gpu after a node failure
    "observed_gpu_h": 1472.0,
    "idle_gpu_h": 10.0,
    "hw_event_before_end": True,
    "hw_event_kinds": "offline, xid 79",
}


def test_a_node_failure_is_resubmitted_with_no_time_advice():
    findings = [
        finding("failed_after_hw_event", outcome="node_fail", hw_event_kinds="offline, xid 79"),
        finding("checkpoint_interval", interval_s=26153.5, mtbf_s=1157481.9),
    ]
    [advice] = run(findings=findings, **NODE_FAIL)

    # Slurm requeues a batch job a node failure ended: "resubmit" alone ran it twice
    assert (
        advice.headline == "A node failure ended it: resubmit it only if Slurm did not requeue it"
    )
    assert advice.option == "--requeue"
    assert "offline, xid 79" in advice.reason
    assert "checkpoint every 436 min" in advice.reason  # the checkpoint_interval finding
    assert "--time" not in said([advice])


def test_node_fail_alone_is_enough():
    assert options(**{**NODE_FAIL, "hw_event_before_end": False}) == ["--requeue"]


def test_a_failed_job_after_a_hardware_event_is_resubmitted_too():
    job = {**NODE_FAIL, "state": "FAILED"}
    assert headlines(**job) == ["Resubmit: a hardware fault ended it"]
    # Slurm does not requeue a FAILED job: resubmitting it is right
    [advice] = run(**job)
    assert "Resubmit it from its last checkpoint" in advice.reason
    assert "squeue" not in advice.reason


def test_a_node_failure_says_slurm_requeues_the_job_unless_told_not_to():
    # with Slurm's default JobRequeue=1 a batch job a node failure ended is requeued after its
    # FAIL mail: "Resubmit it from its last checkpoint" made the owner who did run it twice
    [advice] = run(**NODE_FAIL, job_id="500+0")
    reason = " ".join(advice.reason.split())

    assert "node failure after a hardware event on its GPUs (offline, xid 79)" in reason
    assert (
        "Slurm requeues a batch job after a node failure unless it was submitted with "
        "--no-requeue (or the site set JobRequeue=0): check `squeue -j 500` or wait for a "
        "Requeued mail before resubmitting it, or it runs twice." in reason
    )
    assert "If it was not requeued, resubmit it from its last checkpoint" in reason
    assert "Its run time says nothing about the time limit it needs." in reason
    # an interactive session is never requeued: nothing to check
    [session] = run(**NODE_FAIL, interactive=True)
    assert "squeue" not in session.reason and "Resubmit it from" in session.reason


def test_a_completed_job_with_a_hardware_event_was_not_ended_by_it():
    # a correctable blip during a run that finished: the usual advice, here a shorter limit
    job = {"hw_event_before_end": True, "runtime_s": 2 * H, "time_limit_s": 24 * H}
    assert options(**job) == ["--time=03:00:00"]


# ---------------------------------------------------------------- time limits


@pytest.mark.parametrize(
    ("runtime_h", "limit_h", "expected"),
    [
        (2.0, 24.0, ["--time=03:00:00"]),  # 1.5 × 2 h
        (1.1, 24.0, ["--time=01:45:00"]),  # 1.65 h rounded up to a quarter hour
        (20.0, 72.0, ["--time=1-06:00:00"]),  # Slurm's day format
        (5.0, 10.0, []),  # exactly half: fine
        # 4 min of a 10-min limit: 6 min rounds up to 15, past the limit (it said 00:15:00);
        # 10 min of 30: 15 min is 00:15:00, under it
        (4 / 60, 10 / 60, []),
        (10 / 60, 30 / 60, ["--time=00:15:00"]),
        (14 / 60, 30 / 60, []),  # 21 min rounds up to the limit itself
    ],
)
def test_a_completed_job_far_under_its_limit_asks_for_less(runtime_h, limit_h, expected):
    job = {
        "runtime_s": runtime_h * H,
        "time_limit_s": limit_h * H,
        "cpu_time_s": 24 * runtime_h * H,
    }
    assert options(**job) == expected


@pytest.mark.parametrize("state", ["FAILED", "CANCELLED by 1000", "OUT_OF_MEMORY", "RUNNING"])
def test_only_a_completed_job_asks_for_a_shorter_limit(state):
    said = options(state=state, runtime_s=2 * H, time_limit_s=24 * H)
    # (out of memory, it is told to ask for more memory: its own advice)
    assert said == ([None] if state == "OUT_OF_MEMORY" else [])


def test_a_timed_out_busy_job_asks_for_more_time_and_checkpoints():
    [advice] = run(state="TIMEOUT", runtime_s=12 * H, time_limit_s=12 * H)

    assert advice.headline == "Ask for more time"
    assert advice.option == "--time=18:00:00"
    assert "checkpoint" in advice.reason
    assert advice.kubernetes == 'label kueue.x-k8s.io/max-exec-time-seconds: "64800"'


@pytest.mark.parametrize("diagnosis", ["idle", "stalled", "unobserved", None])
def test_a_timed_out_job_that_made_no_progress_gets_no_more_time(diagnosis):
    job = {"state": "TIMEOUT", "runtime_s": 12 * H, "time_limit_s": 12 * H, "busy_mean": 0.01}
    assert not any("--time" in (o or "") for o in options(diagnosis=diagnosis, **job))


# ---------------------------------------------------------------- CPUs and input


def test_an_input_bound_job_gets_more_cpus():
    # 16 cores for 4 GPUs: twice the 4 per GPU, at least 8
    assert options(diagnosis="input_bound", busy_mean=0.2, cpus=16, cpu_time_s=16 * 10 * H) == [
        "--cpus-per-gpu=8"
    ]
    assert headlines(diagnosis="input_bound", busy_mean=0.2) == ["Feed the GPU faster"]


@pytest.mark.parametrize("diagnosis", ["underutilized", "memory_bound", "stalled", "idle"])
def test_low_busy_alone_is_not_input_bound(diagnosis):
    assert not any("--cpus-per-gpu=8" == o for o in options(diagnosis=diagnosis, busy_mean=0.2))


def test_unused_cores_are_given_back():
    # 4 of 32 cores busy: 4 × 1.25 / 4 GPUs -> 2 per GPU
    assert options(cpu_time_s=4 * 10 * H) == ["--cpus-per-gpu=2"]
    assert headlines(cpu_time_s=4 * 10 * H) == ["Ask for fewer CPU cores"]


# ---------------------------------------------------------------- GPUs, idle, MIG, tensor


def test_never_active_gpus_ask_for_fewer():
    gpus = gpus_of(1) + gpus_of(3, active_h=0.0, idle_h=10.0)  # seen all run, never active
    assert options(gpu_rows=gpus) == ["--gres=gpu:1"]
    assert headlines(gpu_rows=gpus) == ["Ask for 1 GPU, not 4"]


def test_no_gpu_active_asks_for_a_short_test_job():
    assert options(gpu_rows=gpus_of(4, active_h=0.0), diagnosis="idle", busy_mean=0.0) == [
        "--gres=gpu:1 --time=00:30:00"
    ]


def test_a_one_gpu_job_that_never_used_it_is_not_told_to_test_on_one_gpu_first():
    idle = {"gpus": 1, "observed_gpu_h": 10.0, "idle_gpu_h": 10.0, "busy_mean": 0.0}
    advice = run(gpu_rows=gpus_of(1, active_h=0.0, idle_h=10.0), diagnosis="idle", **idle)
    assert [a.headline for a in advice] == ["Check that the code uses its GPU"]
    assert all("--gres" not in (a.option or "") for a in advice)
    # an interactive session is told to release it, once
    session = run(
        gpu_rows=gpus_of(1, active_h=0.0, idle_h=10.0), diagnosis="idle", interactive=True, **idle
    )
    assert [a.headline for a in session] == ["Release GPUs you are not using"]


def test_a_mostly_idle_interactive_session_is_told_to_end_it():
    advice = run(interactive=True, idle_gpu_h=20.0)
    assert [a.headline for a in advice] == ["Release GPUs you are not using"]
    assert "interactive" in advice[0].reason
    assert run(interactive=True, idle_gpu_h=19.9) == []  # below half of the observed time


def test_gpus_never_active_do_not_count_as_idle_twice():
    # one GPU worked all the time, three never did: --gres, not "give them back"
    gpus = gpus_of(1) + gpus_of(3, active_h=0.0, idle_h=10.0)
    assert headlines(gpu_rows=gpus, idle_gpu_h=30.0) == ["Ask for 1 GPU, not 4"]


def test_gpus_no_sample_reported_on_are_not_called_never_active():
    # 1 of 4 GPUs reported (busy); the other 3 sent nothing (no exporter on their node): what
    # they did is unknown, so no "ask for 1 GPU" (job_without_data says what is missing)
    assert "Ask for 1 GPU, not 4" not in headlines(gpus=4, gpu_rows=gpus_of(1))
    assert headlines(gpus=4, gpu_rows=gpus_of(1) + gpus_of(3, active_h=0.0, idle_h=10.0)) == [
        "Ask for 1 GPU, not 4"
    ]


def test_a_mostly_idle_batch_job_is_not_told_about_interactive_sessions():
    advice = run(idle_gpu_h=20.0)
    assert [a.headline for a in advice] == ["Keep the GPUs busy or give them back"]
    assert "interactive" not in said(advice).lower()


def test_a_small_quiet_one_gpu_job_fits_a_mig_slice():
    job = {"gpus": 1, "busy_mean": 0.1, "fb_used_mib_max": 4096.0, "cpus": 4, "cpu_time_s": 30 * H}
    assert options(diagnosis="underutilized", **job) == ["--gres=gpu:1g.10gb:1"]


def test_a_gpu_seen_for_a_moment_is_not_called_never_active():
    # GPU 1 sent two idle samples in the first minute of an hour, then nothing: its work is
    # unknown (it was "1 of the 2 GPUs was never active", --gres=gpu:1)
    rows = gpus_of(2, active_h=1.0)
    rows[1] |= {"observed_h": 1 / 60, "active_h": 0.0, "idle_h": 1 / 60}
    assert not any("--gres" in (o or "") for o in options(gpus=2, gpu_rows=rows))
    # seen for the whole hour and never active: that one is told
    rows[1] |= {"observed_h": 1.0, "idle_h": 1.0}
    assert "--gres=gpu:1" in options(gpus=2, gpu_rows=rows)


def test_gpus_that_sent_no_data_are_said_not_sized_well():
    # 1 of 2 GPUs reported: the job was "sized well for what it did" on half its GPUs
    advice = run(gpus=2, gpu_rows=gpus_of(1))
    assert [a.headline for a in advice] == ["Check the GPUs that sent no data"]
    assert "1 GPU of its 2 sent no telemetry" in advice[0].reason


def test_a_job_on_a_mig_slice_already_is_told_no_slice():
    # its busy is the slice's: a 1g.10gb job 15 % busy was told 2g.20gb, twice its slice
    job = {"gpus": 1, "busy_mean": 0.15, "fb_used_mib_max": 8192.0, "cpus": 4, "cpu_time_s": 30 * H}
    on_slice = [row | {"mig_instance": 7} for row in gpus_of(1)]
    assert not any(
        "gpu:" in (o or "") for o in options(diagnosis="underutilized", gpu_rows=on_slice, **job)
    )


def test_busy_job_without_tensor_cores_is_told_mixed_precision():
    assert headlines(tensor_active_mean=0.01) == ["Use the tensor cores"]
    assert headlines(tensor_active_mean=None) == []  # not reported: nothing to say


# ---------------------------------------------------------------- where it is applied


def test_each_item_is_written_for_the_jobs_scheduler():
    [advice] = run(state="TIMEOUT", runtime_s=12 * H, time_limit_s=12 * H)
    assert advice.setting("slurm") == "#SBATCH --time=18:00:00"
    assert advice.setting("kubernetes") == advice.kubernetes
    assert Advice("Use the tensor cores", "why").setting("slurm") is None


# ---------------------------------------------------------------- stranded, fewer GPUs, no data


def test_a_job_that_stranded_gpus_by_cpus_and_memory_is_told_to_cap_both():
    stranded = finding(
        "stranded_gpus", stranded_gpus=6, node_gpus=8, max_cpus_per_gpu=12, max_mem_per_gpu_gib=120
    )
    advice = run(findings=[stranded], gpus=2, observed_gpu_h=20.0, cpus=96, cpu_time_s=0.0)
    [cap] = [a for a in advice if a.option and "--mem-per-gpu" in a.option]
    assert cap.option == "--cpus-per-gpu=12 --mem-per-gpu=120G"
    assert cap.kubernetes == 'requests: {cpu: "24", memory: "240Gi"}'
    assert "6 of the node's 8 GPUs" in cap.reason


def test_memory_alone_stranding_gpus_asks_only_for_less_memory():
    stranded = finding("stranded_gpus", stranded_gpus=5, node_gpus=8, max_mem_per_gpu_gib=10)
    [cap] = [a for a in run(findings=[stranded]) if a.option]
    assert cap.option == "--mem-per-gpu=10G"
    assert "memory" in cap.reason and "cores" not in cap.reason


def test_idle_cores_advice_is_capped_at_the_share_that_strands_nothing():
    stranded = finding("stranded_gpus", stranded_gpus=3, node_gpus=8, max_cpus_per_gpu=4)
    # 15 of 32 cores used on 4 GPUs: 5 per GPU would do for the cores, but 4 strands nothing
    options = [a.option for a in run(findings=[stranded], cpu_time_s=15 * 10 * H) if a.option]
    assert options == ["--cpus-per-gpu=4", "--cpus-per-gpu=4"]


def test_an_input_bound_job_that_strands_gpus_is_not_told_to_ask_for_more_cores():
    # 64 cores on 1 GPU strand the node's others (at most 16 per GPU): "--cpus-per-gpu=16" and
    # "--cpus-per-gpu=128" were both in its list
    stranded = finding("stranded_gpus", stranded_gpus=3, node_gpus=8, max_cpus_per_gpu=16)
    advice = run(
        findings=[stranded],
        diagnosis="input_bound",
        busy_mean=0.2,
        gpus=1,
        cpus=64,
        cpu_time_s=0.9 * 64 * 10 * H,
    )
    options = [a.option for a in advice if a.option and "cpus" in a.option]
    assert options == ["--cpus-per-gpu=16"]
    assert "Feed the GPU faster" in [a.headline for a in advice]


def test_an_overallocated_multi_gpu_job_is_told_how_many_gpus_to_ask_for():
    over = finding("overallocated", gpus=4, gpus_needed=1, mig_profile=None)
    advice = run(findings=[over], busy_mean=0.09, tensor_active_mean=None)
    assert [a.option for a in advice] == ["--gres=gpu:1"]
    assert advice[0].headline == "Ask for 1 GPU, not 4"
    assert not any("MIG" in a.headline for a in advice)


def test_sized_well_is_said_only_of_a_job_with_telemetry():
    from detectors.job_advice import when_no_advice

    assert when_no_advice(WELL_USED).startswith("Nothing to change")
    for unobserved in (0.0, None):
        said = when_no_advice({**WELL_USED, "observed_gpu_h": unobserved})
        assert said.startswith("No advice: no GPU telemetry") and "sized well for" not in said


def test_a_multi_gpu_job_one_slice_holds_is_told_that_slice():
    over = finding("overallocated", gpus=2, gpus_needed=None, mig_profile="2g.20gb")
    advice = run(findings=[over], gpus=2, observed_gpu_h=20.0, busy_mean=0.09)
    assert advice[0].headline == "Use one MIG slice, not 2 GPUs"
    assert advice[0].option == "--gres=gpu:2g.20gb:1"


# ---------------------------------------------------------------- how the job ended


def test_a_job_out_of_memory_is_told_to_ask_for_more_memory():
    # it was told "Nothing to change: the job was sized well"
    job = {"state": "OUT_OF_MEMORY", "mem_req_mib": 64 * 1024, "max_rss_mib": 60 * 1024.0}
    advice = run(**job)

    [memory] = [a for a in advice if "memory" in a.headline]
    assert memory.headline == "Ask for more memory"
    assert memory.option == "--mem=96G"  # half as much again, one node
    assert "it asked for 64.0 GiB" in memory.reason
    assert "Its largest task peaked at 60.0 GiB (MaxRSS" in memory.reason
    assert "(--mem-per-gpu=24G)" in memory.reason  # its 4 GPUs
    assert advice[0] is memory  # how it ended comes first
    # on two nodes --mem is per node; without a request or a peak, the options by name
    two = run(**job, nodes=["g001", "g002"])[0]
    assert two.option == "--mem=48G" and "32.0 GiB per node" in two.reason
    [bare] = [a for a in run(state="OUT_OF_MEMORY") if "memory" in a.headline]
    assert bare.option is None and "--mem (per node) or --mem-per-gpu" in bare.reason
    assert "MaxRSS" not in bare.reason


def test_a_job_out_of_memory_that_stranded_gpus_is_not_told_to_ask_for_less_memory():
    # It was told both "--mem=96G" (ask for more) and "--mem-per-gpu=10G" (at most each GPU's
    # share of the node): the second would kill it again. It keeps the cores' cap, and learns
    # what more memory costs the node.
    stranded = finding(
        "stranded_gpus", stranded_gpus=5, node_gpus=8, max_cpus_per_gpu=12, max_mem_per_gpu_gib=10
    )
    job = {"state": "OUT_OF_MEMORY", "mem_req_mib": 64 * 1024, "max_rss_mib": 60 * 1024.0}
    advice = run(findings=[stranded], **job)

    options = " ".join(a.option or "" for a in advice)
    assert "--mem=96G" in options and "--mem-per-gpu" not in options
    assert "--cpus-per-gpu=12" in options
    [memory] = [a for a in advice if a.headline == "Ask for more memory"]
    assert "more than 10 GiB per GPU leaves some of the node's GPUs unusable" in memory.reason
    [share] = [a for a in advice if a.headline.startswith("Ask for no more than")]
    assert "memory" not in share.reason
    # only memory stranded them: no cap to ask for but the one it cannot take
    alone = finding("stranded_gpus", stranded_gpus=5, node_gpus=8, max_mem_per_gpu_gib=10)
    assert [a.headline for a in run(findings=[alone], **job)] == ["Ask for more memory"]


@pytest.mark.parametrize(
    ("state", "how"),
    [("FAILED", "failed before it finished"), ("PREEMPTED", "was preempted before it finished")],
)
def test_a_failed_or_preempted_job_is_not_said_to_be_sized_well(state, how):
    from detectors.job_advice import when_no_advice

    assert run(state=state) == []
    said = when_no_advice({**WELL_USED, "state": state})
    assert "sized well for what it did" not in said and "Nothing to change" not in said
    assert how in said and "only the part it ran" in said
    # without telemetry: unknown, as for any job
    assert when_no_advice({**WELL_USED, "state": state, "observed_gpu_h": 0.0}).startswith(
        "No advice: no GPU telemetry"
    )


def test_a_job_cancelled_while_pending_never_started():
    # sacct: Start = End, no node, no GPU (it was "unobserved … check the GPU-to-job mapping")
    import datetime as dt

    from detectors.job_advice import job_started, when_no_advice

    t = dt.datetime(2026, 12, 2, 13, 1, 29, tzinfo=dt.UTC)
    pending = {"start_ts": t, "end_ts": t, "nodes": None, "gpus": 0, "gpus_requested": 8}
    assert not job_started(pending)
    assert not job_started({**pending, "nodes": []})
    assert when_no_advice(pending).startswith("No advice: the job never started")
    # a job that held a node or a GPU for under a second did start
    assert job_started({**pending, "nodes": ["g001"]})
    assert job_started({**pending, "gpus": 2})
    # a job that never started gets no advice, whatever its final state says
    never = {**WELL_USED, "state": "COMPLETED", "start_ts": None, "runtime_s": 0.0}
    assert advise({**never, "observed_gpu_h": None}, [], None) == []
