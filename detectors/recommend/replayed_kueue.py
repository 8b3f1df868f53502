"""The Kueue replay's deltas in a Kubernetes cluster's recommendations (the Policy lab, issue #23).

The Slurm side is `detectors.recommend.replayed`; this is the same for a cluster whose jobs
come from Kubernetes (target `kueue`): the cluster's recorded GPU workloads over the
recommenders' window, queued in the ClusterQueues the lake knows (`collect kubernetes`), are
admitted once under the recorded ClusterQueues (the baseline) and once with the change, both
past the end of the data (a workload the change delays is still admitted; its wait counts),
the calibration being the baseline cut at the end. The evidence's `replay` object has the Slurm
side's fields (waits, occupancy of the nominal quota, jobs started, calibration) plus

    scheduler        "kueue"
    jobs_preempted   workloads preempted at least once, {baseline, proposal}
    apply            the exact commands that put `settings` on the recorded ClusterQueues

What the replay can express: a GPU cap (gpu_cap) on an account or a user whose workloads all
sat in one ClusterQueue of one GPU flavor that queued nobody else's, as that queue's quota:
`borrowingLimit` = cap − nominalQuota, or when the cap is below the nominal quota,
`nominalQuota` = cap and (in a cohort) `borrowingLimit` = 0, a `lendingLimit` above the cap
lowered to it (Kueue refuses a borrowingLimit outside a cohort and a lendingLimit above the
nominal quota). A cap that does not map onto one ClusterQueue
says why in `replay.skipped`; the other kinds (LocalQueue weights, max-exec-time labels, node
cordons, billing) are not replayed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import duckdb
import numpy as np

from detectors.recommend.recommendation import ClusterFacts, Recommendation
from detectors.recommend.replayed import MAX_JOBS, MAX_PROPOSALS, pair, wait_quantiles
from detectors.replay.engine import Workload, within_data
from detectors.replay.kueue.engine import KueueOutcome, KueueWorkload, replay_kueue
from detectors.replay.kueue.policy import (
    KueuePolicy,
    apply_kueue_settings,
    kueue_apply_lines,
    quota_resources,
)
from detectors.replay.kueue.workload import load_kueue_workload, recorded_kueue_settings, subset
from detectors.replay.metrics import calibrate, compare
from detectors.replay.policy import PolicyError
from detectors.replay.workload import NoWorkload

__all__ = ["kueue_proposal_settings", "with_kueue_replayed_deltas"]


def _scope(scope: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in scope.split(",") if "=" in part)


def _whole(gpus: float) -> str:
    return str(int(gpus))


def kueue_proposal_settings(
    rec: Recommendation,
    recorded: KueuePolicy,
    w: Workload,
    resources: dict[tuple[str, str], str],
) -> tuple[list[str], str | None]:
    """(the change in Kueue's settings, None) for `rec`, ([], why) when it is a kind the
    replay could express but not on this cluster's queues, ([], None) for another kind.
    `w`'s partitions are the ClusterQueues its workloads were queued in."""
    scope, ev = _scope(rec.scope), rec.evidence
    if rec.kind != "gpu_cap" or not ev.get("cap_gpus") or "account" not in scope:
        return [], None
    cap = int(ev["cap_gpus"])
    user = scope.get("user")
    whose = f"{user}'s" if user else f"account {scope['account']}'s"
    mine = [
        a == scope["account"] and (user is None or u == user)
        for a, u in zip(w.account, w.user, strict=True)
    ]
    queues = sorted({q for q, m in zip(w.partition, mine, strict=True) if m})
    if not queues:
        return [], f"none of {whose} GPU workloads was queued in a ClusterQueue the lake knows"
    if len(queues) > 1:
        return [], (
            f"{whose} workloads were queued in {len(queues)} ClusterQueues "
            f"({', '.join(queues)}): the cap is no one ClusterQueue's quota"
        )
    cq = queues[0]
    if any(q == cq and not m for q, m in zip(w.partition, mine, strict=True)):
        return (
            [],
            f"ClusterQueue {cq} also queued others' workloads: a cap on {whose} is not its quota",
        )
    flavors = recorded.queues[cq].flavors
    if len(flavors) != 1:
        return [], f"ClusterQueue {cq} has {len(flavors)} GPU flavors: the cap is no one quota"
    flavor, quota = next(iter(flavors.items()))
    at = f"{resources.get((cq, flavor), 'nvidia.com/gpu')}@{flavor}"
    borrows = recorded.queues[cq].cohort is not None
    ceiling = quota.nominal
    if borrows:
        ceiling += np.inf if quota.borrowing_limit is None else quota.borrowing_limit
    if ceiling <= cap:
        return [], f"ClusterQueue {cq}'s quota already holds it to {_whole(ceiling)} GPUs"
    if cap >= quota.nominal:  # in a cohort: it borrows no more than the cap leaves
        return [f"clusterqueue.{cq}.borrowingLimit.{at}={_whole(cap - quota.nominal)}"], None
    change = [f"clusterqueue.{cq}.nominalQuota.{at}={cap}"]
    # Kueue refuses a borrowingLimit outside a cohort and a lendingLimit above nominalQuota
    if borrows:
        change.append(f"clusterqueue.{cq}.borrowingLimit.{at}=0")
    if quota.lending_limit is not None and quota.lending_limit > cap:
        change.append(f"clusterqueue.{cq}.lendingLimit.{at}={cap}")
    return change, None


class _Cluster:
    """One Kubernetes cluster's queued workloads, recorded ClusterQueues and baseline run."""

    def __init__(
        self, kw: KueueWorkload, recorded: KueuePolicy, resources: dict[tuple[str, str], str]
    ) -> None:
        self.kw, self.recorded, self.resources = kw, recorded, resources
        # metrics group by `account`: here each workload's ClusterQueue
        self.w = dataclasses.replace(kw.jobs, account=list(kw.jobs.partition))
        self.entitlement = {
            name: sum(f.nominal for f in cq.flavors.values())
            for name, cq in recorded.queues.items()
        }
        self.base = replay_kueue(kw, recorded, past_end=True)
        c = calibrate(self.w, within_data(self.w, self.base.outcome))
        self.calibration = {
            "jobs": c.jobs,
            "median_abs_start_s": c.median_abs_start_s,
            "p90_abs_start_s": c.p90_abs_start_s,
            "rank_correlation": c.rank_correlation,
        }

    def deltas(self, change: list[str]) -> dict[str, Any]:
        proposed = apply_kueue_settings(self.recorded, change)
        new: KueueOutcome = replay_kueue(self.kw, proposed, past_end=True)
        base = self.base
        capacity = (
            self.recorded.nominal_gpus * self.w.span_h,
            proposed.nominal_gpus * self.w.span_h,
        )
        c = compare(self.w, base.outcome, new.outcome, self.entitlement, capacity)
        (b50, b95), (n50, n95) = (
            wait_quantiles(self.w, base.outcome),
            wait_quantiles(self.w, new.outcome),
        )
        return {
            "scheduler": "kueue",
            "settings": change,
            "assumed": [],
            "apply": kueue_apply_lines(change, self.recorded, self.resources),
            "jobs": self.w.size,
            "wait_p50_s": pair(b50, n50),
            "wait_p95_s": pair(b95, n95),
            "occupancy": pair(*c.occupancy),
            "jobs_started": pair(*c.started),
            "jobs_preempted": pair(
                int((base.preemptions > 0).sum()), int((new.preemptions > 0).sum())
            ),
            "jobs_cut": c.cut_jobs,
            "gpu_h_cut": c.cut_gpu_h,
            "jobs_held": c.held_jobs,
            "calibration": self.calibration,
        }


def _load(
    con: duckdb.DuckDBPyConnection, facts: ClusterFacts
) -> tuple[KueueWorkload, KueuePolicy, dict[tuple[str, str], str]] | None:
    """The window's workloads queued in a known ClusterQueue, the recorded policy and each
    quota's resource; None when there is nothing to replay."""
    try:
        kw = load_kueue_workload(con, facts.cluster, facts.window_start, facts.window_end)
        settings = recorded_kueue_settings(con, facts.cluster)
        recorded = apply_kueue_settings(KueuePolicy(), settings)
    except (NoWorkload, duckdb.Error, PolicyError):  # no jobs, no queues table: nothing
        return None
    queued = [q in recorded.queues for q in kw.jobs.partition]
    if not any(queued):
        return None
    resources = quota_resources([f"{k}={v}" for k, v in settings])
    return subset(kw, queued), recorded, resources


def with_kueue_replayed_deltas(
    con: duckdb.DuckDBPyConnection, facts: ClusterFacts, recs: list[Recommendation]
) -> list[Recommendation]:
    """`recs` (one Kubernetes cluster's) with each replayable one's evidence carrying its
    `replay`: the deltas, or `skipped` saying why a cap is not replayed."""
    if not any(r.kind == "gpu_cap" for r in recs):
        return recs
    loaded = _load(con, facts)
    if loaded is None:
        return recs
    kw, recorded, resources = loaded
    notes: dict[int, dict[str, Any]] = {}
    changes: dict[int, list[str]] = {}
    for i, rec in enumerate(recs):
        change, why = kueue_proposal_settings(rec, recorded, kw.jobs, resources)
        if change:
            changes[i] = change
        elif why is not None:
            notes[i] = {"scheduler": "kueue", "skipped": why}
    if changes and kw.jobs.size > MAX_JOBS:
        too_many = f"{kw.jobs.size:,} workloads in the window: more than {MAX_JOBS:,}"
        notes |= {i: {"scheduler": "kueue", "skipped": too_many} for i in changes}
    elif changes:
        cluster = _Cluster(kw, recorded, resources)
        ranked = sorted(changes, key=lambda i: -(recs[i].expected_gain_gpu_h or 0.0))
        for n, i in enumerate(ranked):
            if n >= MAX_PROPOSALS:
                why = f"only the {MAX_PROPOSALS} largest expected gains are replayed"
                notes[i] = {"scheduler": "kueue", "skipped": why}
                continue
            try:
                notes[i] = cluster.deltas(changes[i])
            except PolicyError as exc:
                notes[i] = {"scheduler": "kueue", "skipped": str(exc)}
    return [
        dataclasses.replace(r, evidence={**r.evidence, "replay": notes[i]}) if i in notes else r
        for i, r in enumerate(recs)
    ]
