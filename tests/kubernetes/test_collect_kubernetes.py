"""`collect_kubernetes`: GPU pods as `jobs`, whole nodes as `job_gpus`, and `queues`, incrementally.

The API is a fake answering from recorded snapshots of one cluster (tests/fixtures/kubernetes,
see PROVENANCE.md): `t1` at 12:00, `t2` at 12:10 (one pod finished), `t3` at 12:20 (Kueue
preempted a JobSet, whose pod is gone; a quota changed). The lake is read back through
`warehouse.connection.connect`.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from collector.errors import ConfigError
from collector.sources.kubernetes.api import KubernetesApiError
from collector.sources.kubernetes.collect import collect_kubernetes
from warehouse.connection import connect
from warehouse.lake import Lake

CLUSTER = "k8s-demo"
T1 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
T2 = T1 + dt.timedelta(minutes=10)
T3 = T1 + dt.timedelta(minutes=20)
UNAUTHORIZED = KubernetesApiError(
    "the Kubernetes API at https://10.0.0.1:6443 answered 401 to the list of pods: "
    "Unauthorized; the credentials were refused (expired token or certificate?)",
    401,
)
REFUSED = KubernetesApiError(
    "could not reach the Kubernetes API at https://10.0.0.1:6443 to list "
    "workloads.kueue.x-k8s.io/v1beta1: [Errno 111] Connection refused"
)


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


_connections: dict[tuple, duckdb.DuckDBPyConnection] = {}


def rows(root, query, **params):
    """The rows of `query` over the lake; one connection per state of the lake's files (a
    `connect` costs 0.1 CPU-s, and a test reads one state several times)."""
    key = (root, tuple(sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*.parquet"))))
    if key not in _connections:
        for old in _connections.values():
            old.close()
        _connections.clear()
        _connections[key] = connect(root)
    result = _connections[key].sql(query, params=params or None)
    return [dict(zip(result.columns, row, strict=True)) for row in result.fetchall()]


def lake_files(root):
    return sorted(p.relative_to(root) for p in root.rglob("*.parquet"))


def job(job_id, **columns):
    """A `jobs` row of the `t1` collection: every column, with these values."""
    row = {
        "cluster": CLUSTER,
        "job_id": job_id,
        "qos": None,
        "exit_code": None,
        "end_ts": None,
        "time_limit_s": None,
        "cpu_time_s": None,
        "max_rss_mib": None,
        "interactive": False,
        "requeues": 0,
        "source": "kubernetes",
        "updated_ts": T1,
    }
    row.update(columns)
    return row


H100 = "NVIDIA-H100-80GB-HBM3"
EXPECTED_T1 = [
    job(
        "team-a/finetune-7tq4m",
        job_id_raw="c3e9a0d2-6b4f-4f2a-8d1e-5a7b9c0e1f22",
        user="carol",
        account="nlp",
        partition="cq-research",
        job_name="Job/finetune",
        state="COMPLETED",
        exit_code="0:0",
        submit_ts=utc("2026-11-30T05:58:00"),  # its Workload's creation
        start_ts=utc("2026-11-30T06:01:15"),
        end_ts=utc("2026-11-30T07:43:57"),
        time_limit_s=14400,
        gpus=4,
        gpus_requested=4,
        gpu_type=H100,
        nodes=["gpu-h100-02"],
        cpus=9,
        mem_req_mib=65664,
    ),
    job(
        "team-a/llm-sft-workers-0-0-8xk2p",
        job_id_raw="5b0c7e1a-3f7d-4c1e-9a61-2f4f0f6a1c01",
        user="alice",
        account="team-a",
        partition="cq-research",
        job_name="JobSet/llm-sft",
        state="RUNNING",
        submit_ts=utc("2026-11-30T08:40:02"),
        start_ts=utc("2026-11-30T09:12:44"),
        gpus=8,
        gpus_requested=8,
        gpu_type=H100,
        nodes=["gpu-h100-01"],
        cpus=96,
        mem_req_mib=921600,
    ),
    job(
        "team-b/bob-0",
        job_id_raw="2a3b4c5d-6e7f-4809-9a1b-2c3d4e5f6071",
        user="system:serviceaccount:team-b:default-editor",
        account="team-b",
        partition=None,
        job_name="StatefulSet/bob",
        state="RUNNING",
        submit_ts=utc("2026-11-28T14:02:10"),
        start_ts=utc("2026-11-28T14:02:11"),
        gpus=1,
        gpus_requested=1,
        gpu_type="NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
        nodes=["gpu-a100-mig-01"],
        cpus=2,
        mem_req_mib=16384,
        interactive=True,
    ),
    job(
        "team-b/infer-7f9c8d6b5-x2x9z",
        job_id_raw="4c5d6e7f-8091-42a3-b4c5-d6e7f8091a2b",
        user="system:serviceaccount:team-b:infer",
        account="vision",
        partition=None,
        job_name="Deployment/infer",
        state="RUNNING",
        submit_ts=utc("2026-11-29T22:15:30"),
        start_ts=utc("2026-11-29T22:15:31"),
        gpus=2,
        gpus_requested=2,
        gpu_type="NVIDIA-A100-SXM4-80GB-MIG-2g.20gb",
        nodes=["gpu-a100-mig-01"],
        cpus=4,
        mem_req_mib=16384,
    ),
    job(
        "team-c/debug-shell",
        job_id_raw="91a2b3c4-d5e6-47f8-8091-a2b3c4d5e6f7",
        user="dave",
        account="team-c",
        partition=None,
        job_name="Pod/debug-shell",
        state="PREEMPTED",  # evicted by the kubelet
        exit_code="0:9",
        submit_ts=utc("2026-11-30T10:40:00"),
        start_ts=utc("2026-11-30T10:40:01"),
        end_ts=utc("2026-11-30T11:20:31"),
        gpus=1,
        gpus_requested=1,
        gpu_type=H100,
        nodes=["gpu-h100-02"],
        cpus=None,
        mem_req_mib=None,
    ),
    job(
        "team-c/gated-eval",
        job_id_raw="d5e6f708-192a-43b4-c5d6-e7f8091a2b3c",
        user="frank",
        account="team-c",
        partition="cq-eval",
        job_name="Pod/gated-eval",
        state="PENDING",
        submit_ts=utc("2026-11-30T11:50:03"),  # the pod came first, then its Workload
        start_ts=None,
        gpus=None,
        gpus_requested=2,
        gpu_type=None,
        nodes=None,
        cpus=8,
        mem_req_mib=49152,
    ),
    job(
        "team-c/tokenize-big-r2xkq",
        job_id_raw="6e7f8091-a2b3-44c5-d6e7-f8091a2b3c4d",
        user="dave",
        account="team-c",
        partition=None,
        job_name="Job/tokenize-big",
        state="OUT_OF_MEMORY",
        exit_code="0:9",
        submit_ts=utc("2026-11-30T10:02:09"),
        start_ts=utc("2026-11-30T10:02:10"),
        end_ts=utc("2026-11-30T10:31:07"),
        gpus=1,
        gpus_requested=1,
        gpu_type=H100,
        nodes=["gpu-h100-02"],
        cpus=6,
        mem_req_mib=24576,
    ),
    job(
        "team-v/bert-pretrain-master-0",
        job_id_raw="b3c4d5e6-f708-4192-a3b4-c5d6e7f8091a",
        user="erin",
        account="speech",
        partition="vc-research",
        qos="high-priority",
        job_name="PyTorchJob/bert-pretrain",
        state="RUNNING",
        submit_ts=utc("2026-11-30T10:58:31"),
        start_ts=utc("2026-11-30T10:58:33"),
        gpus=2,
        gpus_requested=2,
        gpu_type=H100,
        nodes=["gpu-h100-02"],
        cpus=16,
        mem_req_mib=131072,
    ),
    job(
        "team-v/bert-pretrain-worker-0",
        job_id_raw="c4d5e6f7-0819-42a3-b4c5-d6e7f8091a2b",
        user="erin",
        account="speech",
        partition="vc-research",
        qos="high-priority",
        job_name="PyTorchJob/bert-pretrain",
        state="RUNNING",
        submit_ts=utc("2026-11-30T10:58:31"),
        start_ts=utc("2026-11-30T10:58:33"),
        gpus=2,
        gpus_requested=2,
        gpu_type=H100,
        nodes=["gpu-h100-02"],
        cpus=16,
        mem_req_mib=131072,
        requeues=2,
    ),
    job(
        "team-v/sweep-lr-0",
        job_id_raw="e6f70819-2a3b-44c5-d6e7-f8091a2b3c4d",
        user="system:serviceaccount:team-v:default",
        account="team-v",
        partition="vc-inference",
        job_name="Pod/sweep-lr-0",
        state="PENDING",
        submit_ts=utc("2026-11-30T11:55:41"),
        start_ts=None,
        gpus=None,
        gpus_requested=1,
        gpu_type=None,
        nodes=None,
        cpus=4,
        mem_req_mib=16384,
    ),
]


def queue(kind, name, **columns):
    row = dict.fromkeys(
        (
            "namespace",
            "parent",
            "flavor",
            "resource",
            "gpu_quota",
            "gpu_borrowing_limit",
            "gpu_lending_limit",
            "gpu_guarantee",
            "gpu_limit",
            "weight",
            "queueing_strategy",
            "preemption_within_cluster_queue",
            "preemption_reclaim_within_cohort",
        )
    )
    row.update(cluster=CLUSTER, kind=kind, name=name, deleted=False, updated_ts=T1)
    if kind == "kueue-clusterqueue" and not columns.get("deleted"):
        # every recorded ClusterQueue has Kueue's defaults filled in by the API server
        row.update(
            queueing_strategy="BestEffortFIFO",
            preemption_within_cluster_queue="LowerPriority",
            preemption_reclaim_within_cohort="Any",
        )
    row.update(columns)
    return row


GPU = "nvidia.com/gpu"
EXPECTED_QUEUES_T1 = [
    queue("kueue-clusterqueue", "cq-cpu"),
    queue(
        "kueue-clusterqueue", "cq-eval", parent="org", flavor="a100", resource=GPU, gpu_quota=8.0
    ),
    queue(
        "kueue-clusterqueue", "cq-eval", parent="org", flavor="h100", resource=GPU, gpu_quota=4.0
    ),
    queue(
        "kueue-clusterqueue",
        "cq-inference",
        flavor="a100-mig",
        resource="nvidia.com/mig-1g.10gb",
        gpu_quota=7.0,
    ),
    queue(
        "kueue-clusterqueue",
        "cq-inference",
        flavor="a100-mig",
        resource="nvidia.com/mig-2g.20gb",
        gpu_quota=6.0,
    ),
    queue(
        "kueue-clusterqueue",
        "cq-research",
        parent="org",
        flavor="h100",
        resource=GPU,
        gpu_quota=12.0,
        gpu_borrowing_limit=4.0,
        gpu_lending_limit=4.0,
        weight=2.0,
    ),
    queue("kueue-localqueue", "team-a-queue", namespace="team-a", parent="cq-research"),
    queue("kueue-localqueue", "team-b-queue", namespace="team-b", parent="cq-inference"),
    queue("kueue-localqueue", "team-c-queue", namespace="team-c", parent="cq-eval"),
    queue("volcano-queue", "default", weight=1.0),
    queue("volcano-queue", "vc-inference", resource=GPU, gpu_quota=2.0, gpu_limit=4.0, weight=1.0),
    queue(
        "volcano-queue", "vc-research", resource=GPU, gpu_guarantee=4.0, gpu_limit=16.0, weight=4.0
    ),
]
QUEUE_ORDER = "ORDER BY kind, name, flavor, resource"


@pytest.fixture
def first_run(tmp_path, fake_kubernetes):
    return collect_kubernetes(Lake.at(tmp_path), CLUSTER, fake_kubernetes("t1"), now=T1)


def test_the_first_run_lands_every_gpu_pod_as_a_job_field_by_field(tmp_path, first_run):
    assert (first_run.pods_seen, first_run.gpu_pods) == (12, 10)
    assert (first_run.jobs_new, first_run.jobs_updated, first_run.jobs_gone) == (10, 0, 0)
    assert first_run.integrations == ("kueue v1beta1", "volcano")
    assert first_run.malformed == ()

    assert rows(tmp_path, "SELECT * FROM jobs ORDER BY job_id") == EXPECTED_T1


def test_the_first_run_lands_the_queues_field_by_field(tmp_path, first_run):
    assert (first_run.queues_landed, first_run.queues_deleted) == (12, 0)
    assert rows(tmp_path, f"SELECT * FROM queues {QUEUE_ORDER}") == EXPECTED_QUEUES_T1


def test_only_a_pod_holding_a_whole_node_gets_a_job_gpus_row(tmp_path, first_run):
    assert (first_run.gpu_rows_opened, first_run.gpu_rows_closed) == (1, 0)
    assert rows(tmp_path, "SELECT * FROM job_gpus") == [
        {
            "cluster": CLUSTER,
            "job_id": "team-a/llm-sft-workers-0-0-8xk2p",
            "node": "gpu-h100-01",
            "gpu_index": None,
            "gpu_uuid": None,
            "mig_instance": None,
            "start_ts": utc("2026-11-30T09:12:44"),
            "end_ts": None,
            "mapping": "whole-node",
        }
    ]


def test_a_second_identical_collection_lands_nothing(tmp_path, fake_kubernetes, first_run):
    before = lake_files(tmp_path)

    again = collect_kubernetes(
        Lake.at(tmp_path), CLUSTER, fake_kubernetes("t1"), now=T1 + dt.timedelta(minutes=5)
    )

    assert (again.jobs_landed, again.queues_landed, again.queues_deleted) == (0, 0, 0)
    assert (again.gpu_rows_opened, again.gpu_rows_closed) == (0, 0)
    assert lake_files(tmp_path) == before
    assert rows(tmp_path, "SELECT count(*) AS n FROM jobs") == [{"n": 10}]


def test_a_pod_that_changes_phase_lands_one_new_version(tmp_path, fake_kubernetes, first_run):
    later = collect_kubernetes(Lake.at(tmp_path), CLUSTER, fake_kubernetes("t2"), now=T2)

    assert (later.jobs_new, later.jobs_updated, later.jobs_gone) == (0, 1, 0)
    assert rows(tmp_path, "SELECT count(*) AS n FROM jobs") == [{"n": 11}]
    [latest] = rows(
        tmp_path, "SELECT * FROM jobs_latest WHERE job_id = 'team-v/bert-pretrain-worker-0'"
    )
    [first] = [r for r in EXPECTED_T1 if r["job_id"] == "team-v/bert-pretrain-worker-0"]
    assert latest == {
        **first,
        "state": "COMPLETED",
        "exit_code": "0:0",
        "end_ts": utc("2026-11-30T12:05:10"),
        "updated_ts": T2,
    }
    # every other job's latest version is still the first one
    others = rows(
        tmp_path, "SELECT job_id, updated_ts FROM jobs_latest WHERE updated_ts = $t", t=T1
    )
    assert len(others) == 9


def test_a_pod_preempted_by_kueue_ends_when_its_workload_was_evicted(
    tmp_path, fake_kubernetes, first_run
):
    collect_kubernetes(Lake.at(tmp_path), CLUSTER, fake_kubernetes("t2"), now=T2)

    gone = collect_kubernetes(Lake.at(tmp_path), CLUSTER, fake_kubernetes("t3"), now=T3)

    assert (gone.jobs_new, gone.jobs_updated, gone.jobs_gone) == (0, 0, 1)
    [latest] = rows(
        tmp_path, "SELECT * FROM jobs_latest WHERE job_id = 'team-a/llm-sft-workers-0-0-8xk2p'"
    )
    [first] = [r for r in EXPECTED_T1 if r["job_id"] == "team-a/llm-sft-workers-0-0-8xk2p"]
    assert latest == {
        **first,
        "state": "PREEMPTED",
        "end_ts": utc("2026-11-30T12:14:19"),
        "updated_ts": T3,
    }
    # the whole-node row is closed at the same time, in place (no open copy left beside it)
    assert gone.gpu_rows_closed == 1
    assert rows(tmp_path, "SELECT job_id, end_ts FROM job_gpus") == [
        {"job_id": "team-a/llm-sft-workers-0-0-8xk2p", "end_ts": utc("2026-11-30T12:14:19")}
    ]
    # and it is landed once: a fourth run changes nothing
    quiet = collect_kubernetes(
        Lake.at(tmp_path), CLUSTER, fake_kubernetes("t3"), now=T3 + dt.timedelta(minutes=1)
    )
    assert (quiet.jobs_landed, quiet.gpu_rows_closed, quiet.queues_landed) == (0, 0, 0)


def test_a_quota_change_lands_a_new_version_of_that_queue_row_only(
    tmp_path, fake_kubernetes, first_run
):
    result = collect_kubernetes(Lake.at(tmp_path), CLUSTER, fake_kubernetes("t3"), now=T3)

    assert (result.queues_landed, result.queues_deleted) == (1, 0)
    assert rows(
        tmp_path,
        "SELECT flavor, gpu_quota, updated_ts FROM queues WHERE name = 'cq-eval' "
        "ORDER BY updated_ts, flavor",
    ) == [
        {"flavor": "a100", "gpu_quota": 8.0, "updated_ts": T1},
        {"flavor": "h100", "gpu_quota": 4.0, "updated_ts": T1},
        {"flavor": "h100", "gpu_quota": 6.0, "updated_ts": T3},
    ]


def test_a_pod_deleted_before_it_finished_is_cancelled_when_noticed(
    tmp_path, fake_kubernetes, first_run
):
    api = fake_kubernetes("t1")
    listed = api.list_pods
    api.list_pods = lambda namespace=None: [  # type: ignore[method-assign]
        p for p in listed(namespace) if p["metadata"]["name"] != "bob-0"
    ]

    result = collect_kubernetes(Lake.at(tmp_path), CLUSTER, api, now=T2)

    assert result.jobs_gone == 1
    [latest] = rows(
        tmp_path, "SELECT state, end_ts, updated_ts FROM jobs_latest WHERE job_id = 'team-b/bob-0'"
    )
    assert latest == {"state": "CANCELLED", "end_ts": T2, "updated_ts": T2}


def test_a_queue_that_disappears_lands_one_deleted_version(tmp_path, fake_kubernetes, first_run):
    api = fake_kubernetes("t1")
    listed = api.list_custom

    def without_cq_cpu(group, version, plural, namespace=None):
        found = listed(group, version, plural, namespace)
        return [q for q in found if q["metadata"]["name"] != "cq-cpu"] if found else found

    api.list_custom = without_cq_cpu  # type: ignore[method-assign]
    result = collect_kubernetes(Lake.at(tmp_path), CLUSTER, api, now=T2)
    again = collect_kubernetes(Lake.at(tmp_path), CLUSTER, api, now=T3)

    assert (result.queues_landed, result.queues_deleted) == (0, 1)
    assert (again.queues_landed, again.queues_deleted) == (0, 0)
    assert rows(
        tmp_path, "SELECT deleted, updated_ts FROM queues WHERE name = 'cq-cpu' ORDER BY updated_ts"
    ) == [
        {"deleted": False, "updated_ts": T1},
        {"deleted": True, "updated_ts": T2},
    ]


def test_namespaces_limit_what_is_listed_and_what_can_be_gone(tmp_path, fake_kubernetes, first_run):
    api = fake_kubernetes("t1")

    result = collect_kubernetes(
        Lake.at(tmp_path), CLUSTER, api, namespaces=["team-v", "team-b"], now=T2
    )

    # pods of team-a and team-c are not listed, but are not taken as gone either
    assert (result.gpu_pods, result.jobs_landed, result.queues_deleted) == (5, 0, 0)
    assert ("pods", "team-b") in api.calls and ("pods", "team-v") in api.calls
    assert ("pods", "") not in api.calls
    assert ("workloads", "kueue.x-k8s.io", "v1beta1", "team-b") in api.calls


def test_without_kueue_or_volcano_pods_still_land(tmp_path, fake_kubernetes):
    api = fake_kubernetes("t1", served=())

    result = collect_kubernetes(Lake.at(tmp_path), CLUSTER, api, now=T1)

    assert result.integrations == ()
    assert (result.jobs_new, result.queues_landed) == (10, 0)
    # a Kueue pod's partition falls back to its LocalQueue label; a Volcano pod keeps the queue
    # its annotation names, while one in a PodGroup that could not be read has none
    assert rows(
        tmp_path, "SELECT job_id, partition FROM jobs WHERE partition IS NOT NULL ORDER BY job_id"
    ) == [
        {"job_id": "team-c/gated-eval", "partition": "team-c-queue"},
        {"job_id": "team-v/sweep-lr-0", "partition": "vc-inference"},
    ]
    # v1beta1 not served: v1beta2 was asked for before giving up on Kueue
    assert ("clusterqueues", "kueue.x-k8s.io", "v1beta2", "") in api.calls


@pytest.mark.parametrize(
    ("failing", "error"),
    [("pods", UNAUTHORIZED), ("workloads", REFUSED), ("podgroups", REFUSED)],
)
def test_an_api_error_lands_nothing_and_keeps_the_state(tmp_path, fake_kubernetes, failing, error):
    collect_kubernetes(Lake.at(tmp_path), CLUSTER, fake_kubernetes("t1"), now=T1)
    state = (tmp_path / "_state" / "kubernetes.sqlite").read_bytes()
    files = lake_files(tmp_path)

    with pytest.raises(KubernetesApiError) as raised:
        collect_kubernetes(
            Lake.at(tmp_path), CLUSTER, fake_kubernetes("t3", fail={failing: error}), now=T3
        )

    assert str(raised.value) == str(error)
    assert lake_files(tmp_path) == files
    assert (tmp_path / "_state" / "kubernetes.sqlite").read_bytes() == state


def test_an_api_error_on_the_first_run_leaves_no_lake(tmp_path, fake_kubernetes):
    with pytest.raises(KubernetesApiError, match="answered 401"):
        collect_kubernetes(
            Lake.at(tmp_path), CLUSTER, fake_kubernetes(fail={"pods": UNAUTHORIZED}), now=T1
        )
    assert list(tmp_path.iterdir()) == []


def test_a_malformed_pod_is_skipped_and_counted(tmp_path, fake_kubernetes):
    api = fake_kubernetes("t1")
    listed = api.list_pods

    def with_a_bad_pod(namespace=None):
        pods = listed(namespace)
        pods[0]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "eight"
        return pods

    api.list_pods = with_a_bad_pod  # type: ignore[method-assign]
    result = collect_kubernetes(Lake.at(tmp_path), CLUSTER, api, now=T1)

    assert result.gpu_pods == 9
    assert result.malformed == (
        "pod team-a/llm-sft-workers-0-0-8xk2p: invalid quantity 'eight': expected e.g. '8', "
        "'500m' or '64Gi'",
    )


@pytest.mark.parametrize("asked", ["1e12", "1e20", "2147483648", "2e9 + 2e9"])
def test_a_pod_asking_for_more_gpus_than_any_count_is_skipped_and_counted(
    tmp_path, fake_kubernetes, asked
):
    # the API server takes any whole number for an extended resource: one pending pod asking
    # for 1e12 GPUs stopped every collect of its cluster with a 47-line traceback
    api = fake_kubernetes("t1")
    listed = api.list_pods

    def with_a_greedy_pod(namespace=None):
        pods = listed(namespace)
        requests = pods[0]["spec"]["containers"][0]["resources"]["requests"]
        # (two GPU resources, each a count, their sum none: review)
        gpu, mig = (asked.split(" + ") + [None])[:2]
        requests["nvidia.com/gpu"] = gpu
        if mig is not None:
            requests["nvidia.com/mig-1g.10gb"] = mig
        return pods

    api.list_pods = with_a_greedy_pod  # type: ignore[method-assign]
    result = collect_kubernetes(Lake.at(tmp_path), CLUSTER, api, now=T1)

    assert result.gpu_pods == 9
    [said] = result.malformed
    assert said.startswith("pod team-a/llm-sft-workers-0-0-8xk2p: nvidia.com/gpu")
    assert "is no count of GPUs" in said


def test_a_pod_malformed_once_is_skipped_not_ended(tmp_path, fake_kubernetes, first_run):
    # skipped as malformed, the pod was taken for deleted: a CANCELLED version ended it, and
    # its whole-node job_gpus row was closed for good while it ran on
    api = fake_kubernetes("t1")
    listed = api.list_pods

    def odd_once(namespace=None):
        pods = listed(namespace)
        pods[0]["metadata"]["ownerReferences"] = ["Job/train"]  # another shape than the API's
        return pods

    api.list_pods = odd_once  # type: ignore[method-assign]
    result = collect_kubernetes(Lake.at(tmp_path), CLUSTER, api, now=T2)

    assert result.malformed == (
        "pod team-a/llm-sft-workers-0-0-8xk2p: not the shape the API gives (AttributeError: "
        "'str' object has no attribute 'get')",
    )
    assert (result.jobs_landed, result.jobs_gone, result.gpu_rows_closed) == (0, 0, 0)
    back = collect_kubernetes(Lake.at(tmp_path), CLUSTER, fake_kubernetes("t1"), now=T3)
    assert (back.jobs_landed, back.gpu_rows_opened, back.gpu_rows_closed) == (0, 0, 0)
    assert rows(tmp_path, "SELECT job_id, end_ts FROM job_gpus") == [
        {"job_id": "team-a/llm-sft-workers-0-0-8xk2p", "end_ts": None}
    ]


def test_a_parser_failing_on_every_pod_is_an_error_not_a_quiet_skip(
    tmp_path, fake_kubernetes, first_run, monkeypatch
):
    # an error of ours raised on every pod (a bug, not the API's shape) landed nothing, ended
    # nothing, and said only "skipped"
    import collector.sources.kubernetes.collect as collect

    def broken(pod, *args):
        raise KeyError("spec")

    monkeypatch.setattr(collect, "parse_pod", broken)
    with pytest.raises(collect.MalformedSample, match=r"none of the 12 pods parsed \(first: pod "):
        collect_kubernetes(Lake.at(tmp_path), CLUSTER, fake_kubernetes("t1"), now=T2)
    assert rows(tmp_path, "SELECT count(*) AS n FROM jobs") == [{"n": 10}]  # nothing ended


@pytest.mark.parametrize(
    "edit",
    [
        lambda q: q["spec"].update(resourceGroups=["x"]),  # a list item of another shape
        lambda q: q["spec"].update(fairSharing="x"),
    ],
)
def test_a_queue_of_another_shape_is_skipped_and_the_pods_land(tmp_path, fake_kubernetes, edit):
    api = fake_kubernetes("t1")
    listed = api.list_custom

    def odd_queue(group, version, plural, namespace=None):
        found = listed(group, version, plural, namespace)
        if plural == "clusterqueues" and found:
            edit(found[0])
        return found

    api.list_custom = odd_queue  # type: ignore[method-assign]
    result = collect_kubernetes(Lake.at(tmp_path), CLUSTER, api, now=T1)

    assert result.gpu_pods == 10
    assert len(result.malformed) == 1
    assert result.malformed[0].startswith("clusterqueue ")
    assert "not the shape the API gives" in result.malformed[0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cluster": " "}, "cluster must not be empty"),
        ({"now": dt.datetime(2026, 11, 30, 12)}, "now must be timezone-aware"),
        ({"namespaces": ["team-a", ""]}, "namespaces must not be empty"),
    ],
)
def test_bad_arguments_are_config_errors(tmp_path, fake_kubernetes, kwargs, message):
    args = {"cluster": CLUSTER, "now": T1, **kwargs}
    with pytest.raises(ConfigError, match=message):
        collect_kubernetes(Lake.at(tmp_path), args.pop("cluster"), fake_kubernetes(), **args)


def test_forged_owners_are_dropped_counted_and_the_pod_still_lands(
    tmp_path, fake_kubernetes, caplog
):
    class Forged(fake_kubernetes):  # type: ignore[misc,valid-type]
        def _items(self, name, namespace):
            items = super()._items(name, namespace)
            if name == "pods.json":
                for pod in items:
                    if pod["metadata"]["name"] == "finetune-7tq4m":
                        annotations = pod["metadata"].setdefault("annotations", {})
                        annotations["gpuledger.io/user"] = "eve@evil.example.com, carol"
            return items

    result = collect_kubernetes(Lake.at(tmp_path), CLUSTER, Forged("t1"), now=T1)
    assert result.owners_rejected == 1
    assert "1 pod(s) name a user or account that is not one plain name" in caplog.text
    with connect(tmp_path) as con:
        rows = con.sql(
            "SELECT user, account FROM jobs WHERE job_id = 'team-a/finetune-7tq4m'"
        ).fetchall()
        users = {u for (u,) in con.sql("SELECT DISTINCT user FROM jobs").fetchall()}
    assert rows == [(None, "nlp")]
    assert not any(u and "evil" in u for u in users)


class _Killed(BaseException):
    """The collector killed (SIGKILL) at a chosen step."""


def test_a_run_killed_after_landing_before_its_state_committed_leaves_no_open_copy(
    tmp_path, fake_kubernetes, monkeypatch
):
    # The killed run's whole-node row landed in the run's own batch; the next run, its state
    # rolled back, landed it again in a batch of its own and later closed only that copy: the
    # pod held its node to the end of the data. Each row's batch is named by the row now.
    from collector.sources.kubernetes.state import KubernetesState

    runs = [("t1", T1 + dt.timedelta(minutes=5)), ("t2", T2), ("t3", T3)]
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    for snapshot, now in [("t1", T1), *runs]:
        collect_kubernetes(Lake.at(clean), CLUSTER, fake_kubernetes(snapshot), now=now)

    checkpoint = KubernetesState.set_checkpoint

    def kill(*args, **kwargs):
        raise _Killed

    monkeypatch.setattr(KubernetesState, "set_checkpoint", kill)
    with pytest.raises(_Killed):
        collect_kubernetes(Lake.at(killed), CLUSTER, fake_kubernetes("t1"), now=T1)
    monkeypatch.setattr(KubernetesState, "set_checkpoint", checkpoint)
    assert rows(killed, "SELECT count(*) AS n FROM job_gpus") == [{"n": 1}]  # it had landed
    for snapshot, now in runs:
        collect_kubernetes(Lake.at(killed), CLUSTER, fake_kubernetes(snapshot), now=now)

    query = "SELECT job_id, node, start_ts, end_ts FROM job_gpus ORDER BY ALL"
    assert rows(killed, query) == rows(clean, query)
    assert all(row["end_ts"] is not None for row in rows(killed, query))


@pytest.mark.parametrize(
    "step", ["before its state committed", "before its jobs landed", "after its jobs landed"]
)
def test_a_run_killed_after_its_state_committed_still_lands_each_pod_once(
    tmp_path, fake_kubernetes, monkeypatch, step
):
    # The probe killed a run after its jobs batch landed and before its state committed: the
    # state never heard of the new pod, and once the pod was deleted no run ended it (RUNNING
    # for good). The rows are staged with the state now and land after it commits; a run
    # killed before they land, or before it drops them, has them landed by the next run under
    # their own batch id.
    from collector.sources.kubernetes import collect as module
    from collector.sources.kubernetes.state import KubernetesState

    class Deleted(fake_kubernetes):  # type: ignore[misc,valid-type]
        """The snapshot with team-b/bob-0 (running at t1) deleted."""

        def _items(self, name, namespace):
            items = super()._items(name, namespace)
            if name == "pods.json":
                return [p for p in items if p["metadata"]["name"] != "bob-0"]
            return items

    runs = [("t2", T2), ("t3", T3)]
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    collect_kubernetes(Lake.at(clean), CLUSTER, fake_kubernetes("t1"), now=T1)
    for snapshot, now in runs:
        collect_kubernetes(Lake.at(clean), CLUSTER, Deleted(snapshot), now=now)

    land, drop = module.write_batch, KubernetesState.drop_staged

    def killed_landing(root, table, *args, **kwargs):
        if table == "jobs":
            raise _Killed
        return land(root, table, *args, **kwargs)

    def killed_dropping(*args, **kwargs):
        raise _Killed

    checkpoint = KubernetesState.set_checkpoint
    if step == "before its state committed":
        monkeypatch.setattr(KubernetesState, "set_checkpoint", killed_dropping)
    elif step == "before its jobs landed":
        monkeypatch.setattr(module, "write_batch", killed_landing)
    else:
        monkeypatch.setattr(KubernetesState, "drop_staged", killed_dropping)
    with pytest.raises(_Killed):
        collect_kubernetes(Lake.at(killed), CLUSTER, fake_kubernetes("t1"), now=T1)
    monkeypatch.setattr(module, "write_batch", land)
    monkeypatch.setattr(KubernetesState, "drop_staged", drop)
    monkeypatch.setattr(KubernetesState, "set_checkpoint", checkpoint)
    for snapshot, now in runs:
        collect_kubernetes(Lake.at(killed), CLUSTER, Deleted(snapshot), now=now)

    query = "SELECT job_id, state, start_ts, end_ts FROM jobs_latest ORDER BY ALL"
    running = "SELECT job_id FROM jobs_latest WHERE job_id = 'team-b/bob-0' AND end_ts IS NULL"
    assert rows(killed, running) == []
    if step == "before its state committed":
        # the run landed nothing: the pods it alone saw are not in the lake (as if it never
        # ran), and none is left running that the clean lake ended
        assert {tuple(r.values()) for r in rows(killed, query)} <= {
            tuple(r.values()) for r in rows(clean, query)
        }
    else:
        assert rows(killed, query) == rows(clean, query)
    versions = "SELECT job_id, updated_ts, count(*) AS n FROM jobs GROUP BY ALL HAVING n > 1"
    assert rows(killed, versions) == []  # no version landed twice
