"""Parse Kueue and Volcano objects: queue quotas (the `queues` table) and what pods are queued in.

Pure: API dicts in, records out.

* Kueue (`kueue.x-k8s.io`, v1beta1; v1beta2's `cohortName` is read too): a ClusterQueue holds
  the quota, per resource flavor, and may belong to a cohort whose members borrow each other's
  unused quota; a LocalQueue is a namespace's name for a ClusterQueue; a Workload is the unit
  of admission (one per Job, JobSet, PyTorchJob, RayJob or plain pod), owned by that object,
  and carries its admission (ClusterQueue, flavors), its requeue count and its eviction.
* Volcano (`scheduling.volcano.sh/v1beta1`): a Queue has a weight, a `capability` (hard cap),
  a `guarantee` (reserved) and, with the capacity plugin, a `deserved` share; a PodGroup gangs
  pods (named by the pod annotation `scheduling.k8s.io/group-name`) and names their queue.

Only GPU resources get quota rows: `gpu_quota` etc. are in units of the row's `resource`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from collector.errors import MalformedSample
from collector.sources.kubernetes.resources import is_gpu_resource, parse_quantity, parse_time_ms
from warehouse.arrow_arrays import TIMESTAMP
from warehouse.schema import RAW_TABLES

__all__ = [
    "KUEUE_GROUP",
    "KUEUE_VERSIONS",
    "KUEUE_CLUSTER_QUEUE",
    "KUEUE_LOCAL_QUEUE",
    "PodGroup",
    "QueueRow",
    "VOLCANO_GROUP",
    "VOLCANO_QUEUE",
    "VOLCANO_VERSION",
    "Workload",
    "kueue_cluster_queue_rows",
    "kueue_local_queue_rows",
    "parse_pod_group",
    "parse_workload",
    "queues_table",
    "volcano_queue_rows",
]

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta1", "v1beta2")  # the first one the server serves is used
VOLCANO_GROUP = "scheduling.volcano.sh"
VOLCANO_VERSION = "v1beta1"
KUEUE_CLUSTER_QUEUE = "kueue-clusterqueue"
KUEUE_LOCAL_QUEUE = "kueue-localqueue"
VOLCANO_QUEUE = "volcano-queue"
# Workload eviction reasons that mean "another workload took the quota".
_PREEMPTION_REASONS = frozenset({"Preempted", "InClusterQueue", "InCohortReclamation"})


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One `queues` row: a queue's quota of one GPU resource in one flavor (or no GPU quota)."""

    kind: str
    name: str
    namespace: str | None = None
    parent: str | None = None
    flavor: str | None = None
    resource: str | None = None
    gpu_quota: float | None = None
    gpu_borrowing_limit: float | None = None
    gpu_lending_limit: float | None = None
    gpu_guarantee: float | None = None
    gpu_limit: float | None = None
    weight: float | None = None
    deleted: bool = False
    queueing_strategy: str | None = None  # Kueue ClusterQueues: BestEffortFIFO, StrictFIFO
    preemption_within_cluster_queue: str | None = None
    preemption_reclaim_within_cohort: str | None = None

    @property
    def key(self) -> str:
        """The row's identity (the table key less the cluster), as one string."""
        parts = (self.kind, self.namespace, self.name, self.flavor, self.resource)
        return "\x1f".join("" if p is None else p for p in parts)


@dataclass(frozen=True, slots=True)
class Workload:
    """What the collector uses of one Kueue Workload."""

    namespace: str
    name: str
    local_queue: str | None
    cluster_queue: str | None  # set while admitted (or holding a quota reservation)
    created_ms: int | None
    priority_class: str | None
    max_exec_s: int | None
    requeues: int
    preempted_ms: int | None  # when it was evicted to make room for another workload
    gpu_flavors: Mapping[str, str]  # pod set name -> flavor assigned to its GPUs
    owner_uids: frozenset[str]
    owners: frozenset[tuple[str, str]]  # (kind, name)


@dataclass(frozen=True, slots=True)
class PodGroup:
    """What the collector uses of one Volcano PodGroup."""

    namespace: str
    name: str
    queue: str | None
    priority_class: str | None
    min_member: int | None
    phase: str | None


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise MalformedSample(f"object without metadata.name: {str(obj)[:120]!r}")
    return meta


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise MalformedSample(f"{_meta(obj)['name']!r}: spec is not an object")
    return spec


def _amount(value: object) -> float | None:
    return None if value is None else float(parse_quantity(value))


def _text(value: object) -> str | None:
    return str(value) if value not in (None, "") else None


def kueue_cluster_queue_rows(obj: Mapping[str, Any]) -> list[QueueRow]:
    """One row per (flavor, GPU resource) of a ClusterQueue's quota; one bare row if none."""
    name = str(_meta(obj)["name"])
    spec = _spec(obj)
    parent = _text(spec.get("cohort") or spec.get("cohortName"))
    weight = _amount((spec.get("fairSharing") or {}).get("weight"))
    preemption = spec.get("preemption") or {}
    bare = QueueRow(
        kind=KUEUE_CLUSTER_QUEUE,
        name=name,
        parent=parent,
        weight=weight,
        queueing_strategy=_text(spec.get("queueingStrategy")),
        preemption_within_cluster_queue=_text(preemption.get("withinClusterQueue")),
        preemption_reclaim_within_cohort=_text(preemption.get("reclaimWithinCohort")),
    )
    rows = []
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for quota in flavor.get("resources") or []:
                resource = str(quota.get("name", ""))
                if not is_gpu_resource(resource):
                    continue
                rows.append(
                    dataclasses.replace(
                        bare,
                        flavor=_text(flavor.get("name")),
                        resource=resource,
                        gpu_quota=_amount(quota.get("nominalQuota")),
                        gpu_borrowing_limit=_amount(quota.get("borrowingLimit")),
                        gpu_lending_limit=_amount(quota.get("lendingLimit")),
                    )
                )
    return rows or [bare]


def kueue_local_queue_rows(obj: Mapping[str, Any]) -> list[QueueRow]:
    """The one row of a LocalQueue: its namespace and the ClusterQueue it submits to."""
    meta = _meta(obj)
    spec = _spec(obj)
    return [
        QueueRow(
            kind=KUEUE_LOCAL_QUEUE,
            name=str(meta["name"]),
            namespace=_text(meta.get("namespace")),
            parent=_text(spec.get("clusterQueue")),
            weight=_amount((spec.get("fairSharing") or {}).get("weight")),
        )
    ]


def volcano_queue_rows(obj: Mapping[str, Any]) -> list[QueueRow]:
    """One row per GPU resource named in a Volcano Queue's capability/deserved/guarantee."""
    name = str(_meta(obj)["name"])
    spec = _spec(obj)
    capability = spec.get("capability") or {}
    deserved = spec.get("deserved") or {}
    guarantee = (spec.get("guarantee") or {}).get("resource") or {}
    weight = _amount(spec.get("weight"))
    parent = _text(spec.get("parent"))  # hierarchical queues (Volcano ≥ 1.10)
    resources = sorted(r for r in {*capability, *deserved, *guarantee} if is_gpu_resource(r))
    rows = [
        QueueRow(
            kind=VOLCANO_QUEUE,
            name=name,
            parent=parent,
            resource=resource,
            gpu_quota=_amount(deserved.get(resource)),
            gpu_guarantee=_amount(guarantee.get(resource)),
            gpu_limit=_amount(capability.get(resource)),
            weight=weight,
        )
        for resource in resources
    ]
    return rows or [QueueRow(kind=VOLCANO_QUEUE, name=name, parent=parent, weight=weight)]


def _true_condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition  # type: ignore[no-any-return]
    return None


def parse_workload(obj: Mapping[str, Any]) -> Workload:
    """The admission, requeues and eviction of one Kueue Workload."""
    meta = _meta(obj)
    spec = _spec(obj)
    status = obj.get("status") or {}
    admission = status.get("admission") or {}
    flavors: dict[str, str] = {}
    for assignment in admission.get("podSetAssignments") or []:
        for resource, flavor in sorted((assignment.get("flavors") or {}).items()):
            if is_gpu_resource(resource):
                flavors.setdefault(str(assignment.get("name") or "main"), str(flavor))
    preempted_ms = None
    evicted = _true_condition(status, "Evicted")
    preempted = _true_condition(status, "Preempted")
    if evicted is not None and evicted.get("reason") in _PREEMPTION_REASONS:
        preempted_ms = parse_time_ms(evicted.get("lastTransitionTime"), "lastTransitionTime")
    elif preempted is not None:
        preempted_ms = parse_time_ms(preempted.get("lastTransitionTime"), "lastTransitionTime")
    owners = [o for o in meta.get("ownerReferences") or [] if isinstance(o, Mapping)]
    max_exec = spec.get("maximumExecutionTimeSeconds")
    requeues = (status.get("requeueState") or {}).get("count") or 0
    return Workload(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta["name"]),
        local_queue=_text(spec.get("queueName")),
        cluster_queue=_text(admission.get("clusterQueue")),
        created_ms=parse_time_ms(meta.get("creationTimestamp"), "creationTimestamp"),
        priority_class=_text(spec.get("priorityClassName")),
        max_exec_s=int(max_exec) if isinstance(max_exec, int) else None,
        requeues=int(requeues),
        preempted_ms=preempted_ms,
        gpu_flavors=flavors,
        owner_uids=frozenset(str(o["uid"]) for o in owners if o.get("uid")),
        owners=frozenset((str(o.get("kind")), str(o.get("name"))) for o in owners),
    )


def parse_pod_group(obj: Mapping[str, Any]) -> PodGroup:
    """The queue and gang size of one Volcano PodGroup."""
    meta = _meta(obj)
    spec = _spec(obj)
    min_member = spec.get("minMember")
    return PodGroup(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta["name"]),
        queue=_text(spec.get("queue")),
        priority_class=_text(spec.get("priorityClassName")),
        min_member=int(min_member) if isinstance(min_member, int) else None,
        phase=_text((obj.get("status") or {}).get("phase")),
    )


def queues_table(cluster: str, rows: Iterable[QueueRow], updated_ts_ms: int) -> pa.Table:
    """A `queues` Arrow table (the contract's exact types) from parsed rows."""
    rows = list(rows)
    schema = RAW_TABLES["queues"].schema
    n = len(rows)
    columns: dict[str, pa.Array] = {
        "cluster": pa.array([cluster] * n, pa.string()),
        "updated_ts": pa.array([updated_ts_ms] * n, pa.int64()).cast(TIMESTAMP),
    }
    arrays = [
        columns[f.name]
        if f.name in columns
        else pa.array([getattr(row, f.name) for row in rows], f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)
