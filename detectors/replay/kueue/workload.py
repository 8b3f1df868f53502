"""Read a Kubernetes cluster's Kueue workloads and ClusterQueues out of the lake for a replay."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from detectors.replay.engine import Workload
from detectors.replay.kueue.engine import KueueWorkload
from detectors.replay.kueue.policy import DEFAULT_FLAVOR
from detectors.replay.workload import NoWorkload
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "cluster_scheduler",
    "load_kueue_workload",
    "recorded_kueue_settings",
    "subset",
]


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    found = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = $name", {"name": name}
    ).fetchall()
    return bool(found[0][0])


def cluster_scheduler(con: duckdb.DuckDBPyConnection, cluster: str) -> str:
    """`kueue` when most of the cluster's jobs came from Kubernetes, else `slurm`."""
    return str(queries.run(con, "replay/cluster_scheduler", cluster=cluster)["scheduler"][0])


def _float(series: pl.Series) -> np.ndarray:
    return series.cast(pl.Float64).fill_null(np.nan).to_numpy()


def load_kueue_workload(
    con: duckdb.DuckDBPyConnection,
    cluster: str,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
) -> KueueWorkload:
    """The Kueue workloads of `cluster` submitted in [since, until) (default: all) and the end
    of its data (the replay's horizon). Raises NoWorkload when there is nothing to run."""
    end = queries.run(con, "replay/data_end", cluster=cluster)["end_e"][0]
    if end is None:
        raise NoWorkload(f"cluster {cluster!r} has no jobs in the lake")
    lo = since or dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    hi = until or dt.datetime.fromtimestamp(float(end) + 1, dt.UTC)
    rows = queries.run(con, "replay/kueue_workloads", cluster=cluster, since=lo, until=hi)
    if rows.is_empty():
        raise NoWorkload(f"cluster {cluster!r} has no GPU pods submitted in [{lo}, {hi})")
    horizon = float(end) if until is None else min(float(end), until.timestamp())
    start = _float(rows["start_e"])
    stop = _float(rows["end_e"])
    ran = ~np.isnan(start)
    run_s = np.where(ran, np.where(np.isnan(stop), float(end), stop) - start, np.nan)
    # a workload that never ran and left the queue (cancelled, its pods deleted or preempted
    # while pending) leaves it at its end: kept waiting for good, it held its ClusterQueue's
    # quota for the rest of a replay that admitted it
    cancel = np.where(~ran & ~np.isnan(stop), stop, np.inf)
    n = rows.height
    jobs = Workload(
        job_id=rows["job_id"].to_list(),
        submit_e=_float(rows["submit_e"]),
        run_s=np.maximum(run_s, 0.0),
        cancel_e=cancel,
        limit_s=_float(rows["time_limit_s"]),
        gpus=rows["gpus"].cast(pl.Int64).to_numpy(),
        n_nodes=rows["n_nodes"].cast(pl.Int64).to_numpy(),
        partition=rows["partition"].to_list(),
        account=rows["account"].to_list(),
        user=rows["user"].to_list(),
        gpu_type=[t or "" for t in rows["gpu_type"].to_list()],
        real_start_e=start,
        nodes=[],
        node_gpus=np.zeros(0, dtype=np.int64),
        node_model=[],
        node_partitions={},
        horizon_e=horizon,
        pinned=rows["pinned"].to_numpy(),
        job_nodes=[[] for _ in range(n)],
        origin_e=float("nan") if since is None else since.timestamp(),
    )
    return KueueWorkload(jobs=jobs, priority_class=rows["qos"].to_list())


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


_POLICY_KEYS = (
    ("queueing_strategy", "queueingStrategy"),
    ("within_cluster_queue", "preemption.withinClusterQueue"),
    ("reclaim_within_cohort", "preemption.reclaimWithinCohort"),
)


def recorded_kueue_settings(con: duckdb.DuckDBPyConnection, cluster: str) -> list[tuple[str, str]]:
    """The latest ClusterQueues of the `queues` table as replay settings: each queue's cohort,
    queueing strategy, preemption policies, fair-sharing weight and, per flavor, its GPU quota
    and limits; fair sharing is taken as on when any ClusterQueue sets a weight (the lake does
    not record Kueue's Configuration)."""
    if not _has_table(con, "queues"):
        return []
    rows = queries.run(con, "replay/kueue_cluster_queues", cluster=cluster)
    out: list[tuple[str, str]] = []
    weighted = False
    for row in rows.iter_rows(named=True):
        name, cohort, flavor, resource = row["name"], row["cohort"], row["flavor"], row["resource"]
        nominal, borrowing, lending = (
            row["nominal_quota"],
            row["borrowing_limit"],
            row["lending_limit"],
        )
        weight = row["weight"]
        prefix = f"clusterqueue.{name}"
        if cohort:
            out.append((f"{prefix}.cohort", cohort))
        for column, key in _POLICY_KEYS:
            if row[column]:
                out.append((f"{prefix}.{key}", row[column]))
        if weight is not None:
            weighted = True
            out.append((f"{prefix}.fairSharing.weight", repr(float(weight))))
        if resource is None:
            continue
        at = f"{resource}@{flavor or DEFAULT_FLAVOR}"
        out.append((f"{prefix}.nominalQuota.{at}", _number(nominal or 0)))
        if borrowing is not None:
            out.append((f"{prefix}.borrowingLimit.{at}", _number(borrowing)))
        if lending is not None:
            out.append((f"{prefix}.lendingLimit.{at}", _number(lending)))
    if weighted:
        out.append(("fairSharing.enable", "true"))
    return out


def subset(kw: KueueWorkload, keep: Sequence[bool]) -> KueueWorkload:
    """The workloads of `kw` where `keep` is true (e.g. those queued in a ClusterQueue the
    policy knows: pods that bypass Kueue are not replayed)."""
    mask = np.array(keep, dtype=bool)
    w = kw.jobs

    def pick(values: list[Any]) -> list[Any]:
        return [v for v, k in zip(values, keep, strict=True) if k]

    jobs = dataclasses.replace(
        w,
        job_id=pick(w.job_id),
        submit_e=w.submit_e[mask],
        run_s=w.run_s[mask],
        cancel_e=w.cancel_e[mask],
        limit_s=w.limit_s[mask],
        gpus=w.gpus[mask],
        n_nodes=w.n_nodes[mask],
        partition=pick(w.partition),
        account=pick(w.account),
        user=pick(w.user),
        gpu_type=pick(w.gpu_type),
        real_start_e=w.real_start_e[mask],
        pinned=None if w.pinned is None else w.pinned[mask],
        job_nodes=None if w.job_nodes is None else pick(w.job_nodes),
    )
    return KueueWorkload(jobs=jobs, priority_class=pick(kw.priority_class))
