"""Each alert's fix matches its finding: the dry run of the demo lake told 19 hung jobs to
"adjust the job's request", jobs holding 60 GB on each of 2 GPUs to use a MIG slice, stranded
jobs nothing in particular, and a cancelled job's owner that it was "cancelled by 2003"."""

from __future__ import annotations

import dataclasses
import datetime as dt

from app.alerts.findings import FindingContext
from app.alerts.fixes import concrete_fix, state_phrase

from .factories import NOW

IDLE = ("idle_job",)
GENERIC = "See the finding's details in the dashboard and adjust the job's request."


def finding(detector: str, **over) -> FindingContext:
    base = FindingContext(
        cluster="della",
        finding_id="f-1",
        detector=detector,
        severity="warn",
        subject_kind="job",
        subject_id="1013",
        detected_ts=NOW,
        job_id="1013",
        user="alice",
        job_state="RUNNING",
        gpus=2,
    )
    return dataclasses.replace(base, **over)


def test_a_hung_job_is_told_to_fail_fast_not_to_change_its_request():
    running = concrete_fix(finding("hung_job"), IDLE)
    assert running.startswith("If it is still hung, cancel it: `scancel 1013`.")
    assert "timeout" in running and "watchdog" in running
    assert "request" not in running
    ended = concrete_fix(finding("hung_job", job_state="TIMEOUT", job_end_ts=NOW), IDLE)
    assert "scancel" not in ended and "watchdog" in ended


def test_a_memory_holder_too_big_for_any_slice_is_not_told_to_use_one():
    # 60,797 MiB on each of 2 GPUs of 80 GB: no slice below 7g.80gb holds it
    big = finding(
        "memory_hold",
        fb_used_mib_max=60797.0,
        busy_mean=0.0,
        evidence={"fb_frac_max": 60797.0 / 81559.0},
    )
    said = concrete_fix(big, IDLE)
    assert "MIG" not in said
    assert "`scancel 1013`" in said and "GPU memory it holds" in said


def test_a_small_memory_holder_is_told_the_one_slice_that_holds_all_of_it():
    # 3 GiB on each of 2 GPUs: 6 GiB in all, x 1.2 = 7.2 GiB: one 1g.10gb slice
    small = finding(
        "memory_hold",
        fb_used_mib_max=3072.0,
        busy_mean=0.0,
        job_state="COMPLETED",
        job_end_ts=NOW,
        evidence={"fb_frac_max": 3072.0 / 81920.0},
    )
    said = concrete_fix(small, IDLE)
    assert "`--gres=gpu:1g.10gb:1` holds all it used" in said
    assert "scancel" not in said


def test_stranded_gpus_are_told_each_resource_to_cap():
    both = {"stranded_gpus": 6, "max_cpus_per_gpu": 12, "max_mem_per_gpu_gib": 120}
    said = concrete_fix(finding("stranded_gpus", evidence=both), IDLE)
    assert "`--cpus-per-gpu=12 --mem-per-gpu=120G`" in said
    memory = {"stranded_gpus": 5, "max_cpus_per_gpu": None, "max_mem_per_gpu_gib": 10}
    assert "`--mem-per-gpu=10G`" in concrete_fix(finding("stranded_gpus", evidence=memory), IDLE)
    assert GENERIC != said


def test_overallocated_says_how_many_gpus_or_the_one_slice():
    fewer = finding("overallocated", gpus_never_active=0, evidence={"gpus_needed": 1})
    assert "`--gres=gpu:1`" in concrete_fix(fewer, IDLE)
    whole = finding(
        "overallocated", gpus_never_active=0, evidence={"mig_profile": "2g.20gb", "gpus": 2}
    )
    said = concrete_fix(whole, IDLE)
    assert "`--gres=gpu:2g.20gb:1`" in said and "--gres=gpu:2`" not in said


def test_a_cancelled_job_names_the_canceller_as_a_user_id():
    assert state_phrase("CANCELLED by 2003") == "cancelled by user id 2003"
    assert state_phrase("COMPLETED") == "completed"
    assert state_phrase(None) == "ended"
    ended = finding("idle_job", job_state="CANCELLED by 2003", job_end_ts=NOW)
    assert "has ended (cancelled by user id 2003)" in concrete_fix(ended, IDLE)


def test_the_commands_name_the_slurm_cluster_the_alerts_map_the_findings_cluster_to(tmp_path):
    """A lake of two clusters, both with a job 1049 and a node gpu-002: `scancel 1049` run from
    the wrong host cancels the other cluster's job. Where alerts.action_clusters maps the
    finding's cluster, its commands say which (`-M`); unmapped, they stay as they were."""
    from app.alerts.runner import Seams, run_cycle
    from warehouse.lake import Lake

    from .factories import alerts_config

    idle = finding(
        "idle_job",
        cluster="beta",
        job_id="1049",
        subject_id="1049",
        start_ts=NOW - dt.timedelta(minutes=70),
    )
    node = finding("xid_hardware", cluster="beta", subject_kind="node", node="gpu-002")
    mapped = dataclasses.replace(idle, slurm_name="slurm-beta")
    assert "`scancel -M slurm-beta 1049`" in concrete_fix(mapped, IDLE)
    assert "`scontrol -M slurm-beta update NodeName=gpu-002 State=DRAIN" in concrete_fix(
        dataclasses.replace(node, slurm_name="slurm-beta"), IDLE
    )
    assert "`scancel 1049`" in concrete_fix(idle, IDLE)

    (tmp_path / "lake").mkdir()
    cfg = alerts_config(tmp_path, {"GPULEDGER_ALERTS_ACTION_CLUSTERS": "alpha=a,beta=slurm-beta"})
    seams = Seams(clock=lambda: NOW, read_findings=lambda lake, since, now: [idle])
    report = run_cycle(Lake.at(tmp_path / "lake"), cfg, seams, dry_run=True)
    assert [n.finding.slurm_name for n in report.notices] == ["slurm-beta"]
