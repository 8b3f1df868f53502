"""The replayed deltas a scheduler-policy recommendation carries (the Policy lab, issue #23).

Each recommendation whose change the replay can express is replayed: the cluster's recorded
workload over the recommenders' window, once under the recorded policy (the baseline, shared
by every recommendation of the cluster) and once with the change. Its evidence gains a
`replay` object:

    settings             the change, as `gpuledger whatif --set` takes it
    assumed              settings both runs add (fair-share only counts under multifactor
                         priority: a recorded priority/basic gets Slurm's usual weights)
    wait_p50_s/p95_s     queue wait over the jobs started (not those running when the
                         window started), {baseline, proposal}
    occupancy            GPU-hours run ÷ GPU-hours there were, {baseline, proposal}
    jobs_started         {baseline, proposal}
    jobs_cut, gpu_h_cut  jobs a new time limit cuts short, and the GPU-hours it takes
    jobs_held            jobs a new limit keeps pending for good
    calibration          how far the baseline is from what happened: jobs, median and p90
                         |replayed − real start| (s), start-order rank correlation

The kinds and their settings: time_limit (a partition's) → `partition.<p>.MaxTime`; gpu_cap →
`assoc.<account>.GrpTRES` or `assoc.<account>.<user>.GrpTRES`; fairshare_weight → each flagged
account's `assoc.<a>.Shares` (a parent account's: its leaves', scaled); drain_node →
`node.<n>.State=DRAIN`. The other kinds are not replayed and their `replay` says why in
`not_replayed` (`NOT_REPLAYED`): a power cap does not change when jobs start, the replay models
no billing, MIG slices and a user's `--time` hint change what jobs ask for (no `--set` does),
and the idle-cancel policy has its own replay.
Kubernetes clusters (target `kueue`) get the Kueue replay's deltas instead
(`detectors.recommend.replayed_kueue`). The work is bounded: a cluster with more than
`MAX_JOBS` jobs in the window is not replayed, and at most `MAX_PROPOSALS` recommendations
per cluster are (the largest expected gains first); the rest say why they carry no replay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import duckdb
import numpy as np

from detectors.recommend import (
    billing,
    drain_node,
    fairshare,
    gpu_cap,
    idle_cancel,
    mig_packing,
    power_cap,
    time_limit,
)
from detectors.recommend.recommendation import ClusterFacts, Recommendation, hhmmss
from detectors.replay.engine import Outcome, Workload, replay, within_data
from detectors.replay.metrics import (
    calibrate,
    compare,
    period_waits,
    slurm_capacity_gpu_h,
    slurm_entitlement,
)
from detectors.replay.policy import Policy, PolicyError, apply_settings
from detectors.replay.workload import NoWorkload, load_workload, recorded_settings

__all__ = [
    "MAX_JOBS",
    "MAX_PROPOSALS",
    "NOT_REPLAYED",
    "not_replayed",
    "pair",
    "proposal_settings",
    "wait_quantiles",
    "with_replayed_deltas",
]

MAX_JOBS = 60_000
MAX_PROPOSALS = 8
MULTIFACTOR = (
    "priority.PriorityType=priority/multifactor",
    "priority.PriorityWeightFairshare=10000",
    "priority.PriorityWeightAge=1000",
)

# the kinds the Slurm replay does not express, and why: their evidence's `replay.not_replayed`
NOT_REPLAYED: dict[str, str] = {
    idle_cancel.KIND: (
        "cancelling idle jobs is not a scheduler setting: the policy is replayed on the jobs' "
        "idle stretches instead (this evidence's candidates)"
    ),
    power_cap.KIND: (
        "a power cap changes the energy the GPUs draw, not which jobs start when: the "
        "scheduler replay has nothing to change (the saving is kwh_saved)"
    ),
    billing.KIND: (
        "billing weights change what accounts are charged; Slurm also counts fair-share usage "
        "in billing units, but the replay counts GPU-seconds and models no billing, so it "
        "cannot express the change"
    ),
    mig_packing.KIND: (
        "MIG slices are not a change the replay can make honestly: a replayed node has one GPU "
        "type (node.<n>.Gres=gpu:<type>:N), not whole GPUs beside slices of several profiles, "
        "the candidate jobs would have to ask for a slice (their requests, not a scheduler "
        "setting), and the recommendation names no node"
    ),
}
USER_TIME_HINT = (
    "a user's --time hint changes what that user's jobs ask for, not a scheduler setting: "
    "the replay runs the jobs as they asked"
)


def not_replayed(rec: Recommendation) -> str | None:
    """Why the Slurm replay does not express `rec`'s change (None: it does, or may)."""
    if rec.kind == time_limit.KIND and "partition" not in _scope(rec.scope):
        return USER_TIME_HINT
    return NOT_REPLAYED.get(rec.kind)


def _with_reason(rec: Recommendation) -> Recommendation:
    why = not_replayed(rec)
    if why is None or "replay" in rec.evidence:
        return rec
    return dataclasses.replace(rec, evidence={**rec.evidence, "replay": {"not_replayed": why}})


def _scope(scope: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in scope.split(",") if "=" in part)


def _leaves_under(account: str, leaves: Iterable[str], parents: Mapping[str, str]) -> list[str]:
    """The accounts of `leaves` below `account` in the tree `parents` (child → parent)."""
    out = []
    for leaf in sorted(leaves):
        seen: set[str] = set()
        node = parents.get(leaf)
        while node is not None and node not in seen and node != account:
            seen.add(node)
            node = parents.get(node)
        if node == account:
            out.append(leaf)
    return out


def _fair_share_change(
    rows: list[dict[str, Any]], flagged: set[str], recorded: Policy, parents: Mapping[str, str]
) -> list[str]:
    """Each flagged account's new part of what the accounts under its parent hold now. The
    replay's shares are the leaf accounts' parts of the whole tree (`recorded.shares`): a
    flagged account with sub-accounts gets its part by scaling each of its leaves'."""
    under = {r["account"]: _leaves_under(r["account"], recorded.shares, parents) for r in rows}

    def part(account: str) -> float:
        if account in recorded.shares:
            return float(recorded.shares[account])
        leaves = under[account]
        return sum(float(recorded.shares[a]) for a in leaves) if leaves else 1.0

    total = sum(part(r["account"]) for r in rows)
    change = []
    for r in rows:
        if r["account"] not in flagged or r.get("new_share") is None:
            continue
        new = float(r["new_share"]) * total
        leaves = under[r["account"]] if r["account"] not in recorded.shares else []
        if leaves:
            scale = new / part(r["account"])
            change += [f"assoc.{a}.Shares={float(recorded.shares[a]) * scale!r}" for a in leaves]
        else:
            change.append(f"assoc.{r['account']}.Shares={new!r}")
    return change


def proposal_settings(
    rec: Recommendation, recorded: Policy, parents: Mapping[str, str] | None = None
) -> tuple[list[str], list[str]]:
    """(settings both runs assume, the change) for `rec`; ([], []) when the replay cannot
    express it. `parents`: the account tree (child → parent), for a fair-share change."""
    scope, ev = _scope(rec.scope), rec.evidence
    if rec.kind == time_limit.KIND and "partition" in scope and ev.get("max_time_s"):
        return [], [f"partition.{scope['partition']}.MaxTime={hhmmss(float(ev['max_time_s']))}"]
    if rec.kind == gpu_cap.KIND and ev.get("cap_gpus"):
        cap = int(ev["cap_gpus"])
        if "user" in scope and "account" in scope:
            return [], [f"assoc.{scope['account']}.{scope['user']}.GrpTRES=gres/gpu={cap}"]
        if "account" in scope:
            return [], [f"assoc.{scope['account']}.GrpTRES=gres/gpu={cap}"]
    if rec.kind == fairshare.KIND and ev.get("accounts"):
        rows = [r for r in ev["accounts"] if r.get("account") is not None]
        flagged = set(ev.get("flagged") or [])
        change = _fair_share_change(rows, flagged, recorded, parents or {})
        assumed = list(MULTIFACTOR) if recorded.priority_type == "priority/basic" else []
        return assumed, change
    if rec.kind == drain_node.KIND and "node" in scope:
        return [], [f"node.{scope['node']}.State=DRAIN"]
    return [], []


def wait_quantiles(w: Workload, out: Outcome) -> tuple[float | None, float | None]:
    """The p50 and p95 queue wait (s) of the jobs `out` started, less those already running
    when the window started (`period_waits`: they waited before it); None when none is left."""
    started = period_waits(w, out)
    if not started.any():
        return None, None
    waits = out.start_e[started] - w.submit_e[started]
    return float(np.quantile(waits, 0.5)), float(np.quantile(waits, 0.95))


def pair(base: Any, new: Any) -> dict[str, Any]:
    return {"baseline": base, "proposal": new}


class _Cluster:
    """One cluster's workload, recorded policy and baseline runs (one per assumption set)."""

    def __init__(self, w: Workload, recorded: Policy) -> None:
        self.w = w
        self.recorded = recorded
        self._baselines: dict[tuple[str, ...], tuple[Policy, Outcome, dict[str, Any]]] = {}

    def baseline(self, assumed: Sequence[str]) -> tuple[Policy, Outcome, dict[str, Any]]:
        key = tuple(assumed)
        if key not in self._baselines:
            policy = apply_settings(self.recorded, assumed)
            # both runs go past the end of the data, so a job the change delays past it still
            # starts (its wait counts); the calibration is the baseline cut at the end
            out = replay(self.w, policy, past_end=True)
            c = calibrate(self.w, within_data(self.w, out))
            figures = {
                "jobs": c.jobs,
                "median_abs_start_s": c.median_abs_start_s,
                "p90_abs_start_s": c.p90_abs_start_s,
                "rank_correlation": c.rank_correlation,
            }
            self._baselines[key] = (policy, out, figures)
        return self._baselines[key]

    def deltas(self, assumed: list[str], change: list[str]) -> dict[str, Any]:
        policy, base, calibration = self.baseline(assumed)
        proposed = apply_settings(policy, change)
        new = replay(self.w, proposed, past_end=True)
        capacity = (
            slurm_capacity_gpu_h(self.w, policy),
            slurm_capacity_gpu_h(self.w, proposed),
        )
        c = compare(self.w, base, new, slurm_entitlement(self.w, policy), capacity)
        (b50, b95), (n50, n95) = wait_quantiles(self.w, base), wait_quantiles(self.w, new)
        return {
            "settings": change,
            "assumed": assumed,
            "jobs": self.w.size,
            "wait_p50_s": pair(b50, n50),
            "wait_p95_s": pair(b95, n95),
            "occupancy": pair(*c.occupancy),
            "jobs_started": pair(*c.started),
            "jobs_cut": c.cut_jobs,
            "gpu_h_cut": c.cut_gpu_h,
            "jobs_held": c.held_jobs,
            "calibration": calibration,
        }


def with_replayed_deltas(
    con: duckdb.DuckDBPyConnection, facts: ClusterFacts, recs: list[Recommendation]
) -> list[Recommendation]:
    """`recs` (one cluster's) with each replayable one's evidence carrying its `replay`, and
    each of a kind the replay cannot express saying why (`replay.not_replayed`)."""
    if facts.target != "slurm":
        return recs
    recs = [_with_reason(r) for r in recs]
    wanted = [i for i, r in enumerate(recs) if proposal_settings(r, Policy())[1]]
    if not wanted:
        return recs
    try:
        w = load_workload(con, facts.cluster, facts.window_start, facts.window_end)
        recorded = apply_settings(Policy(), recorded_settings(con, facts.cluster))
        parents = fairshare.account_tree(con, facts.cluster)
    except (NoWorkload, duckdb.Error, PolicyError):  # no GPUs table, no jobs: nothing to replay
        return recs
    if not w.nodes and not recorded.node_gres:  # no GPU node known: nothing to replay on
        return recs
    if w.size > MAX_JOBS:
        too_many = {"skipped": f"{w.size:,} jobs in the window: more than {MAX_JOBS:,}"}
        return [
            dataclasses.replace(r, evidence={**r.evidence, "replay": too_many})
            if i in wanted
            else r
            for i, r in enumerate(recs)
        ]
    cluster = _Cluster(w, recorded)
    ranked = sorted(wanted, key=lambda i: -(recs[i].expected_gain_gpu_h or 0.0))
    out = list(recs)
    for n, i in enumerate(ranked):
        rec = recs[i]
        if n >= MAX_PROPOSALS:
            note: dict[str, Any] = {
                "skipped": f"only the {MAX_PROPOSALS} largest expected gains are replayed"
            }
        else:
            assumed, change = proposal_settings(rec, cluster.recorded, parents)
            try:
                note = cluster.deltas(assumed, change)
            except PolicyError as exc:
                note = {"skipped": str(exc)}
        out[i] = dataclasses.replace(rec, evidence={**rec.evidence, "replay": note})
    return out
