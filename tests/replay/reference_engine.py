"""The replay engine as first written (commit 05933e8), kept as the reference the optimised
engine (detectors/replay/engine.py) must match start for start: see
tests/replay/test_reference.py. Do not optimise this file. Changed since, on purpose and with
the engine: backfill's breakpoints and reservations as Slurm 22.05's backfill map has them (the
running jobs' exact ends; a reservation holds whole nodes from its start rounded down to
bf_resolution to its end rounded down); a job cancelled while pending in the record that starts
before its cancel ends at it; CPUs and memory per node (cons_tres), written plainly here: a
job's per node is its total ÷ its nodes rounded up, at most the most a node of its partition and
type has; a node or job without the figure is unconstrained on it; backfill profiles them beside
the GPUs, and a reservation's whole-node hold covers them."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np

from detectors.replay.engine import Outcome, Workload
from detectors.replay.policy import Policy

__all__ = ["replay"]

_NEVER = math.inf


def _effective_limit(w: Workload, policy: Policy, j: int) -> tuple[float, bool]:
    """(seconds the job may run, held): the job's own limit under its partition's MaxTime."""
    own = float(w.limit_s[j])
    cap = policy.max_time(w.partition[j])
    if cap is None:
        return (own if own == own else _NEVER), False
    if own != own:  # no recorded limit: the partition's
        return float(cap), False
    if own > cap:
        return float(cap), policy.over_limit == "hold"
    return own, False


class _Nodes:
    """Free GPUs per node and, per (partition, type), which nodes a job may use."""

    def __init__(self, w: Workload, policy: Policy) -> None:
        p_cpus, p_mem = policy.node_cpus, policy.node_mem_mib
        names = list(w.nodes)
        gpus = [int(g) for g in w.node_gpus]
        models = list(w.node_model)
        for node, (count, model) in policy.node_gres.items():
            if node in names:
                i = names.index(node)
                gpus[i], models[i] = count, model or models[i]
            else:
                names.append(node)
                gpus.append(count)
                models.append(model)
        self.names = names
        self.total = np.array(gpus, dtype=np.int64)
        for i, node in enumerate(names):
            if node in policy.drained:
                self.total[i] = 0
        self.free = self.total.copy()
        self.model = [m.lower() for m in models]
        # CPUs and memory per node (None: unknown, never runs out)
        self.host_total = [[given.get(n) for n in names] for given in (p_cpus, p_mem)]
        seen = w.node_partitions
        configured = {p: set(pp.nodes) for p, pp in policy.partitions.items() if pp.nodes}
        self._members: dict[str, np.ndarray] = {}
        self._seen = seen
        self._configured = configured
        self._masks: dict[tuple[str, str], np.ndarray] = {}

    def mask(self, partition: str, gpu_type: str) -> np.ndarray:
        key = (partition, gpu_type)
        cached = self._masks.get(key)
        if cached is None:
            if partition in self._configured:
                member = [n in self._configured[partition] for n in self.names]
            else:
                member = [not self._seen.get(n) or partition in self._seen[n] for n in self.names]
            want = gpu_type.lower()
            typed = [not want or want in m or m in want for m in self.model]
            cached = np.array(member, dtype=bool) & np.array(typed, dtype=bool)
            self._masks[key] = cached
        return cached


def _pick(avail: np.ndarray, mask: np.ndarray, need: int, count: int) -> np.ndarray | None:
    """`count` nodes of `mask` each with ≥ `need` GPUs in `avail`: the tightest fits first."""
    ok = mask & (avail >= need)
    if count == 1:
        if not ok.any():
            return None
        return np.array([int(np.argmin(np.where(ok, avail, np.iinfo(np.int64).max)))])
    idx = np.flatnonzero(ok)
    if idx.size < count:
        return None
    return idx[np.argsort(avail[idx], kind="stable")[:count]]


def replay(
    w: Workload,
    policy: Policy,
    progress: Callable[[float], None] | None = None,
) -> Outcome:
    """Replay `w` under `policy`; see the module docstring for the model."""
    n = w.size
    nodes = _Nodes(w, policy)
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    cut = np.zeros(n, dtype=bool)
    held = np.zeros(n, dtype=bool)
    known = ~np.isnan(w.run_s)
    limit = np.empty(n)
    for j in range(n):
        limit[j], held[j] = _effective_limit(w, policy, j)
    run = np.where(known, w.run_s, np.where(np.isfinite(limit), limit, np.nan))
    need = np.ceil(w.gpus / np.maximum(w.n_nodes, 1)).astype(np.int64)
    count = np.maximum(w.n_nodes, 1).astype(np.int64)
    total_gpus = max(int(nodes.total.sum()), 1)

    # per host resource (CPUs, memory): free per node (big where unknown), per job per node
    big = 1 << 50
    host_free: list[np.ndarray] = []
    host_need: list[list[int]] = []
    for totals, asked in zip(nodes.host_total, (w.cpus, w.mem_mib), strict=True):
        host_free.append(np.array([big if x is None else x for x in totals], dtype=np.int64))
        per = []
        for j in range(n):
            a = float(asked[j]) if asked is not None else math.nan
            if not (a == a and a > 0):
                per.append(0)
                continue
            mask = nodes.mask(w.partition[j], w.gpu_type[j])
            most = max((int(x) for x, m in zip(host_free[-1], mask, strict=True) if m), default=big)
            per.append(min(math.ceil(a / int(count[j])), most))
        host_need.append(per)

    def host_ok(j: int) -> np.ndarray:
        ok = np.ones(len(nodes.names), dtype=bool)
        for free, per in zip(host_free, host_need, strict=True):
            ok &= free >= per[j]
        return ok

    accounts = sorted(set(w.account))
    acct_of = {a: i for i, a in enumerate(accounts)}
    acct = np.array([acct_of[a] for a in w.account], dtype=np.int64)
    user_key = [f"{a}\x00{u}" for a, u in zip(w.account, w.user, strict=True)]
    shares = np.array([policy.shares.get(a, 1.0) for a in accounts], dtype=float)
    shares_norm = shares / shares.sum() if shares.sum() > 0 else np.full(len(accounts), 1.0)
    usage = np.zeros(len(accounts))
    acct_running = np.zeros(len(accounts), dtype=np.int64)
    user_running: dict[str, int] = {}
    acct_cap = np.array([policy.account_gpu_cap.get(a, -1) for a in accounts], dtype=np.int64)
    user_cap = {a: c for a, c in policy.user_gpu_cap.items()}
    tiers = {p: pp.priority_tier for p, pp in policy.partitions.items()}
    max_tier = max([1, *tiers.values()])
    multifactor = policy.priority_type == "priority/multifactor"

    alloc: dict[int, tuple[np.ndarray, int]] = {}  # running job → (its nodes, GPUs on each)
    expected_end: dict[int, float] = {}
    ends: list[tuple[float, int]] = []
    pending: list[int] = []
    order = np.argsort(w.submit_e, kind="stable")
    next_submit = 0
    cancels = sorted((float(w.cancel_e[j]), j) for j in range(n) if np.isfinite(w.cancel_e[j]))
    next_cancel = 0
    last_bf = -_NEVER
    dirty = False

    def fits_limits(j: int) -> bool:
        a = acct[j]
        if acct_cap[a] >= 0 and acct_running[a] + w.gpus[j] > acct_cap[a]:
            return False
        cap = user_cap.get(w.account[j])
        return cap is None or user_running.get(user_key[j], 0) + int(w.gpus[j]) <= cap

    def begin(j: int, t: float, chosen: np.ndarray) -> None:
        nodes.free[chosen] -= need[j]
        for free, per in zip(host_free, host_need, strict=True):
            free[chosen] -= per[j]
        alloc[j] = (chosen, int(need[j]))
        start[j] = t
        r = run[j]
        stop = t + min(r, limit[j]) if r == r else t + limit[j]
        # a job cancelled while pending in the record is cancelled then whatever it does
        # (its user's scancel comes at that time): started before, it runs until then
        stop = min(stop, max(float(w.cancel_e[j]), t))
        cut[j] = bool(r == r and r > limit[j])
        end[j] = stop
        expected_end[j] = t + limit[j]
        heapq.heappush(ends, (stop, j))
        acct_running[acct[j]] += int(w.gpus[j])
        user_running[user_key[j]] = user_running.get(user_key[j], 0) + int(w.gpus[j])

    def finish(j: int) -> None:
        chosen, k = alloc.pop(j)
        nodes.free[chosen] += k
        for free, per in zip(host_free, host_need, strict=True):
            free[chosen] += per[j]
        expected_end.pop(j, None)
        acct_running[acct[j]] -= int(w.gpus[j])
        user_running[user_key[j]] -= int(w.gpus[j])

    def ranked(t: float) -> list[int]:
        if not multifactor:
            return sorted(pending, key=lambda j: (w.submit_e[j], j))
        total_use = usage.sum()
        use_norm = usage / total_use if total_use > 0 else np.zeros_like(usage)
        fs = np.power(2.0, -use_norm / np.maximum(shares_norm, 1e-12))
        scored = []
        for j in pending:
            age = (
                min(1.0, max(0.0, t - w.submit_e[j]) / policy.max_age_s)
                if policy.max_age_s
                else 1.0
            )
            size = w.gpus[j] / total_gpus
            if policy.favor_small:
                size = 1.0 - size
            tier = tiers.get(w.partition[j], 1) / max_tier
            p = (
                policy.weight_age * age
                + policy.weight_fairshare * fs[acct[j]]
                + policy.weight_job_size * size
                + policy.weight_partition * tier
            )
            scored.append((-math.floor(p), w.submit_e[j], j))
        scored.sort()
        return [j for _, _, j in scored]

    def main_pass(t: float) -> None:
        blocked: set[str] = set()
        started = []
        for j in ranked(t)[: policy.default_queue_depth]:
            part = w.partition[j]
            if part in blocked or held[j] or not fits_limits(j):
                continue
            mask = nodes.mask(part, w.gpu_type[j]) & host_ok(j)
            chosen = _pick(nodes.free, mask, int(need[j]), int(count[j]))
            if chosen is None:
                blocked.add(part)
                continue
            begin(j, t, chosen)
            started.append(j)
        if started:
            gone = set(started)
            pending[:] = [j for j in pending if j not in gone]

    def backfill(t: float) -> None:
        horizon = t + policy.bf_window_s
        res = policy.bf_resolution_s
        # (changed on purpose with the engine: breakpoints at the exact ends, as Slurm's
        # will-run test has them, and at those ends rounded down to bf_resolution, where a
        # reservation's hold on its whole nodes starts)
        ends = {e for e in expected_end.values() if t < e < horizon}
        times = sorted(ends | {math.floor(e / res) * res for e in ends} - {e for e in [t]})
        bp = np.array([t, *[x for x in times if x > t]])
        prof = np.repeat(nodes.free[None, :], len(bp), axis=0)
        hprof = [np.repeat(free[None, :], len(bp), axis=0) for free in host_free]
        for j, e in expected_end.items():
            if t < e < horizon:
                held_nodes, k = alloc[j]
                b = int(np.searchsorted(bp, e))
                prof[b:, held_nodes] += k
                for hp, per in zip(hprof, host_need, strict=True):
                    hp[b:, held_nodes] += per[j]
        started = []
        for j in ranked(t)[: policy.bf_max_job_test]:
            if held[j] or not fits_limits(j):
                continue
            dur = limit[j] if np.isfinite(limit[j]) else policy.bf_window_s
            k, c = int(need[j]), int(count[j])
            mask = nodes.mask(w.partition[j], w.gpu_type[j])
            # usable[b, n]: node n has k GPUs free from bp[b] for the job's whole limit
            bad = np.zeros((len(bp) + 1, mask.sum()), dtype=np.int32)
            short = prof[:, mask] < k
            for hp, per in zip(hprof, host_need, strict=True):
                short |= hp[:, mask] < per[j]
            np.cumsum(short, axis=0, out=bad[1:])
            stop = np.maximum(np.searchsorted(bp, bp + dur, side="left"), np.arange(1, len(bp) + 1))
            usable = bad[stop] == bad[:-1]
            first = np.flatnonzero(usable.sum(axis=1) >= c)
            if first.size == 0:
                continue
            b = int(first[0])
            where = np.flatnonzero(mask)[usable[b]]
            fit = where[np.argsort(prof[b, where], kind="stable")[:c]]
            if b == 0:  # the profile's first row is what is free now
                begin(j, t, fit)
                started.append(j)
                prof[b : stop[b], fit] -= k
                for hp, per in zip(hprof, host_need, strict=True):
                    hp[b : stop[b], fit] -= per[j]
            else:  # reserved: whole nodes, from bp[b] rounded down to bf_resolution
                first_t = math.floor(bp[b] / res) * res
                last_t = max(math.floor((bp[b] + dur) / res) * res, first_t + res)
                lo = max(int(np.searchsorted(bp, first_t, side="right")) - 1, 0)
                prof[lo : int(np.searchsorted(bp, last_t, side="left")), fit] -= 1 << 40
        if started:
            gone = set(started)
            pending[:] = [j for j in pending if j not in gone]

    t_use = float(w.submit_e[order[0]]) if n else w.horizon_e
    while True:
        candidates = []
        if next_submit < n:
            candidates.append(float(w.submit_e[order[next_submit]]))
        if ends:
            candidates.append(ends[0][0])
        if next_cancel < len(cancels):
            candidates.append(cancels[next_cancel][0])
        if pending and dirty:
            candidates.append(max(last_bf + policy.bf_interval_s, t_use))
        if not candidates:
            break
        t = min(candidates)
        if t > w.horizon_e:
            break
        if multifactor:  # fair-share usage decays, and grows with the GPUs each account runs
            dt_s = t - t_use
            if dt_s > 0:
                usage *= (
                    0.5 ** (dt_s / policy.decay_half_life_s) if policy.decay_half_life_s else 1.0
                )
                usage += acct_running * dt_s
        t_use = t
        while ends and ends[0][0] <= t:
            _, j = heapq.heappop(ends)
            finish(j)
            dirty = True
        while next_submit < n and w.submit_e[order[next_submit]] <= t:
            pending.append(int(order[next_submit]))
            next_submit += 1
            dirty = True
        while next_cancel < len(cancels) and cancels[next_cancel][0] <= t:
            j = cancels[next_cancel][1]
            next_cancel += 1
            if j in pending and start[j] != start[j]:
                pending.remove(j)
        if pending:
            main_pass(t)
        if pending and dirty and t >= last_bf + policy.bf_interval_s:
            backfill(t)
            last_bf = t
            dirty = False
        if progress is not None:
            progress(t)
    return Outcome(
        start_e=start, end_e=end, cut_by_limit=cut, held_by_limit=held, runtime_known=known
    )
