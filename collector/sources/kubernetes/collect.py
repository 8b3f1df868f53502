"""Collect GPU pods and queue quotas from Kubernetes into the lake (`gpuledger collect kubernetes`).

One run asks the API server a fixed number of list questions (each read in pages), never one
per pod: pods (across all namespaces, or per `--namespace`), nodes, and, where the cluster
serves them, Kueue's ClusterQueues, LocalQueues and Workloads and Volcano's Queues and
PodGroups. Every answer is read before anything is landed, so a run that fails on any call
(401, connection refused, RBAC) lands nothing and leaves the state as it was.

* `jobs`: one row per GPU pod (see `kubernetes.pods`), landed as a new version (updated_ts =
  the collection time) only when its content differs from the version landed before: a second
  identical collection lands nothing, a pod that changed phase lands once more and
  `jobs_latest` picks it. A pod that disappears before it finished (deleted, preempted by
  Kueue, garbage-collected) lands one last version: PREEMPTED, ending when its Workload was
  evicted, if Kueue preempted it; else NODE_FAIL or PREEMPTED if it was last seen with that
  `DisruptionTarget`; else CANCELLED, ending at the collection that noticed. (A pod that
  finished and was deleted between two collections is landed CANCELLED too: collect more
  often than finished pods are cleaned up, e.g. than Jobs' `ttlSecondsAfterFinished`.)
* `job_gpus`: only `whole-node` rows, for pods that hold every GPU device of their node; GPU
  indices are not in the API (the device plugin chooses them): dcgm-exporter's pod labels and
  the NVML agent map pods to GPUs. Rows are opened when the pod starts and closed (by
  re-landing their batch) when it ends or disappears.
* `queues` (an addition to DESIGN §3, see `warehouse.schema.QUEUES`): Kueue ClusterQueues and
  LocalQueues, Volcano Queues, one version per change, and a `deleted` version when a queue
  disappears while its API is still served (uninstalling Kueue deletes nothing).

With `namespaces`, pods, LocalQueues, Workloads and PodGroups are listed in those namespaces
only, and only pods and LocalQueues of those namespaces are ever taken as gone. Cluster-scoped
objects (nodes, ClusterQueues, Volcano Queues) are listed whole either way.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from collector.errors import ConfigError, MalformedSample
from collector.sources.kubernetes.api import KubernetesApi
from collector.sources.kubernetes.pods import (
    AttributionKeys,
    NodeInfo,
    PodJob,
    Scheduling,
    jobs_table,
    parse_node,
    parse_pod,
)
from collector.sources.kubernetes.queues import (
    KUEUE_CLUSTER_QUEUE,
    KUEUE_GROUP,
    KUEUE_LOCAL_QUEUE,
    KUEUE_VERSIONS,
    VOLCANO_GROUP,
    VOLCANO_QUEUE,
    VOLCANO_VERSION,
    PodGroup,
    QueueRow,
    Workload,
    kueue_cluster_queue_rows,
    kueue_local_queue_rows,
    parse_pod_group,
    parse_workload,
    queues_table,
    volcano_queue_rows,
)
from collector.sources.kubernetes.state import KubernetesState, WholeNodeRow, open_state
from warehouse.arrow_arrays import TIMESTAMP
from warehouse.lake import Lake
from warehouse.schema import RAW_TABLES
from warehouse.writer import write_batch

__all__ = ["KubernetesCollectResult", "collect_kubernetes"]

logger = logging.getLogger(__name__)

WHOLE_NODE = "whole-node"
Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class KubernetesCollectResult:
    """What one run saw and landed."""

    cluster: str
    batch_id: str
    collected_at: dt.datetime
    pods_seen: int
    gpu_pods: int
    jobs_new: int
    jobs_updated: int
    jobs_gone: int
    queues_landed: int
    queues_deleted: int
    gpu_rows_opened: int
    gpu_rows_closed: int
    integrations: tuple[str, ...]
    malformed: tuple[str, ...]
    owners_rejected: int = 0  # pods whose user/account label or annotation was not a sane name

    @property
    def jobs_landed(self) -> int:
        return self.jobs_new + self.jobs_updated + self.jobs_gone


@dataclass
class _Snapshot:
    """Everything one run read from the API server, parsed."""

    pods: list[PodJob] = field(default_factory=list)
    pods_seen: int = 0
    queues: list[QueueRow] = field(default_factory=list)
    workloads: dict[str, Workload] = field(default_factory=dict)  # "<ns>/<name>" -> workload
    kueue: str | None = None  # the Kueue version served, None when Kueue is absent
    volcano: bool = False
    malformed: list[str] = field(default_factory=list)
    # "<ns>/<pod>" of the pods skipped as malformed: still there, so not ended as gone
    unparsed: set[str] = field(default_factory=set)
    owners_rejected: list[str] = field(default_factory=list)  # "<job_id>: user, account"

    @property
    def integrations(self) -> tuple[str, ...]:
        names = [f"kueue {self.kueue}"] if self.kueue else []
        return (*names, *(["volcano"] if self.volcano else []))


def _in_scope(namespaces: Sequence[str]) -> Sequence[str | None]:
    return list(namespaces) if namespaces else [None]


# What parsing an object of another shape than the API's raises (a string where an object
# belongs, a list for a map, a word for a count): each is that object skipped, said and counted.
_SHAPE_ERRORS = (MalformedSample, AttributeError, TypeError, ValueError, KeyError, IndexError)


def _object_name(item: object) -> str:
    """`<namespace>/<name>` (or `<name>`) of an API object, or '' where it names none."""
    meta = item.get("metadata") if isinstance(item, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return ""
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if isinstance(namespace, str) else str(meta["name"])


def _malformed(item: object, exc: Exception, kind: str) -> str:
    """The line a skipped object gets: ours where the parser said why, else the shape error
    (its traceback in the debug log: a bug of ours would raise the same errors)."""
    if isinstance(exc, MalformedSample):
        return str(exc)
    name = _object_name(item) or "(unnamed)"
    logger.debug("%s %s: parsing failed", kind, name, exc_info=exc)
    return f"{kind} {name}: not the shape the API gives ({type(exc).__name__}: {exc})"


def _parsed(
    items: Iterable[Mapping[str, Any]], parse: Any, malformed: list[str], kind: str = "object"
) -> list[Any]:
    out = []
    for item in items:
        try:
            out.append(parse(item))
        except _SHAPE_ERRORS as exc:
            malformed.append(_malformed(item, exc, kind))
    return out


def _read(api: KubernetesApi, namespaces: Sequence[str], keys: AttributionKeys) -> _Snapshot:
    """Ask every question of the run, then parse the answers (malformed objects are skipped)."""
    scopes = _in_scope(namespaces)
    pods = [pod for ns in scopes for pod in api.list_pods(ns)]
    nodes = api.list_nodes()
    kueue_version = None
    cluster_queues: list[Object] = []
    local_queues: list[Object] = []
    workloads: list[Object] = []
    for version in KUEUE_VERSIONS:
        listed = api.list_custom(KUEUE_GROUP, version, "clusterqueues")
        if listed is None:
            continue
        kueue_version, cluster_queues = version, listed
        for ns in scopes:
            local_queues += api.list_custom(KUEUE_GROUP, version, "localqueues", ns) or []
            workloads += api.list_custom(KUEUE_GROUP, version, "workloads", ns) or []
        break
    volcano_queues = api.list_custom(VOLCANO_GROUP, VOLCANO_VERSION, "queues")
    pod_groups: list[Object] = []
    if volcano_queues is not None:
        for ns in scopes:
            pod_groups += api.list_custom(VOLCANO_GROUP, VOLCANO_VERSION, "podgroups", ns) or []

    snap = _Snapshot(pods_seen=len(pods), kueue=kueue_version, volcano=volcano_queues is not None)
    bad = snap.malformed
    node_info: dict[str, NodeInfo] = {n.name: n for n in _parsed(nodes, parse_node, bad, "node")}
    parsed_workloads: list[Workload] = _parsed(workloads, parse_workload, bad, "workload")
    snap.workloads = {f"{w.namespace}/{w.name}": w for w in parsed_workloads}
    lq_rows: list[QueueRow] = [
        r for rows in _parsed(local_queues, kueue_local_queue_rows, bad, "localqueue") for r in rows
    ]
    groups: list[PodGroup] = _parsed(pod_groups, parse_pod_group, bad, "podgroup")
    scheduling = Scheduling(
        workloads=parsed_workloads,
        local_queues={(r.namespace or "", r.name): r.parent or r.name for r in lq_rows},
        local_queues_known=kueue_version is not None,
        pod_groups={(g.namespace, g.name): g for g in groups},
    )
    unshaped = 0  # pods that failed with an error of ours, not the parser's own reason
    for pod in pods:
        try:
            job = parse_pod(pod, node_info, scheduling, keys)
        except _SHAPE_ERRORS as exc:
            unshaped += not isinstance(exc, MalformedSample)
            bad.append(_malformed(pod, exc, "pod"))
            # skipped, not gone: a pod that does not parse this once is not ended
            if "/" in _object_name(pod):
                snap.unparsed.add(_object_name(pod))
            continue
        if job is not None:
            snap.pods.append(job)
            if job.rejected:
                snap.owners_rejected.append(f"{job.job_id}: {', '.join(job.rejected)}")
    if len(pods) > 1 and unshaped == len(pods):
        # every pod of another shape is no API's: a parser of ours that fails on every pod
        # would otherwise land nothing, end nothing, and say only "skipped"
        raise MalformedSample(
            f"none of the {len(pods):,} pods parsed (first: {bad[0]}); run with a debug log "
            "for the traceback, and report it"
        )
    for rows in _parsed(cluster_queues, kueue_cluster_queue_rows, bad, "clusterqueue"):
        snap.queues += rows
    snap.queues += lq_rows
    for rows in _parsed(volcano_queues or [], volcano_queue_rows, bad, "queue"):
        snap.queues += rows
    return snap


def _digest(content: Mapping[str, Any]) -> str:
    payload = json.dumps(content, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def _stage_jobs(
    state: KubernetesState,
    snap: _Snapshot,
    namespaces: Sequence[str],
    batch: str,
    now: int,
) -> tuple[int, int, int, dict[str, int], pa.Table]:
    """The `jobs` rows of the pods whose row changed, and a last row of pods gone unfinished,
    remembered in `state` and staged there as `batch` (they land once it commits).

    Returns (new, updated, gone, end of each gone job by job id, the rows).
    """
    known = state.pods(p.job_id for p in snap.pods)
    rows: list[dict[str, Any]] = []
    new = updated = 0
    for job in snap.pods:
        row = job.landed()
        before = known.get(job.job_id)
        if before is not None and before.pod_uid == job.job_id_raw:
            # Keep what must not go backwards for one pod: requeues and the first submit time.
            row["requeues"] = max(row["requeues"], before.row.get("requeues") or 0)
            submits = [s for s in (row["submit_ts"], before.row.get("submit_ts")) if s is not None]
            row["submit_ts"] = min(submits) if submits else None
        digest = _digest(row)
        if before is not None and before.content_hash == digest:
            continue
        rows.append(row)
        new += before is None
        updated += before is not None
        state.save_pod(
            job.job_id,
            job.namespace,
            job.job_id_raw,
            digest,
            job.finished,
            job.gone_state,
            job.workload,
            row,
        )
    seen = {p.job_id for p in snap.pods} | snap.unparsed
    scope = set(namespaces)
    ended: dict[str, int] = {}
    for stored in state.unfinished_pods():
        if stored.job_id in seen or (scope and stored.namespace not in scope):
            continue
        row = dict(stored.row)
        start = row.get("start_ts")
        workload = snap.workloads.get(stored.workload or "")
        preempted = workload.preempted_ms if workload is not None else None
        if preempted is not None and (start is None or preempted >= start):
            row["state"], end = "PREEMPTED", preempted
        else:
            row["state"], end = stored.gone_state, now
        row["end_ts"] = end if start is not None else None
        ended[stored.job_id] = end
        rows.append(row)
        state.save_pod(
            stored.job_id,
            stored.namespace,
            stored.pod_uid,
            _digest(row),
            True,
            stored.gone_state,
            stored.workload,
            row,
        )
    table = jobs_table(state.cluster, rows, now)
    if table.num_rows:
        state.stage_jobs(batch, table)
    return new, updated, len(ended), ended, table


def _job_gpus_table(cluster: str, rows: Sequence[WholeNodeRow]) -> pa.Table:
    """A `job_gpus` Arrow table of whole-node rows (no GPU index or UUID known)."""
    schema = RAW_TABLES["job_gpus"].schema
    n = len(rows)
    columns = {
        "cluster": pa.array([cluster] * n, pa.string()),
        "job_id": pa.array([r.job_id for r in rows], pa.string()),
        "node": pa.array([r.node for r in rows], pa.string()),
        "start_ts": pa.array([r.start_ms for r in rows], pa.int64()).cast(TIMESTAMP),
        "end_ts": pa.array([r.end_ms for r in rows], pa.int64()).cast(TIMESTAMP),
        "mapping": pa.array([WHOLE_NODE] * n, pa.string()),
    }
    arrays = [columns.get(f.name, pa.nulls(n, f.type)) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _gpu_batch(cluster: str, row: WholeNodeRow) -> str:
    """The batch of one whole-node `job_gpus` row, named by its cluster, pod, node and start:
    a run killed after landing it, before its state committed, lands it again under the same
    name (replacing it) rather than as a second row that no later run closes."""
    key = f"{cluster}\n{row.job_id}\n{row.node}\n{row.start_ms}"
    return f"k8s-{cluster}-gpus-{row.start_ms}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def _land_gpus(
    root: Path, state: KubernetesState, snap: _Snapshot, ended: Mapping[str, int]
) -> tuple[int, int]:
    """Open rows of pods that hold a whole node, close rows of pods that ended; return counts."""
    touched: set[str] = set()
    opened = 0
    current = {p.job_id: p for p in snap.pods}
    for job in snap.pods:
        if job.exclusive_node is None or job.start_ts is None:
            continue
        row = WholeNodeRow(job.job_id, job.exclusive_node, job.start_ts, job.end_ts)
        if not state.has_gpu_row(row):
            batch = _gpu_batch(state.cluster, row)
            state.add_gpu_row(row, batch)
            touched.add(batch)
            opened += 1
    closed = 0
    for row, row_batch in state.open_gpu_rows():
        live = current.get(row.job_id)
        if live is not None and live.start_ts == row.start_ms:
            end = live.end_ts
        elif live is not None:
            end = live.start_ts  # re-created under the same name: the earlier pod ended by then
        else:
            end = ended.get(row.job_id)
        if end is not None:
            state.close_gpu_row(row, max(end, row.start_ms))
            touched.add(row_batch)
            closed += 1
    for landed in sorted(touched):
        write_batch(
            root,
            "job_gpus",
            _job_gpus_table(state.cluster, state.gpu_rows_of_batch(landed)),
            landed,
        )
    return opened, closed


def _land_queues(
    root: Path,
    state: KubernetesState,
    snap: _Snapshot,
    namespaces: Sequence[str],
    batch: str,
    now: int,
) -> tuple[int, int]:
    """Land queue rows that changed, and a `deleted` row for each that disappeared."""
    known = state.queue_hashes()
    changed: list[QueueRow] = []
    for row in snap.queues:
        content = _queue_content(row)
        digest = _digest(content)
        if known.get(row.key, ("", False))[0] == digest:
            continue
        changed.append(row)
        state.save_queue(row.key, row.kind, row.namespace, digest, content)
    listed_kinds = {KUEUE_LOCAL_QUEUE, KUEUE_CLUSTER_QUEUE} if snap.kueue else set()
    if snap.volcano:
        listed_kinds.add(VOLCANO_QUEUE)
    seen = {row.key for row in snap.queues}
    deleted = 0
    for content in state.live_queues():
        row = QueueRow(**content)
        if row.key in seen or row.kind not in listed_kinds:
            continue
        if row.kind == KUEUE_LOCAL_QUEUE and namespaces and row.namespace not in namespaces:
            continue
        gone = QueueRow(
            kind=row.kind,
            name=row.name,
            namespace=row.namespace,
            flavor=row.flavor,
            resource=row.resource,
            deleted=True,
        )
        changed.append(gone)
        state.save_queue(
            gone.key, gone.kind, gone.namespace, _digest(_queue_content(gone)), _queue_content(gone)
        )
        deleted += 1
    write_batch(root, "queues", queues_table(state.cluster, changed, now), batch)
    return len(changed) - deleted, deleted


def _queue_content(row: QueueRow) -> dict[str, Any]:
    return {name: getattr(row, name) for name in QueueRow.__dataclass_fields__}


def collect_kubernetes(
    lake: Lake,
    cluster: str,
    api: KubernetesApi,
    *,
    namespaces: Sequence[str] = (),
    keys: AttributionKeys | None = None,
    now: dt.datetime | None = None,
) -> KubernetesCollectResult:
    """Collect the GPU pods and queues of one Kubernetes cluster into `lake`.

    Args:
        root: the lake root; state lives in `<root>/_state/kubernetes.sqlite`.
        cluster: the name to land rows under.
        api: the API server (see `kubernetes.api.connect_kubernetes`; tests pass a fake).
        namespaces: list namespaced objects in these namespaces only (default: all).
        keys: the labels/annotations that name a pod's user and account (default:
            `gpuledger.io/user`, `gpuledger.io/account`), and the namespace → account mapping
            that wins over them. A value that is not one plain name is dropped and counted
            (`owners_rejected`).
        now: the collection time (default: the current time): each new version's updated_ts.

    Raises:
        KubernetesApiError: a list call failed; nothing landed, state unchanged.
        ConfigError: an empty cluster name or a naive `now`.
    """
    if not cluster.strip():
        raise ConfigError("cluster must not be empty")
    if any(not ns.strip() for ns in namespaces):
        raise ConfigError(f"namespaces must not be empty, got {list(namespaces)!r}")
    collected = now or dt.datetime.now(dt.UTC)
    if collected.tzinfo is None:
        raise ConfigError(f"now must be timezone-aware, got {collected.isoformat()!r}")
    collected = collected.astimezone(dt.UTC)
    collected = collected.replace(microsecond=collected.microsecond // 1000 * 1000)
    now_ms = int(collected.timestamp() * 1000)
    namespaces = sorted(set(namespaces))
    snap = _read(api, namespaces, keys or AttributionKeys())
    batch = f"k8s-{cluster}-{collected:%Y%m%dT%H%M%S}{collected.microsecond // 1000:03d}"
    with open_state(lake.root, cluster) as state:
        # a run killed after its state committed and before its rows landed (or were said to
        # have): they land now, under their own batch id, replacing any copy that did
        for staged, rows in state.staged_jobs():
            write_batch(lake.root, "jobs", rows, staged)
            state.drop_staged(staged)
        new, updated, gone, ended, jobs = _stage_jobs(state, snap, namespaces, batch, now_ms)
        opened, closed = _land_gpus(lake.root, state, snap, ended)
        queues, deleted = _land_queues(lake.root, state, snap, namespaces, batch, now_ms)
        state.set_checkpoint(now_ms)
    if jobs.num_rows:  # landed once the state that knows them is committed (DESIGN §3.7)
        write_batch(lake.root, "jobs", jobs, batch)
        with open_state(lake.root, cluster) as state:
            state.drop_staged(batch)
    if snap.malformed:
        logger.warning(
            "kubernetes %s: skipped %d malformed object(s), first: %s",
            cluster,
            len(snap.malformed),
            snap.malformed[0],
        )
    if snap.owners_rejected:
        logger.warning(
            "kubernetes %s: %d pod(s) name a user or account that is not one plain name "
            "(dropped; first: %s)",
            cluster,
            len(snap.owners_rejected),
            snap.owners_rejected[0],
        )
    return KubernetesCollectResult(
        cluster=cluster,
        batch_id=batch,
        collected_at=collected,
        pods_seen=snap.pods_seen,
        gpu_pods=len(snap.pods),
        jobs_new=new,
        jobs_updated=updated,
        jobs_gone=gone,
        queues_landed=queues,
        queues_deleted=deleted,
        gpu_rows_opened=opened,
        gpu_rows_closed=closed,
        integrations=snap.integrations,
        malformed=tuple(snap.malformed),
        owners_rejected=len(snap.owners_rejected),
    )
