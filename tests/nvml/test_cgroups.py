"""PID → Slurm job / Kubernetes pod through a fake /proc tree, for every cgroup layout we know."""

from __future__ import annotations

import pytest

from collector.sources.nvml.cgroups import Owner, lookup_owner, parse_cgroup, resolve_owners

CID = "3f2a9c4b1d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a"  # a 64-hex container id
UID = "8f3d2a1c-5b6e-4f7a-9c0d-1e2f3a4b5c6d"
UID_ = UID.replace("-", "_")  # how the systemd cgroup driver writes it

SLURM_V1 = """
12:memory:/slurm/uid_2101171/job_280678/step_0/task_0
11:devices:/slurm/uid_2101171/job_280678/step_0/task_0
10:freezer:/slurm/uid_2101171/job_280678/step_0
9:cpuset:/slurm/uid_2101171/job_280678/step_0
4:cpu,cpuacct:/system.slice/slurmd.service
1:name=systemd:/system.slice/slurmd.service
0::/system.slice/slurmd.service
"""

CASES = {
    # ---- Slurm
    "slurm cgroup v1 (hybrid host)": (SLURM_V1, Owner("slurm", "280678", "280678", "0")),
    "slurm cgroup v1, multiple slurmd": (
        "7:devices:/slurm_g001/uid_1000/job_77/step_batch/task_0",
        Owner("slurm", "77", "77", "batch"),
    ),
    "slurm cgroup v2": (
        "0::/system.slice/slurmstepd.scope/job_1392969/step_0/user/task_0",
        Owner("slurm", "1392969", "1392969", "0"),
    ),
    "slurm cgroup v2, multiple slurmd": (
        "0::/system.slice/g001_slurmstepd.scope/job_77/step_batch/user/task_0",
        Owner("slurm", "77", "77", "batch"),
    ),
    "slurm cgroup v2, ssh session adopted into step_extern": (
        "0::/system.slice/slurmstepd.scope/job_42/step_extern/user/task_special",
        Owner("slurm", "42", "42", "extern"),
    ),
    "slurm cgroup v2, interactive step": (
        "0::/system.slice/slurmstepd.scope/job_43/step_interactive/user/task_0",
        Owner("slurm", "43", "43", "interactive"),
    ),
    # ---- containers inside a Slurm job
    "apptainer in slurm (runs in the step's own cgroup)": (
        "0::/system.slice/slurmstepd.scope/job_57/step_0/user/task_0",
        Owner("slurm", "57", "57", "0"),
    ),
    "a runtime's sub-cgroup below the step": (
        "0::/system.slice/slurmstepd.scope/job_57/step_0/user/task_0/apptainer-81234",
        Owner("slurm", "57", "57", "0"),
    ),
    "rootless podman in slurm, --cgroups=split": (
        f"0::/system.slice/slurmstepd.scope/job_56/step_0/user/task_0/libpod-{CID}.scope/container",
        Owner("slurm", "56", "56", "0", f"libpod:{CID[:12]}"),
    ),
    "docker in slurm with --cgroup-parent inside the job (cgroupfs)": (
        f"5:memory:/slurm/uid_1000/job_55/step_0/{CID}\n0::/",
        Owner("slurm", "55", "55", "0", f"container:{CID[:12]}"),
    ),
    # ---- Kubernetes
    "k8s burstable, cgroupfs driver (v1)": (
        f"11:memory:/kubepods/burstable/pod{UID}/{CID}\n0::/",
        Owner("k8s", UID, UID, None, f"container:{CID[:12]}"),
    ),
    "k8s besteffort, systemd driver, cri-o (v2)": (
        "0::/kubepods.slice/kubepods-besteffort.slice/"
        f"kubepods-besteffort-pod{UID_}.slice/crio-{CID}.scope",
        Owner("k8s", UID, UID, None, f"crio:{CID[:12]}"),
    ),
    "k8s guaranteed, systemd driver, containerd (v2)": (
        f"0::/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{CID}.scope",
        Owner("k8s", UID, UID, None, f"cri-containerd:{CID[:12]}"),
    ),
    "k8s guaranteed, cgroupfs driver (v2)": (
        f"0::/kubepods/pod{UID}/{CID}",
        Owner("k8s", UID, UID, None, f"container:{CID[:12]}"),
    ),
    "k8s burstable, systemd driver, docker runtime (v1)": (
        "9:devices:/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod{UID_}.slice/docker-{CID}.scope",
        Owner("k8s", UID, UID, None, f"docker:{CID[:12]}"),
    ),
    "k8s static pod (UID is 32 hex digits)": (
        "0::/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod6d1f5a0e2b3c4d5e6f708192a3b4c5d6.slice/cri-containerd-{CID}.scope",
        Owner(
            "k8s",
            "6d1f5a0e2b3c4d5e6f708192a3b4c5d6",
            "6d1f5a0e2b3c4d5e6f708192a3b4c5d6",
            None,
            f"cri-containerd:{CID[:12]}",
        ),
    ),
    "slurm inside a pod (Slinky): the job below the pod": (
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
        f"cri-containerd-{CID}.scope/system.slice/slurmstepd.scope/job_58/step_0/user/task_0",
        Owner("slurm", "58", "58", "0"),
    ),
}

NO_OWNER = {
    "slurmstepd itself": ("0::/system.slice/slurmstepd.scope/system", "no_job_cgroup"),
    "a system service": ("0::/system.slice/nvidia-persistenced.service", "no_job_cgroup"),
    "job-shaped name outside slurm": ("0::/user.slice/job_5", "no_job_cgroup"),
    "docker daemon's own scope (v2)": (
        f"0::/system.slice/docker-{CID}.scope",
        "container_outside_job",
    ),
    "docker, cgroupfs driver (v1)": (f"4:memory:/docker/{CID}\n0::/", "container_outside_job"),
    "rootful podman via systemd": (
        f"0::/machine.slice/libpod-{CID}.scope/container",
        "container_outside_job",
    ),
    "empty file": ("", "no_job_cgroup"),
}


@pytest.mark.parametrize(("text", "expected"), CASES.values(), ids=CASES.keys())
def test_cgroup_paths_name_their_owner(text, expected):
    assert parse_cgroup(text.strip()) == (expected, None)


@pytest.mark.parametrize(("text", "reason"), NO_OWNER.values(), ids=NO_OWNER.keys())
def test_cgroup_paths_without_a_job_give_a_reason(text, reason):
    assert parse_cgroup(text.strip()) == (None, reason)


def test_the_unified_line_wins_when_hybrid_lines_disagree():
    text = "4:memory:/slurm/uid_1/job_10/step_0\n0::/system.slice/slurmstepd.scope/job_11/step_0"

    owner, _ = parse_cgroup(text)

    assert owner is not None and owner.job_id == "11"


def test_array_task_takes_its_display_id_from_a_matching_environment(proc):
    proc.add(
        100,
        "0::/system.slice/slurmstepd.scope/job_1401/step_0/user/task_0",
        environ={"SLURM_JOB_ID": "1401", "SLURM_ARRAY_JOB_ID": "1400", "SLURM_ARRAY_TASK_ID": "1"},
    )

    found = lookup_owner(100, proc.root)

    assert found.owner == Owner("slurm", "1400_1", "1401", "0")


def test_an_environment_that_contradicts_the_cgroup_is_ignored(proc):
    # SLURM_* can be set by anyone; only the cgroup says which job a process is in
    proc.add(
        101,
        "0::/system.slice/slurmstepd.scope/job_1401/step_0/user/task_0",
        environ={"SLURM_JOB_ID": "999", "SLURM_ARRAY_JOB_ID": "998", "SLURM_ARRAY_TASK_ID": "3"},
    )

    assert lookup_owner(101, proc.root).owner == Owner("slurm", "1401", "1401", "0")


@pytest.mark.parametrize(
    "below",
    [
        "slurm/job_999",  # a sub-cgroup the job's user made (rootless Podman --cgroups=split)
        f"kubepods-pod{UID_}.slice",
    ],
)
def test_a_cgroup_below_a_jobs_names_no_other_owner(below):
    """A job's user may create cgroups below the job's (delegated): named like another job
    or a pod there, the innermost took the GPU time away to that other job."""
    text = f"0::/system.slice/slurmstepd.scope/job_100/step_0/user/task_0/{below}/x.scope"

    owner, _ = parse_cgroup(text)

    assert owner is not None and (owner.kind, owner.job_id) == ("slurm", "100")


def test_a_process_claiming_a_later_array_in_its_environment_keeps_its_raw_id(proc):
    # an array job's own id is never above its tasks' raw ids: job 100 cannot be 555_1
    proc.add(
        103,
        "0::/system.slice/slurmstepd.scope/job_100/step_0/user/task_0",
        environ={"SLURM_JOB_ID": "100", "SLURM_ARRAY_JOB_ID": "555", "SLURM_ARRAY_TASK_ID": "1"},
    )

    assert lookup_owner(103, proc.root).owner == Owner("slurm", "100", "100", "0")


def test_every_process_of_an_array_task_gets_the_id_its_processes_claim(proc):
    """Two processes of array task 555_1 (raw 600), one with a cleared environment: its GPU
    time went to a job 600 without a record, and the task's GPU read as shared."""
    cgroup = "0::/system.slice/slurmstepd.scope/job_600/step_0/user/task_0"
    proc.add(
        1,
        cgroup,
        environ={"SLURM_JOB_ID": "600", "SLURM_ARRAY_JOB_ID": "555", "SLURM_ARRAY_TASK_ID": "1"},
    )
    proc.add(2, cgroup, environ={"PATH": "/usr/bin"})
    # two claims for one raw id (one of them set by hand): neither is taken
    proc.add(
        3,
        "0::/system.slice/slurmstepd.scope/job_700/step_0/user/task_0",
        environ={"SLURM_JOB_ID": "700", "SLURM_ARRAY_JOB_ID": "690", "SLURM_ARRAY_TASK_ID": "2"},
    )
    proc.add(
        4,
        "0::/system.slice/slurmstepd.scope/job_700/step_0/user/task_0",
        environ={"SLURM_JOB_ID": "700", "SLURM_ARRAY_JOB_ID": "555", "SLURM_ARRAY_TASK_ID": "1"},
    )

    found = resolve_owners([1, 2, 3, 4], proc.root)

    assert {pid: f.owner.job_id for pid, f in found.items() if f.owner} == {
        1: "555_1",
        2: "555_1",
        3: "700",
        4: "700",
    }


def test_an_array_id_seen_once_stays_with_the_raw_id_when_only_a_cleared_process_is_left(proc):
    """`apptainer --cleanenv`: the task's GPU process has no SLURM_* environment; once another
    of its processes was seen with it, the task keeps its array id (it was raw id 600)."""
    cgroup = "0::/system.slice/slurmstepd.scope/job_600/step_0/user/task_0"
    proc.add(
        1,
        cgroup,
        environ={"SLURM_JOB_ID": "600", "SLURM_ARRAY_JOB_ID": "555", "SLURM_ARRAY_TASK_ID": "1"},
    )
    proc.add(2, cgroup, environ={"PATH": "/usr/bin"})
    arrays: dict[str, str] = {}

    resolve_owners([1, 2], proc.root, arrays=arrays)
    later = resolve_owners([2], proc.root, arrays=arrays)

    assert later[2].owner is not None and later[2].owner.job_id == "555_1"
    assert resolve_owners([2], proc.root)[2].owner.job_id == "600"  # never seen: its raw id


def test_array_task_without_a_readable_environment_keeps_its_raw_id(proc):
    proc.add(102, "10:devices:/slurm/uid_5/job_1402/step_batch/task_0")

    assert lookup_owner(102, proc.root).owner == Owner("slurm", "1402", "1402", "batch")


def test_a_process_that_exited_before_its_cgroup_was_read_is_skipped(proc):
    found = lookup_owner(4242, proc.root)  # listed by NVML, gone from /proc

    assert (found.owner, found.reason) == (None, "process_gone")


def test_resolve_owners_looks_each_pid_up_once(proc):
    proc.add(1, "0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0")
    proc.add(2, f"0::/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{CID}.scope")
    proc.add(3, f"0::/system.slice/docker-{CID}.scope")
    proc.add(4, "0::/init.scope")

    found = resolve_owners([1, 2, 2, 3, 4, 5], proc.root)

    assert {pid: (f.owner.job_id if f.owner else f.reason) for pid, f in found.items()} == {
        1: "7",
        2: UID,
        3: "container_outside_job",
        4: "no_job_cgroup",
        5: "process_gone",
    }
