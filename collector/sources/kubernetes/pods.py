"""Turn GPU pods into `jobs` rows (DESIGN §3.2): one job per pod, keyed `<namespace>/<pod>`.

Pure: API dicts in, records out. Which pods: those whose effective request (see
`kubernetes.resources`) names a GPU resource; every other pod is ignored. The columns:

* job_id `<namespace>/<pod>`, as the dcgm-exporter collector attributes samples by pod labels;
  job_id_raw the pod's UID (a pod re-created under the same name is a new version of the job).
* user / account: the first configured label, then annotation, that is set (default
  `gpuledger.io/user`, `gpuledger.io/account`); else the pod's service account as Kubernetes
  names it (`system:serviceaccount:<ns>:<sa>`) and the namespace. Whoever creates the pod writes
  its labels and annotations, so (a) a namespace with a configured account
  (`AttributionKeys.namespace_accounts`) gets that account whatever the pod says, and (b) a
  value that is not one sane name (`collector.names`: no spaces, commas, newlines, `@`) is
  dropped — the pod lands with a null user (or its namespace as account) and `rejected` names
  what was dropped, for the collector to count.
* partition: the Kueue ClusterQueue (the admission's, else the LocalQueue's, else the LocalQueue
  name when LocalQueues are not readable), else the Volcano queue (PodGroup, pod annotation,
  `default` for a Volcano pod that names neither). Both are cluster-scoped quota holders, like a
  Slurm partition; the LocalQueue → ClusterQueue mapping is in the `queues` table.
* qos: the priority class (Kueue Workload's, else Volcano PodGroup's, else the pod's).
* job_name `<Kind>/<name>` of the workload that owns the pod: a JobSet or a KubeRay RayJob named
  by the pod's labels, else its controller (a ReplicaSet as the Deployment it belongs to), else
  `Pod/<name>` for a bare pod.
* state from the phase: Pending → PENDING, Running → RUNNING, Succeeded → COMPLETED, Failed →
  FAILED, refined: OOMKilled → OUT_OF_MEMORY, `DeadlineExceeded` → TIMEOUT, evicted or
  preempted (reason `Evicted`, a `DisruptionTarget` condition) → PREEMPTED, deleted because its
  node went away (`DeletionByPodGC`, `DeletionByTaintManager`) → NODE_FAIL.
* submit_ts: the pod's creation, or its Kueue Workload's when earlier (a Kueue job's pods are
  created only once it is admitted: the Workload's creation is when it was submitted).
* start_ts: `status.startTime` (the kubelet accepted the pod and holds its resources), else
  the first container start; end_ts: the latest container `finishedAt` of a finished pod.
* exit_code as sacct writes it: `N:0` for exit status N, `0:S` for a kill by signal S (status
  128+S), from the first app container that failed (else an init container that failed).
* gpus (allocated, once bound to a node) and gpus_requested: GPU devices (whole GPUs, MIG
  instances or shared replicas); gpu_type: the node's `nvidia.com/gpu.product` (GPU Feature
  Discovery), `<product>-MIG-<profile>` for MIG instances (GFD's own naming), else the Kueue
  flavor assigned to the GPUs; cpus (rounded up) and mem_req_mib from the effective requests.
* time_limit_s: the pod's `activeDeadlineSeconds` or the Workload's
  `maximumExecutionTimeSeconds`, whichever is shorter; interactive: a Kubeflow notebook or a
  JupyterHub single-user server; requeues: container restarts (the most of any container)
  plus the Workload's requeue count.

GPU indices are not in the API (the device plugin picks them), so `job_gpus` gets rows only for
pods that hold every GPU device of their node (`exclusive_node`, mapping `whole-node`); the
others are attributed from dcgm-exporter's pod labels or the NVML agent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from typing import Any

import pyarrow as pa

from collector.errors import MalformedSample
from collector.names import valid_name
from collector.sources.kubernetes.queues import PodGroup, Workload
from collector.sources.kubernetes.resources import (
    effective_requests,
    gpu_resources,
    mig_profile,
    parse_quantity,
    parse_time_ms,
)
from warehouse.arrow_arrays import TIMESTAMP
from warehouse.schema import RAW_TABLES

__all__ = [
    "AttributionKeys",
    "NodeInfo",
    "PodJob",
    "Scheduling",
    "jobs_table",
    "parse_node",
    "parse_pod",
]

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PODSET_LABEL = "kueue.x-k8s.io/podset"
VOLCANO_QUEUE_KEYS = ("scheduling.volcano.sh/queue-name", "volcano.sh/queue-name")
VOLCANO_GROUP_KEYS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
VOLCANO_SCHEDULER = "volcano"
VOLCANO_DEFAULT_QUEUE = "default"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
_MIB = Decimal(2) ** 20
# DisruptionTarget reasons (Kubernetes ≥ 1.26) → the state of a pod that ends with it.
_DISRUPTION_STATES = {
    "PreemptionByScheduler": "PREEMPTED",
    "PreemptionByKubeScheduler": "PREEMPTED",  # 1.25–1.26 spelling
    "TerminationByKubelet": "PREEMPTED",  # node-pressure eviction, graceful node shutdown
    "EvictionByEvictionAPI": "PREEMPTED",  # drain
    "DeletionByPodGC": "NODE_FAIL",  # its node no longer exists
    "DeletionByTaintManager": "NODE_FAIL",  # NoExecute taint, e.g. node unreachable
}
_PHASE_STATES = {"Pending": "PENDING", "Running": "RUNNING", "Succeeded": "COMPLETED"}
_SIGNAL_BASE = 128
_MAX_SIGNAL = 64


@dataclass(frozen=True, slots=True)
class AttributionKeys:
    """Label/annotation names that say who a pod is for (first one set wins, labels first)."""

    user: tuple[str, ...] = ("gpuledger.io/user",)
    account: tuple[str, ...] = ("gpuledger.io/account",)
    # namespace -> account, from the configuration: wins over any label or annotation
    namespace_accounts: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What the collector uses of a node: its GPU model and GPU devices."""

    name: str
    gpu_product: str | None
    gpu_capacity: Mapping[str, int]  # GPU resource -> devices
    shared: bool  # GPUs time-sliced or MPS-shared: a device count is not a GPU count


@dataclass(frozen=True, slots=True)
class Scheduling:
    """The queueing objects a pod may belong to, indexed for lookup by `parse_pod`."""

    workloads: Sequence[Workload] = ()
    local_queues: Mapping[tuple[str, str], str] = field(default_factory=dict)  # (ns, lq) -> cq
    local_queues_known: bool = False
    pod_groups: Mapping[tuple[str, str], PodGroup] = field(default_factory=dict)
    _by_uid: dict[str, Workload] = field(default_factory=dict, init=False, repr=False)
    _by_owner: dict[tuple[str, str, str], Workload] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        for workload in self.workloads:
            for uid in workload.owner_uids:
                self._by_uid[uid] = workload
            for kind, name in workload.owners:
                self._by_owner[(workload.namespace, kind, name)] = workload

    def workload_of(
        self, namespace: str, uids: Sequence[str], owner: tuple[str, str] | None
    ) -> Workload | None:
        """The Workload owned by the pod itself, one of its owners, or its top-level owner."""
        for uid in uids:
            if uid in self._by_uid:
                return self._by_uid[uid]
        if owner is not None:
            return self._by_owner.get((namespace, *owner))
        return None


@dataclass(frozen=True, slots=True)
class PodJob:
    """One pod as a `jobs` row, plus what the collector needs beside it."""

    job_id: str
    job_id_raw: str | None
    user: str | None
    account: str | None
    partition: str | None
    qos: str | None
    job_name: str | None
    state: str
    exit_code: str | None
    submit_ts: int | None
    start_ts: int | None
    end_ts: int | None
    time_limit_s: int | None
    gpus: int | None
    gpus_requested: int
    gpu_type: str | None
    nodes: tuple[str, ...] | None
    cpus: int | None
    mem_req_mib: int | None
    interactive: bool
    requeues: int
    # Not landed:
    namespace: str = ""
    finished: bool = False
    exclusive_node: str | None = None  # the node whose every GPU this pod holds
    gone_state: str = "CANCELLED"  # the state to land if the pod disappears unfinished
    preempted_ms: int | None = None  # its Workload was preempted then (Kueue)
    workload: str | None = None  # `<namespace>/<name>` of its Kueue Workload
    rejected: tuple[str, ...] = ()  # "user"/"account": a label or annotation value dropped

    def landed(self) -> dict[str, Any]:
        """The columns landed in `jobs` (less cluster, source and updated_ts)."""
        return {name: getattr(self, name) for name in _JOB_COLUMNS}


# The `jobs` columns a pod gives (the API knows no CPU time or peak memory of a pod).
_JOB_COLUMNS = tuple(
    f.name
    for f in RAW_TABLES["jobs"].schema
    if f.name not in ("cluster", "source", "updated_ts", "cpu_time_s", "max_rss_mib")
)


def _mapping(value: object, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MalformedSample(f"{what} is not an object: {str(value)[:80]!r}")
    return value


def _first_key(meta: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    labels = _mapping(meta.get("labels"), "metadata.labels")
    annotations = _mapping(meta.get("annotations"), "metadata.annotations")
    for source in (labels, annotations):
        for key in keys:
            value = source.get(key)
            if value:
                return str(value)
    return None


def parse_node(obj: Mapping[str, Any]) -> NodeInfo:
    """The GPU model (GPU Feature Discovery label) and GPU devices of one node."""
    meta = _mapping(obj.get("metadata"), "node metadata")
    labels = _mapping(meta.get("labels"), "node labels")
    status = _mapping(obj.get("status"), "node status")
    capacity = {
        str(k): parse_quantity(v)
        for k, v in _mapping(status.get("capacity"), "node capacity").items()
    }
    replicas = labels.get("nvidia.com/gpu.replicas")
    shared = labels.get("nvidia.com/gpu.sharing-strategy") in ("time-slicing", "mps") or (
        replicas is not None and str(replicas).isdigit() and int(replicas) > 1
    )
    return NodeInfo(
        name=str(meta.get("name", "")),
        gpu_product=str(labels[GPU_PRODUCT_LABEL]) if labels.get(GPU_PRODUCT_LABEL) else None,
        gpu_capacity=gpu_resources(capacity),
        shared=shared,
    )


def top_owner(meta: Mapping[str, Any], name: str) -> tuple[str, str] | None:
    """(kind, name) of the workload that owns the pod; None for a bare pod."""
    labels = _mapping(meta.get("labels"), "metadata.labels")
    if labels.get("jobset.sigs.k8s.io/jobset-name"):
        return ("JobSet", str(labels["jobset.sigs.k8s.io/jobset-name"]))
    ray_kind = labels.get("ray.io/originated-from-crd")
    ray_name = labels.get("ray.io/originated-from-cr-name")
    if ray_kind and ray_name:
        return (str(ray_kind), str(ray_name))
    owners = [o for o in meta.get("ownerReferences") or [] if isinstance(o, Mapping)]
    controller = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
    if controller is None:
        return None
    kind, owner = str(controller.get("kind", "")), str(controller.get("name", ""))
    template_hash = labels.get("pod-template-hash")
    if kind == "ReplicaSet" and template_hash and owner.endswith(f"-{template_hash}"):
        return ("Deployment", owner[: -len(str(template_hash)) - 1])
    return (kind, owner)


def _statuses(status: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    app = [s for s in status.get("containerStatuses") or [] if isinstance(s, Mapping)]
    init = [s for s in status.get("initContainerStatuses") or [] if isinstance(s, Mapping)]
    return app, init


def _terminated(container: Mapping[str, Any]) -> Mapping[str, Any] | None:
    state = _mapping(container.get("state"), "container state")
    value = state.get("terminated")
    return value if isinstance(value, Mapping) else None


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            if condition.get("status") == "True":
                return condition
    return None


def _state(status: Mapping[str, Any], app: Sequence[Mapping[str, Any]]) -> str:
    phase = str(status.get("phase") or "Pending")
    if phase in _PHASE_STATES:
        return _PHASE_STATES[phase]
    if phase != "Failed":
        return phase.upper()  # Unknown (node lost contact)
    disruption = _condition(status, "DisruptionTarget")
    if status.get("reason") == "Evicted":
        return "PREEMPTED"
    if disruption is not None and disruption.get("reason") in _DISRUPTION_STATES:
        return _DISRUPTION_STATES[str(disruption["reason"])]
    if status.get("reason") == "DeadlineExceeded":
        return "TIMEOUT"
    if any((_terminated(c) or {}).get("reason") == "OOMKilled" for c in app):
        return "OUT_OF_MEMORY"
    return "FAILED"


def _exit_code(
    app: Sequence[Mapping[str, Any]], init: Sequence[Mapping[str, Any]], failed: bool
) -> str | None:
    codes = [t.get("exitCode") for t in (_terminated(c) for c in app) if t is not None]
    init_codes = [t.get("exitCode") for t in (_terminated(c) for c in init) if t is not None]
    failing = [c for c in codes if isinstance(c, int) and c != 0]
    if not failing and failed:
        failing = [c for c in init_codes if isinstance(c, int) and c != 0]
    if failing:
        code = failing[0]
    elif codes:
        code = 0
    else:
        return None
    if _SIGNAL_BASE < code <= _SIGNAL_BASE + _MAX_SIGNAL:
        return f"0:{code - _SIGNAL_BASE}"
    return f"{code}:0"


def _times(
    status: Mapping[str, Any], containers: Sequence[Mapping[str, Any]], finished: bool
) -> tuple[int | None, int | None]:
    starts: list[int] = []
    ends: list[int] = []
    for container in containers:
        state = _mapping(container.get("state"), "container state")
        last = _mapping(container.get("lastState"), "container lastState")
        for value in (state.get("running"), state.get("terminated"), last.get("terminated")):
            if isinstance(value, Mapping):
                started = parse_time_ms(value.get("startedAt"), "startedAt")
                if started is not None:
                    starts.append(started)
        terminated = _terminated(container)
        if terminated is not None:
            ended = parse_time_ms(terminated.get("finishedAt"), "finishedAt")
            if ended is not None:
                ends.append(ended)
    start = parse_time_ms(status.get("startTime"), "status.startTime")
    if start is None and starts:
        start = min(starts)
    if not finished:
        return start, None
    if not ends:  # e.g. it failed before any container ran: when it stopped being ready
        ends = [
            t
            for t in (
                parse_time_ms(c.get("lastTransitionTime"), "lastTransitionTime")
                for c in status.get("conditions") or []
                if isinstance(c, Mapping)
            )
            if t is not None
        ]
    end = max(ends) if ends else None
    if start is not None and end is not None and end < start:
        end = start
    return start, end


def _gpu_type(gpus: Mapping[str, int], node: NodeInfo | None, flavor: str | None) -> str | None:
    product = node.gpu_product if node is not None else None
    names = []
    for resource in sorted(gpus):
        profile = mig_profile(resource)
        if profile is None:
            names.append(product or flavor)
        else:
            names.append(f"{product}-MIG-{profile}" if product else f"MIG-{profile}")
    known = sorted({n for n in names if n})
    return ",".join(known) if known else None


def _exclusive(gpus: Mapping[str, int], node: NodeInfo | None) -> bool:
    """Whether these requests hold every GPU device of `node` (and no GPU there is shared)."""
    if node is None or node.shared or not gpus:
        return False
    held = {r: n for r, n in node.gpu_capacity.items() if n > 0}
    return bool(held) and held == dict(gpus)


def _ceil(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def parse_pod(
    obj: Mapping[str, Any],
    nodes: Mapping[str, NodeInfo],
    scheduling: Scheduling,
    keys: AttributionKeys | None = None,
) -> PodJob | None:
    """The `jobs` row of one pod, or None when it requests no GPU.

    Raises MalformedSample when the pod lacks its name or namespace, or has a value that does
    not parse (a quantity, a time).
    """
    meta = _mapping(obj.get("metadata"), "pod metadata")
    spec = _mapping(obj.get("spec"), "pod spec")
    status = _mapping(obj.get("status"), "pod status")
    name, namespace = meta.get("name"), meta.get("namespace")
    if not name or not namespace:
        raise MalformedSample(f"pod without metadata.name/namespace: {str(meta)[:120]!r}")
    job_id = f"{namespace}/{name}"
    try:
        requests = effective_requests(spec)
        gpus = gpu_resources(requests)
    except MalformedSample as exc:
        raise MalformedSample(f"pod {job_id}: {exc}") from None
    if not gpus:
        return None
    keys = keys or AttributionKeys()
    try:
        return _pod_job(
            job_id, str(namespace), meta, spec, status, requests, gpus, nodes, scheduling, keys
        )
    except MalformedSample as exc:
        raise MalformedSample(f"pod {job_id}: {exc}") from None


def _pod_job(
    job_id: str,
    namespace: str,
    meta: Mapping[str, Any],
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    requests: Mapping[str, Decimal],
    gpus: Mapping[str, int],
    nodes: Mapping[str, NodeInfo],
    scheduling: Scheduling,
    keys: AttributionKeys,
) -> PodJob:
    name = str(meta["name"])
    labels = _mapping(meta.get("labels"), "metadata.labels")
    annotations = _mapping(meta.get("annotations"), "metadata.annotations")
    app, init = _statuses(status)
    phase = str(status.get("phase") or "Pending")
    finished = phase in ("Succeeded", "Failed")
    state = _state(status, app)
    start, end = _times(status, [*init, *app], finished)
    owner = top_owner(meta, name)
    uids = [str(meta["uid"])] if meta.get("uid") else []
    uids += [str(o["uid"]) for o in meta.get("ownerReferences") or [] if o.get("uid")]
    workload = scheduling.workload_of(namespace, uids, owner)
    group_name = next((str(annotations[k]) for k in VOLCANO_GROUP_KEYS if annotations.get(k)), None)
    group = scheduling.pod_groups.get((namespace, group_name)) if group_name else None

    # Partition: the Kueue ClusterQueue, else the Volcano queue.
    local_queue = (workload.local_queue if workload else None) or _text(
        labels.get(KUEUE_QUEUE_LABEL)
    )
    partition = workload.cluster_queue if workload else None
    if partition is None and local_queue is not None:
        partition = scheduling.local_queues.get((namespace, local_queue))
        if partition is None and not scheduling.local_queues_known:
            partition = local_queue
    if partition is None:
        partition = (group.queue if group else None) or _first_key(meta, VOLCANO_QUEUE_KEYS)
    if partition is None and group_name is None and spec.get("schedulerName") == VOLCANO_SCHEDULER:
        # No PodGroup named and no queue asked for: Volcano puts the pod in its default queue.
        # (A PodGroup that could not be read leaves the queue unknown.)
        partition = VOLCANO_DEFAULT_QUEUE

    qos = (
        (workload.priority_class if workload else None)
        or (group.priority_class if group else None)
        or _text(spec.get("priorityClassName"))
    )
    created = parse_time_ms(meta.get("creationTimestamp"), "creationTimestamp")
    submitted = [t for t in (created, workload.created_ms if workload else None) if t is not None]
    limits = [
        int(v)
        for v in (spec.get("activeDeadlineSeconds"), workload.max_exec_s if workload else None)
        if isinstance(v, int)
    ]
    node_name = _text(spec.get("nodeName"))
    node = nodes.get(node_name) if node_name else None
    podset = _text(labels.get(KUEUE_PODSET_LABEL))
    flavor = None
    if workload is not None and workload.gpu_flavors:
        flavors = workload.gpu_flavors
        flavor = flavors.get(podset or "") or next(iter(sorted(flavors.values())))
    restarts = [c.get("restartCount") or 0 for c in [*app, *init]]
    cpu = requests.get("cpu")
    memory = requests.get("memory")
    service_account = _text(spec.get("serviceAccountName") or spec.get("serviceAccount"))
    disruption = _condition(status, "DisruptionTarget")
    gone_state = "CANCELLED"
    if disruption is not None and disruption.get("reason") in _DISRUPTION_STATES:
        gone_state = _DISRUPTION_STATES[str(disruption["reason"])]
    gpu_count = sum(gpus.values())
    rejected: list[str] = []
    user = _first_key(meta, keys.user)
    if user is not None and not valid_name(user):
        user, service_account = None, None  # a forged claim: nobody, not the service account
        rejected.append("user")
    elif user is None and service_account is not None and not valid_name(service_account):
        service_account = None
    account = keys.namespace_accounts.get(namespace)
    if account is None:
        account = _first_key(meta, keys.account)
        if account is not None and not valid_name(account):
            account = None
            rejected.append("account")
    return PodJob(
        job_id=job_id,
        job_id_raw=_text(meta.get("uid")),
        user=user
        or (f"system:serviceaccount:{namespace}:{service_account}" if service_account else None),
        account=account or namespace,
        partition=partition,
        qos=qos,
        job_name=f"{owner[0]}/{owner[1]}" if owner else f"Pod/{name}",
        state=state,
        exit_code=_exit_code(app, init, phase == "Failed") if finished else None,
        submit_ts=min(submitted) if submitted else None,
        start_ts=start,
        end_ts=end,
        time_limit_s=min(limits) if limits else None,
        gpus=gpu_count if node_name else None,
        gpus_requested=gpu_count,
        gpu_type=_gpu_type(gpus, node, flavor),
        nodes=(node_name,) if node_name else None,
        cpus=_ceil(cpu) if cpu else None,
        mem_req_mib=_ceil(memory / _MIB) if memory else None,
        interactive=bool(labels.get("notebook-name"))
        or labels.get("component") == "singleuser-server",
        requeues=(max(int(r) for r in restarts) if restarts else 0)
        + (workload.requeues if workload else 0),
        namespace=namespace,
        finished=finished,
        exclusive_node=node_name if start is not None and _exclusive(gpus, node) else None,
        gone_state=gone_state,
        preempted_ms=workload.preempted_ms if workload else None,
        workload=f"{workload.namespace}/{workload.name}" if workload else None,
        rejected=tuple(rejected),
    )


def _text(value: object) -> str | None:
    return str(value) if value not in (None, "") else None


def jobs_table(
    cluster: str, jobs: Sequence[Mapping[str, Any]], updated_ts_ms: int, source: str = "kubernetes"
) -> pa.Table:
    """A `jobs` Arrow table (the contract's exact types) from landed columns of `PodJob`s."""
    schema = RAW_TABLES["jobs"].schema
    n = len(jobs)

    def ts(name: str) -> pa.Array:
        return pa.array([j.get(name) for j in jobs], pa.int64()).cast(TIMESTAMP)

    columns: dict[str, pa.Array] = {
        "cluster": pa.array([cluster] * n, pa.string()),
        "submit_ts": ts("submit_ts"),
        "start_ts": ts("start_ts"),
        "end_ts": ts("end_ts"),
        "nodes": pa.array(
            [None if j.get("nodes") is None else list(j["nodes"]) for j in jobs],
            pa.list_(pa.string()),
        ),
        "source": pa.array([source] * n, pa.string()),
        "updated_ts": pa.array([updated_ts_ms] * n, pa.int64()).cast(TIMESTAMP),
    }
    arrays = [
        columns[f.name] if f.name in columns else pa.array([j.get(f.name) for j in jobs], f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)
