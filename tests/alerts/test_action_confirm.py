"""The action's guards: job id formats, the re-read of the job, and what is run for a pod.

The scheduler is reached through the injected seams: a recorded answer for the runner that
runs squeue, and an in-memory Kubernetes API (the collector's `KubernetesApi` protocol) for the
pod, its owner and Kueue Workloads. The live Slurm test is tests/slurm_live/test_live_scancel.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from app.alerts.actions import confirm, job_id_problem
from app.alerts.findings import FindingContext
from app.alerts.settings import AlertsConfig
from app.config import ConfigError, load_config
from collector.sources.kubernetes.api import KubernetesApiError

SUBMIT = dt.datetime(2026, 11, 4, 7, 0, tzinfo=dt.UTC)
UID = "6b1f0c2e-0000-4000-8000-000000000001"


def cfg(**env: str) -> AlertsConfig:
    environ = {f"GPULEDGER_ALERTS_{k.upper()}": v for k, v in env.items()}
    return load_config(None, environ=environ).section(AlertsConfig)


def finding(**over: Any) -> FindingContext:
    base = FindingContext(
        cluster="della",
        finding_id="f-idle",
        detector="idle_job",
        severity="warn",
        subject_kind="job",
        subject_id="4242",
        detected_ts=SUBMIT,
        job_id="4242",
        job_id_raw="4242",
        user="alice",
        job_submit_ts=SUBMIT,
        job_state="RUNNING",
    )
    return dataclasses.replace(base, **over)


@pytest.mark.parametrize(
    ("action", "job_id", "ok"),
    [
        ("scancel", "4242", True),
        ("scancel", "4242_7", True),  # an array task
        ("scancel", "4242+1", True),  # a heterogeneous job's component
        ("scancel", "", False),
        ("scancel", "-1", False),
        ("scancel", "--clusters=all", False),
        ("scancel", "4242 4243", False),
        ("scancel", "4242_[1-3]", False),
        ("scancel", "4242;id", False),
        ("scancel", "team-a/trainer-0", False),
        ("scancel", "4242\n", False),
        ("pod-delete", "team-a/trainer-0", True),
        ("pod-delete", "team-a/job.worker-0.x", True),
        ("pod-delete", "trainer-0", False),  # no namespace
        ("pod-delete", "Team-A/trainer-0", False),
        ("pod-delete", "team-a/-trainer", False),
        ("pod-delete", "team-a/trainer-0/x", False),
        ("pod-delete", "team_a/trainer", False),
        ("pod-delete", "team-a/--all", False),
        ("pod-delete", "a" * 64 + "/pod", False),
        ("pod-delete", "team-a/" + "p" * 254, False),
    ],
)
def test_job_ids_must_be_the_schedulers_own_format(action, job_id, ok):
    assert (job_id_problem(action, job_id) is None) == ok


@pytest.mark.parametrize(
    "entry", ["della=", "della=--all", "=della", "della=a b", "della=x;y", "della=$(id)"]
)
def test_a_bad_endpoint_is_one_clear_config_error(entry):
    with pytest.raises(ConfigError, match=r"alerts\.action_clusters: expected"):
        cfg(action_clusters=entry)


def test_endpoints_map_lake_clusters_and_a_bare_name_maps_to_itself():
    config = cfg(action_clusters="della=della-slurm, k8s=prod@east")
    assert (config.endpoint("della"), config.endpoint("k8s")) == ("della-slurm", "prod@east")
    assert config.endpoint("other") is None
    assert cfg(action_clusters="della").endpoint("della") == "della"


# ---- Slurm: the re-read through the runner seam


class Squeue:
    """Answers the runner's squeue with a recorded line; records every call."""

    def __init__(self, code: int = 0, out: str = "") -> None:
        self.code, self.out = code, out
        self.calls: list[tuple[list[str], dict[str, str]]] = []

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None
    ) -> tuple[int, str]:
        self.calls.append((list(argv), dict(env or {})))
        return self.code, self.out


def no_kube(context: str) -> Any:
    raise AssertionError("a Slurm action must not ask Kubernetes")


def line(job="4242", user="alice", state="RUNNING", submit=SUBMIT) -> str:
    return f"{job}|{user}|{state}|{int(submit.timestamp())}\n"


def test_a_running_job_that_is_the_same_job_is_cancelled_on_its_cluster_only():
    run = Squeue(out=line())
    argv, why = confirm(finding(), "della-slurm", cfg(), run, no_kube)
    assert argv == (
        "scancel", "--clusters=della-slurm", "--user=alice", "--state=RUNNING", "--", "4242"
    )  # fmt: skip
    assert "same job" in why
    [(squeue, env)] = run.calls
    assert squeue == [
        "squeue",
        "--clusters=della-slurm",
        "--jobs=4242",
        "--states=all",
        "--noheader",
        "--format=%i|%u|%T|%V",
    ]
    assert env == {"SLURM_TIME_FORMAT": "%s"}


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (Squeue(out=line(submit=SUBMIT + dt.timedelta(minutes=9))), "another job (requeued"),
        (Squeue(out=line(user="bob")), "belongs to bob, not alice"),
        (Squeue(out=line(state="COMPLETING")), "is COMPLETING, no longer running"),
        (Squeue(out=line(job="4243")), "does not know job 4242"),
        (Squeue(out=""), "does not know job 4242"),
        (Squeue(out=line().replace(str(int(SUBMIT.timestamp())), "N/A")), "no readable submit"),
        (Squeue(1, "squeue: error: No cluster 'x' known by database."), "could not read"),
    ],
)
def test_anything_but_the_same_running_job_is_left_alone(answer, why):
    argv, reason = confirm(finding(), "della", cfg(), answer, no_kube)
    assert argv is None and why in reason


@pytest.mark.parametrize(
    ("over", "why"),
    [({"user": None}, "names no user"), ({"job_submit_ts": None}, "no submit time")],
)
def test_without_the_lakes_user_and_submit_time_nothing_can_be_compared(over, why):
    run = Squeue(out=line())
    argv, reason = confirm(finding(**over), "della", cfg(), run, no_kube)
    assert argv is None and why in reason and run.calls == []


# ---- Kubernetes: the re-read through the API seam, and the owner's action


def pod(owner: dict[str, Any] | None = None, **over: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "trainer-0", "namespace": "team-a", "uid": UID}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    obj = {"metadata": meta, "status": {"phase": "Running"}}
    for key, value in over.items():
        (obj["status"] if key == "phase" else meta)[key] = value
    return obj


JOB_OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "trainer", "uid": "job-uid",
             "controller": True}  # fmt: skip


def workload(owner_uid: str, name: str = "job-trainer-3f2a1") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "ownerReferences": [{"kind": "Job", "name": "trainer", "uid": owner_uid}],
        }
    }


class FakeKube:
    """The collector's KubernetesApi protocol over in-memory objects, per context."""

    def __init__(self, pods: list[dict[str, Any]], workloads: list[dict[str, Any]] | None = None):
        self.pods, self.workloads = pods, workloads
        self.contexts: list[str] = []

    def __call__(self, context: str) -> FakeKube:
        self.contexts.append(context)
        return self

    def list_pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return [p for p in self.pods if p["metadata"]["namespace"] == namespace]

    def list_nodes(self) -> list[dict[str, Any]]:
        return []

    def list_custom(
        self, group: str, version: str, plural: str, namespace: str | None = None
    ) -> list[dict[str, Any]] | None:
        assert (group, plural) == ("kueue.x-k8s.io", "workloads")
        if self.workloads is None:
            return None  # Kueue not installed
        return [w for w in self.workloads if w["metadata"]["namespace"] == namespace]


def k8s_finding(**over: Any) -> FindingContext:
    return finding(**{"cluster": "k8s", "job_id": "team-a/trainer-0", "job_id_raw": UID, **over})


K8S = {"action": "pod-delete", "kubectl_command": "kubectl"}
PREFIX = ("kubectl", "--context=prod", "--namespace=team-a")


def no_runner(argv: Sequence[str], env: Mapping[str, str] | None = None) -> tuple[int, str]:
    raise AssertionError("the pod is re-read through the API, not a command")


def test_a_kueue_workload_is_set_inactive():
    kube = FakeKube([pod(JOB_OWNER)], [workload("other-uid", "x"), workload("job-uid")])
    argv, why = confirm(k8s_finding(), "prod", cfg(**K8S), no_runner, kube)
    assert argv == (*PREFIX, "patch", "workloads.kueue.x-k8s.io", "--type=merge",
                    '--patch={"spec":{"active":false}}', "--", "job-trainer-3f2a1")  # fmt: skip
    assert json.loads(argv[-3].removeprefix("--patch=")) == {"spec": {"active": False}}
    assert kube.contexts == ["prod"]
    assert "Workload job-trainer-3f2a1" in why


def test_a_kueue_pod_workload_owned_by_the_pod_itself_is_set_inactive():
    kube = FakeKube([pod()], [workload(UID, "pod-trainer-0-1a2b3")])
    argv, _ = confirm(k8s_finding(), "prod", cfg(**K8S), no_runner, kube)
    assert argv is not None and argv[-1] == "pod-trainer-0-1a2b3" and "patch" in argv


@pytest.mark.parametrize("workloads", [None, []])
def test_a_jobs_pod_suspends_the_job_not_the_pod(workloads):
    kube = FakeKube([pod(JOB_OWNER)], workloads)
    argv, why = confirm(k8s_finding(), "prod", cfg(**K8S), no_runner, kube)
    assert argv == (*PREFIX, "patch", "job", "--type=merge", '--patch={"spec":{"suspend":true}}',
                    "--", "trainer")  # fmt: skip
    assert "Job trainer is suspended" in why


def test_only_a_bare_pod_is_deleted():
    argv, _ = confirm(k8s_finding(), "prod", cfg(**K8S), no_runner, FakeKube([pod()], None))
    assert argv == (*PREFIX, "delete", "pod", "--wait=false", "--", "trainer-0")


@pytest.mark.parametrize(
    ("pods", "why"),
    [
        ([pod({"kind": "ReplicaSet", "name": "web-5d9", "uid": "rs", "controller": True})],
         "owned by ReplicaSet web-5d9"),
        ([pod(uid="another-uid")], "another pod"),
        ([pod(phase="Succeeded")], "is Succeeded, no longer running"),
        ([pod(deletionTimestamp="2026-11-04T10:00:00Z")], "being deleted already"),
        ([], "does not know pod team-a/trainer-0"),
        ([pod(JOB_OWNER | {"name": "Bad_Name"})], "has no valid name"),
    ],
)  # fmt: skip
def test_anything_but_the_same_running_pod_with_a_suspendable_owner_is_left_alone(pods, why):
    argv, reason = confirm(k8s_finding(), "prod", cfg(**K8S), no_runner, FakeKube(pods, []))
    assert argv is None and why in reason


def test_an_api_error_is_a_reason_not_a_crash():
    def broken(context: str) -> Any:
        raise KubernetesApiError("connection refused", status=None)

    argv, reason = confirm(k8s_finding(), "prod", cfg(**K8S), no_runner, broken)
    assert argv is None and "could not re-read" in reason and "connection refused" in reason


def test_a_pod_without_the_lakes_uid_is_never_acted_on():
    kube = FakeKube([pod()], [])
    argv, reason = confirm(k8s_finding(job_id_raw=None), "prod", cfg(**K8S), no_runner, kube)
    assert argv is None and "no UID" in reason and kube.contexts == []


JOBSET_CHILD = {"apiVersion": "batch/v1", "kind": "Job", "name": "llm-sft-workers-0",
                "uid": "child-job-uid", "controller": True}  # fmt: skip


def jobset_pod() -> dict[str, Any]:
    return pod(JOBSET_CHILD, labels={"jobset.sigs.k8s.io/jobset-name": "llm-sft"})


JOBSETS = {"kind": "JobSet", "name": "llm-sft", "uid": "js-uid"}


@pytest.mark.parametrize("workloads", [None, [], "the JobSet's"])
def test_a_jobset_pod_is_left_alone(workloads):
    # The probe: the child Job was suspended, which the JobSet resumes, and the ledger said
    # done. The JobSet's Workload cannot be told from the pod: its labels (which its creator
    # sets) name a JobSet, and one naming another team's would deactivate theirs (review).
    owned = [{"metadata": {"name": "jobset-llm-sft-4b1c7", "namespace": "team-a",
                           "ownerReferences": [JOBSETS]}}]  # fmt: skip
    kube = FakeKube([jobset_pod()], owned if workloads == "the JobSet's" else workloads)
    argv, why = confirm(k8s_finding(), "prod", cfg(**K8S), no_runner, kube)
    assert argv is None
    assert "belongs to JobSet llm-sft through Job llm-sft-workers-0" in why


def test_a_pod_with_several_workloads_is_left_alone():
    kube = FakeKube([pod(JOB_OWNER)], [workload("job-uid", "w-1"), workload("job-uid", "w-2")])
    argv, why = confirm(k8s_finding(), "prod", cfg(**K8S), no_runner, kube)
    assert argv is None and "several Kueue Workloads (w-1, w-2)" in why
