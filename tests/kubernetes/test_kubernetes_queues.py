"""Kueue and Volcano objects → `queues` rows and Workload/PodGroup records (recorded in `t1`)."""

from __future__ import annotations

import pytest

from collector.errors import MalformedSample
from collector.sources.kubernetes.queues import (
    PodGroup,
    QueueRow,
    kueue_cluster_queue_rows,
    kueue_local_queue_rows,
    parse_pod_group,
    parse_workload,
    volcano_queue_rows,
)

from .conftest import read_list


def items(name, snapshot="t1"):
    return read_list(snapshot, name)["items"]


def by_name(name, snapshot="t1"):
    return {o["metadata"]["name"]: o for o in items(name, snapshot)}


# What every recorded ClusterQueue says of its queueing and preemption (Kueue's defaults filled
# in by the API server, or set so).
POLICY = {
    "queueing_strategy": "BestEffortFIFO",
    "preemption_within_cluster_queue": "LowerPriority",
    "preemption_reclaim_within_cohort": "Any",
}


def test_a_clusterqueue_has_one_row_per_flavor_and_gpu_resource():
    queues = by_name("kueue.x-k8s.io/clusterqueues.json")

    assert kueue_cluster_queue_rows(queues["cq-research"]) == [
        QueueRow(
            kind="kueue-clusterqueue",
            name="cq-research",
            parent="org",
            flavor="h100",
            resource="nvidia.com/gpu",
            gpu_quota=12.0,
            gpu_borrowing_limit=4.0,
            gpu_lending_limit=4.0,
            weight=2.0,
            **POLICY,
        )
    ]
    assert kueue_cluster_queue_rows(queues["cq-eval"]) == [
        QueueRow(
            "kueue-clusterqueue",
            "cq-eval",
            parent="org",
            flavor="h100",
            resource="nvidia.com/gpu",
            gpu_quota=4.0,
            **POLICY,
        ),
        QueueRow(
            "kueue-clusterqueue",
            "cq-eval",
            parent="org",
            flavor="a100",
            resource="nvidia.com/gpu",
            gpu_quota=8.0,
            **POLICY,
        ),
    ]
    assert kueue_cluster_queue_rows(queues["cq-inference"]) == [
        QueueRow(
            "kueue-clusterqueue",
            "cq-inference",
            flavor="a100-mig",
            resource="nvidia.com/mig-1g.10gb",
            gpu_quota=7.0,
            **POLICY,
        ),
        QueueRow(
            "kueue-clusterqueue",
            "cq-inference",
            flavor="a100-mig",
            resource="nvidia.com/mig-2g.20gb",
            gpu_quota=6.0,
            **POLICY,
        ),
    ]
    # No GPU quota at all: one row, so the queue (and its LocalQueues' parent) is still known.
    assert kueue_cluster_queue_rows(queues["cq-cpu"]) == [
        QueueRow("kueue-clusterqueue", "cq-cpu", **POLICY)
    ]


def test_a_clusterqueue_keeps_its_queueing_strategy_and_preemption():
    queue = by_name("kueue.x-k8s.io/clusterqueues.json")["cq-cpu"]
    spec = {
        **queue["spec"],
        "queueingStrategy": "StrictFIFO",
        "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "LowerPriority"},
    }
    [row] = kueue_cluster_queue_rows({**queue, "spec": spec})
    assert (
        row.queueing_strategy,
        row.preemption_within_cluster_queue,
        row.preemption_reclaim_within_cohort,
    ) == ("StrictFIFO", "Never", "LowerPriority")
    bare = {
        **queue,
        "spec": {k: v for k, v in spec.items() if k not in ("preemption", "queueingStrategy")},
    }
    [row] = kueue_cluster_queue_rows(bare)
    assert row.queueing_strategy is None and row.preemption_reclaim_within_cohort is None


def test_v1beta2_clusterqueues_name_their_cohort_cohortname():
    queue = by_name("kueue.x-k8s.io/clusterqueues.json")["cq-eval"]
    spec = dict(queue["spec"])
    spec["cohortName"] = spec.pop("cohort")
    assert {r.parent for r in kueue_cluster_queue_rows({**queue, "spec": spec})} == {"org"}


def test_a_localqueue_points_at_its_clusterqueue():
    queue = by_name("kueue.x-k8s.io/localqueues.json")["team-c-queue"]
    assert kueue_local_queue_rows(queue) == [
        QueueRow("kueue-localqueue", "team-c-queue", namespace="team-c", parent="cq-eval")
    ]


def test_volcano_queues_have_weight_capability_guarantee_and_deserved():
    queues = by_name("scheduling.volcano.sh/queues.json")

    assert volcano_queue_rows(queues["vc-research"]) == [
        QueueRow(
            "volcano-queue",
            "vc-research",
            resource="nvidia.com/gpu",
            gpu_guarantee=4.0,
            gpu_limit=16.0,
            weight=4.0,
        )
    ]
    assert volcano_queue_rows(queues["vc-inference"]) == [
        QueueRow(
            "volcano-queue",
            "vc-inference",
            resource="nvidia.com/gpu",
            gpu_quota=2.0,
            gpu_limit=4.0,
            weight=1.0,
        )
    ]
    assert volcano_queue_rows(queues["default"]) == [
        QueueRow("volcano-queue", "default", weight=1.0)
    ]


def test_an_admitted_workload():
    workload = parse_workload(by_name("kueue.x-k8s.io/workloads.json")["jobset-llm-sft-4b1c7"])

    assert (workload.namespace, workload.local_queue, workload.cluster_queue) == (
        "team-a",
        "team-a-queue",
        "cq-research",
    )
    assert workload.gpu_flavors == {"workers": "h100"}
    assert workload.owners == frozenset({("JobSet", "llm-sft")})
    assert workload.owner_uids == frozenset({"e1f2a3b4-c5d6-47e8-9f01-a2b3c4d5e6f7"})
    assert (workload.requeues, workload.preempted_ms) == (0, None)


def test_a_pending_workload_has_no_clusterqueue_yet():
    workload = parse_workload(by_name("kueue.x-k8s.io/workloads.json")["pod-gated-eval-6f0b2"])
    assert (workload.local_queue, workload.cluster_queue, workload.gpu_flavors) == (
        "team-c-queue",
        None,
        {},
    )


def test_a_preempted_workload_says_when_and_counts_its_requeue():
    workload = parse_workload(
        by_name("kueue.x-k8s.io/workloads.json", "t3")["jobset-llm-sft-4b1c7"]
    )
    assert workload.cluster_queue is None  # its admission was taken back
    assert workload.requeues == 1
    assert workload.preempted_ms == 1_796_040_859_000  # 2026-11-30T12:14:19Z


def test_pod_groups_name_their_queue():
    groups = [parse_pod_group(g) for g in items("scheduling.volcano.sh/podgroups.json")]
    assert groups[0] == PodGroup(
        "team-v", "bert-pretrain", "vc-research", "high-priority", 2, "Running"
    )
    assert (groups[1].queue, groups[1].phase) == ("vc-inference", "Inqueue")


def test_a_queue_with_a_bad_quantity_is_malformed():
    queue = by_name("kueue.x-k8s.io/clusterqueues.json")["cq-research"]
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = "twelve"
    with pytest.raises(MalformedSample, match="invalid quantity 'twelve'"):
        kueue_cluster_queue_rows(queue)
    with pytest.raises(MalformedSample, match="without metadata.name"):
        volcano_queue_rows({"spec": {}})
