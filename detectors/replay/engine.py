"""An event-driven replay of a recorded workload under a scheduler policy (Slurm's model).

Jobs arrive at their recorded submit time asking for what they asked for (GPUs, of a type, on
a number of nodes, in a partition, for an account and user, with a time limit) and run for their
recorded run time. The scheduler is Slurm's, simplified where the lake cannot tell more:

* **Main scheduler**, at every event (a submit, an end): pending jobs in priority order, at most
  `default_queue_depth` of them; a job that cannot start blocks the lower-priority jobs of its
  partition for that pass (Slurm's rule), a job over an association limit does not.
* **Backfill**, every `bf_interval` seconds while something changed: up to `bf_max_job_test`
  pending jobs in priority order; each is placed at the earliest time the nodes it needs are free
  for its whole time limit (running jobs end at their limits, as Slurm assumes), starting now if
  that is now, else reserving those resources (within `bf_window`) so lower-priority jobs cannot
  delay it.
* **Priority**: `priority/basic` is first come, first served; `priority/multifactor` weighs age
  (to `PriorityMaxAge`), fair-share (Fair Tree, Slurm's default: associations ranked by level
  fair-share, account then user; or classic with `PriorityFlags=NO_FAIR_TREE`: the account's
  2^(−usage/shares); usage is GPU-seconds decayed with `PriorityDecayHalfLife`), job size
  (GPUs; `PriorityFavorSmall` inverts it), partition tier and QOS (the job's QOS priority ÷
  the highest QOS priority, as Slurm normalises it).
* **Limits**: an account's GPUs running at once (`GrpTRES=gres/gpu=N`), each user's
  (`MaxTRESPerUser`) and one user association's (its `GrpTRES`); a QOS's GPUs running at once
  (its `GrpTRES`) and each user's in it (its `MaxTRESPerUser`); a job asking for more time
  than its partition's `MaxTime` or its QOS's `MaxWall` stays pending (Slurm's
  `PartitionTimeLimit`) unless `over_limit="cut"`, where it runs cut at the limit. A job held
  for good by a limit (`held_by_limit`): one over a time limit held so, or one asking more GPUs
  than a cap on it allows at all.
* **Partitions**: a job that records none is in the policy's default partition (slurm.conf's
  `Default=YES`), where Slurm puts a job submitted without one.
* **Preemption** (`PreemptType=preempt/qos`): a pending job whose QOS may preempt others ranks
  ahead of their jobs and, when the main scheduler finds no room for it, preempts running jobs
  of those QOS (lowest QOS priority, fewest nodes, youngest first; only those it needs on the
  nodes it gets), which end (`CANCEL`) or requeue to rerun from scratch after Slurm's requeue
  delay, submitted anew (`REQUEUE`), as their QOS's `PreemptMode`, else the cluster's, says.
* **Nodes**: GPUs per node and their model, and (cons_tres) CPUs and memory per node; a job's
  GPUs, CPUs and memory are spread evenly over its nodes (per node: the total ÷ nodes, rounded
  up), each node of the job's GPU type (any type if it asked for none) and of its partition,
  with that many GPUs, CPUs and MiB free (in the main scheduler and in backfill, whose
  reservations hold whole nodes); best fit by GPUs. A node whose CPUs or memory the policy does
  not give, or a job whose CPUs or memory the record does not give, is unconstrained on that
  resource; a job asking more per node than any node it may use has is taken to ask that node's
  size (the record says it ran). Jobs without GPUs are not replayed: what they hold is free.

Not modelled: CPU cores' layout (sockets, hyper-threads: a CPU is a CPU), memory per CPU beyond
what the record gives, SUSPEND/GANG preemption, preemption by backfill or by partition
priority, QOS limits other than GPUs, reservations, node failures, job dependencies and arrays'
throttles, Kueue (see docs: the Policy lab page).
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from detectors.replay.policy import Policy, QosPolicy

__all__ = ["Outcome", "Workload", "replay", "within_data"]

_NEVER = math.inf
_WHOLE_NODE = 1 << 40  # what a reservation takes from a node: all of it
_UNKNOWN = 1 << 50  # a node's CPUs or memory the policy does not give: never runs out
# how backfill places a job: partition, GPU type, GPUs per node, nodes, time limit, and its CPUs
# and memory per node (one per host resource that constrains the replay); what it fits by
_Shape = tuple[str, str, int, int, float, tuple[int, ...]]
_FitKey = tuple[str, str, int, int, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class Workload:
    """A recorded workload: per job (index = position) and per node arrays; times epoch seconds.

    `run_s` is NaN for a job that never ran in the record (it then runs for its time limit in a
    replay that starts it); `cancel_e` the time a job was cancelled while pending (inf: never)."""

    job_id: list[str]
    submit_e: np.ndarray
    run_s: np.ndarray
    cancel_e: np.ndarray
    limit_s: np.ndarray  # NaN: no limit recorded
    gpus: np.ndarray
    n_nodes: np.ndarray
    partition: list[str]
    account: list[str]
    user: list[str]
    gpu_type: list[str]  # "" : any
    real_start_e: np.ndarray  # NaN: never started
    nodes: list[str]
    node_gpus: np.ndarray
    node_model: list[str]
    node_partitions: dict[str, frozenset[str]]  # node → partitions seen there (empty: any)
    horizon_e: float  # the end of the data: nothing is simulated past it
    # jobs already running when the period starts: run where and when they ran, as recorded
    pinned: np.ndarray | None = None
    job_nodes: list[list[str]] | None = None
    # per job, its CPUs and memory (MiB) over all its nodes (NaN or None: unknown, unconstrained)
    cpus: np.ndarray | None = None
    mem_mib: np.ndarray | None = None
    qos: list[str] | None = None  # per job ("" or None: Slurm's default QOS, normal)
    # where the replayed period starts (its --since: a running job's hours before it are not
    # the period's); NaN: at the first submit
    origin_e: float = float("nan")

    @property
    def size(self) -> int:
        return len(self.job_id)

    @property
    def first_e(self) -> float:
        """Where the period the figures cover starts: the first submit, or the origin after it."""
        first = float(self.submit_e.min())
        return max(first, self.origin_e) if self.origin_e == self.origin_e else first

    @property
    def span_h(self) -> float:
        """Hours from the period's start to the horizon (at least a second's)."""
        return max(self.horizon_e - self.first_e, 1.0) / 3600


@dataclass(frozen=True, slots=True)
class Outcome:
    """Per job: when the replay started and ended it (NaN: never started before the horizon),
    whether a new limit cut its run, whether a limit held it pending for good, and how often a
    QOS preempted it (a requeued job's start and end are those of its last run)."""

    start_e: np.ndarray
    end_e: np.ndarray
    cut_by_limit: np.ndarray
    held_by_limit: np.ndarray
    runtime_known: np.ndarray
    preemptions: np.ndarray | None = None  # per job, how often it was preempted (None: never)
    requeued_s: np.ndarray | None = None  # per job, seconds of runs a requeue threw away


def _qos_names(w: Workload) -> list[str]:
    """Each job's QOS: the one recorded, else Slurm's default QOS (normal)."""
    return [q or "normal" for q in w.qos] if w.qos is not None else ["normal"] * w.size


def _effective_limit(
    w: Workload, policy: Policy, j: int, qos: str = "normal"
) -> tuple[float, bool]:
    """(seconds the job may run, held): the job's own limit under its partition's MaxTime and
    its QOS's MaxWall."""
    own = float(w.limit_s[j])
    caps = [c for c in (policy.max_time(w.partition[j]), policy.max_wall(qos)) if c is not None]
    cap = min(caps) if caps else None
    if cap is None:
        return (own if own == own else _NEVER), False
    if own != own:  # no recorded limit: the partition's
        return float(cap), False
    if own > cap:
        return float(cap), policy.over_limit == "hold"
    return own, False


def _over_a_cap(w: Workload, policy: Policy, qos_names: Sequence[str]) -> np.ndarray:
    """Per job, whether it asks more GPUs than a cap on it allows at all — its account's
    `GrpTRES` or `MaxTRESPerUser`, its user association's `GrpTRES`, its QOS's `GrpTRES` or
    `MaxTRESPerUser`: it stays pending for good, as a job over a held time limit does."""
    over = np.zeros(w.size, dtype=bool)
    if not (policy.account_gpu_cap or policy.user_gpu_cap or policy.assoc_user_gpu_cap) and all(
        q.gpu_cap is None and q.user_gpu_cap is None for q in policy.qos.values()
    ):
        return over
    for j, (account, user, qos) in enumerate(zip(w.account, w.user, qos_names, strict=True)):
        rule = policy.qos.get(qos)
        caps = (
            policy.account_gpu_cap.get(account),
            policy.user_gpu_cap.get(account),
            policy.assoc_user_gpu_cap.get((account, user)),
            None if rule is None else rule.gpu_cap,
            None if rule is None else rule.user_gpu_cap,
        )
        over[j] = any(c is not None and int(w.gpus[j]) > c for c in caps)
    return over


def in_default_partition(w: Workload, policy: Policy) -> Workload:
    """`w` with each job that records no partition in `policy`'s default partition (Slurm puts
    a job submitted without one there), as are the nodes seen running such jobs; `w` itself
    where the policy names no default or every job records a partition."""
    default = policy.default_partition
    if not default or all(w.partition):
        return w
    seen = {n: frozenset(p or default for p in ps) for n, ps in w.node_partitions.items()}
    return dataclasses.replace(
        w, partition=[p or default for p in w.partition], node_partitions=seen
    )


class _Nodes:
    """Free GPUs per node and, per (partition, type), which nodes a job may use; each node's
    CPUs and memory (`host_total`: `_UNKNOWN` where the policy does not give them)."""

    def __init__(self, w: Workload, policy: Policy) -> None:
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
        self.host_total = [
            np.array([given.get(n, _UNKNOWN) for n in names], dtype=np.int64)
            for given in (policy.node_cpus, policy.node_mem_mib)
        ]
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


def _host_needs(
    w: Workload, nodes: _Nodes, count: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per host resource that constrains this replay (CPUs, memory: one a node gives and a job
    asks), its free amount per node and each job's per node: its total ÷ its nodes, rounded up
    (0: unknown), at most the most a node it may use has."""
    host = []
    for total, asked in zip(nodes.host_total, (w.cpus, w.mem_mib), strict=True):
        if asked is None or not (total < _UNKNOWN).any():
            continue
        known = np.isfinite(asked) & (asked > 0)
        if not known.any():
            continue
        per = np.where(known, np.ceil(np.where(known, asked, 0.0) / count), 0.0)
        cap: dict[tuple[str, str], int] = {}
        for j in np.flatnonzero(known).tolist():
            key = (w.partition[j], w.gpu_type[j])
            most = cap.get(key)
            if most is None:
                mask = nodes.mask(*key)
                most = cap[key] = int(total[mask].max()) if mask.any() else _UNKNOWN
            per[j] = min(per[j], most)
        host.append((total.copy(), per.astype(np.int64)))
    return host


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


class _Buffers:
    """Arrays the backfill passes reuse, one after the other: a pass's profile is large
    (nodes × rows) but only the touched nodes' rows are ever written and read, and fresh
    arrays of that size cost more in the pages the system maps and zeroes for each pass than
    the pass spends on them. A pass takes them by name, uninitialised."""

    def __init__(self) -> None:
        self._kept: dict[object, np.ndarray] = {}

    def take(self, name: object, nodes: int, rows: int, dtype: type) -> np.ndarray:
        """A (`nodes`, `rows`) view of the buffer called `name`, its values whatever they
        were."""
        kept = self._kept.get(name)
        if kept is None or kept.shape[1] < rows or kept.shape[0] != nodes:
            kept = self._kept[name] = np.empty((nodes, rows + rows // 4), dtype=dtype)
        view: np.ndarray = kept[:, :rows]
        return view


class _Profile:
    """One backfill pass's plan: GPUs free per node at each breakpoint (now, then each time a
    running job's limit ends, rounded up to `bf_resolution`, within `bf_window`), less what the
    pass has started or reserved so far.

    A node no placement has touched yet (a clean one) has a profile that only grows with time,
    so it is usable from some row on for good: the first row with `k` GPUs free, read off the
    node's few step events (the jobs on it ending). Only a touched node gets its column of
    rows, built when first touched, and per (GPUs, CPUs, memory) a job asks its runs of rows
    with that much free, found again only when a placement changed the node: a node is usable
    from row b for a job when b and the job's span lie in one run, so a placement reads a few
    runs per touched node, and its cost follows the nodes the pass has touched, not the size
    of the cluster or the rows of the window.

    `host`: per constrained host resource (CPUs, memory), its free amount per node now and what
    each job holds per node: profiled the same way beside the GPUs (a job's end frees all three;
    a node is usable for a job from the first row at which all three suffice)."""

    def __init__(
        self,
        t: float,
        policy: Policy,
        free: np.ndarray,
        expected_end: dict[int, float],
        alloc: dict[int, tuple[np.ndarray, int]],
        host: Sequence[tuple[np.ndarray, np.ndarray]] = (),
        buffers: _Buffers | None = None,
    ) -> None:
        self._buffers = buffers = _Buffers() if buffers is None else buffers
        horizon = t + policy.bf_window_s
        res = policy.bf_resolution_s
        jobs = np.fromiter(expected_end.keys(), dtype=np.int64, count=len(expected_end))
        ends = np.fromiter(expected_end.values(), dtype=float, count=len(expected_end))
        inside = (ends > t) & (ends < horizon)
        jobs, rounded = jobs[inside], ends[inside]
        # Slurm's will-run test starts a job when the running jobs' limits end (exactly); a
        # reservation holds its nodes from that start rounded down to bf_resolution
        floors = np.floor(rounded / res) * res
        self.bp = np.unique(np.concatenate(([t], rounded, floors[floors > t])))
        self.res = res
        self.rows = rows = self.bp.size
        held = [alloc[int(j)] for j in jobs]
        sizes = np.array([len(h[0]) for h in held], dtype=np.int64)
        node = np.concatenate([h[0] for h in held]) if held else np.zeros(0, np.int64)
        row = np.repeat(np.searchsorted(self.bp, rounded), sizes)
        inc = np.repeat(np.array([h[1] for h in held], dtype=np.int64), sizes)
        # each node's step events (a job on it ending) in time order, and the level each brings
        order = np.lexsort((row, node))
        node, row, inc = node[order], row[order], inc[order]
        bounds = np.searchsorted(node, np.arange(free.size + 1))
        within = np.cumsum(inc)
        before = np.concatenate(([0], within))[bounds[:-1]]  # per node: the sum before its own
        self._node, self._row, self._inc = node, row, inc
        self._level = free[node] + within - np.repeat(before, np.diff(bounds))
        self._bounds = bounds
        self._free = free.copy()
        self._usable_from: dict[tuple[int, tuple[int, ...]], np.ndarray] = {}
        self._stops: dict[float, np.ndarray] = {}
        # (the rows of touched nodes only are written, and read)
        self._prof = buffers.take("gpus", free.size, rows, np.int64)
        # the host resources' free amounts, step events' increments, levels and touched rows
        owner = np.repeat(jobs, sizes)[order]
        self._hfree = [hfree.copy() for hfree, _ in host]
        self._hinc = [per[owner].astype(np.int64) for _, per in host]
        self._hlevel = []
        for hfree, hinc in zip(self._hfree, self._hinc, strict=True):
            hwithin = np.cumsum(hinc)
            hbefore = np.concatenate(([0], hwithin))[bounds[:-1]]
            self._hlevel.append(hfree[node] + hwithin - np.repeat(hbefore, np.diff(bounds)))
        self._hprof = [
            buffers.take(("host", i), free.size, rows, np.int64) for i in range(len(host))
        ]
        self.touched = np.zeros(free.size, dtype=bool)
        self._untouched = np.ones(free.size, dtype=bool)
        # per touched node, how often a placement changed its column; per (GPUs, host), each
        # touched node's runs of rows with them free, as of that count
        self._changed = np.zeros(free.size, dtype=np.int64)
        self._runs: dict[
            tuple[int, tuple[int, ...]], tuple[np.ndarray, np.ndarray, np.ndarray]
        ] = {}
        self._bp = self.bp.tolist()
        # per mask, GPUs per node and host amounts per node: the nodes with that much free now
        self._ready: dict[tuple[int, int, tuple[int, ...]], tuple[np.ndarray, np.ndarray]] = {}
        self.version = 0  # placements so far

    def _touch(self, nodes: np.ndarray) -> None:
        layers = [(self._prof, self._free, self._level)]
        layers += zip(self._hprof, self._hfree, self._hlevel, strict=True)
        every = np.arange(self.rows)
        for n in nodes[~self.touched[nodes]].tolist():
            lo, hi = self._bounds[n], self._bounds[n + 1]
            # a node's column: its free amount now, then the level after each of its step
            # events (in row order) from that event's row on
            step = np.searchsorted(self._row[lo:hi], every, side="right")
            for prof, free, level in layers:
                prof[n] = np.concatenate(([free[n]], level[lo:hi]))[step]
        self.touched[nodes] = True
        self._untouched[nodes] = False

    def _first_row(self, free: np.ndarray, level: np.ndarray, k: int) -> np.ndarray:
        """Per node as it was at the start of the pass: the first row from which it has `k`
        of one resource free (`rows`: never); its step events only ever add."""
        first = np.where(free >= k, 0, self.rows)
        ok = (level >= k) & (free[self._node] < k)
        np.minimum.at(first, self._node[ok], self._row[ok])
        return first

    def _from(self, k: int, host: tuple[int, ...]) -> np.ndarray:
        """Per node as it was at the start of the pass: the first row from which it has `k`
        GPUs and `host` (per host resource) free (`rows`: never)."""
        cached = self._usable_from.get((k, host))
        if cached is None:
            cached = self._first_row(self._free, self._level, k)
            for hfree, hlevel, h in zip(self._hfree, self._hlevel, host, strict=True):
                if h > 0:
                    cached = np.maximum(cached, self._first_row(hfree, hlevel, h))
            self._usable_from[(k, host)] = cached
        return cached

    def _stop(self, dur: float) -> np.ndarray:
        """Per row b: the first row at or past bp[b] + dur (the rows a job from b spans)."""
        cached = self._stops.get(dur)
        if cached is None:
            bp = self.bp
            cached = np.maximum(
                np.searchsorted(bp, bp + dur, side="left"), np.arange(1, bp.size + 1)
            )
            self._stops[dur] = cached
        return cached

    def _at(self, b: int, nodes: np.ndarray) -> np.ndarray:
        """GPUs free on `nodes` at row `b`."""
        out = self._free[nodes].copy()
        touched = self.touched[nodes]
        if touched.any():
            out[touched] = self._prof[nodes[touched], b]
        clean = ~touched
        if clean.any():
            ok = self._row <= b
            gained = np.bincount(self._node[ok], weights=self._inc[ok], minlength=self._free.size)
            out[clean] += gained[nodes[clean]].astype(np.int64)
        result: np.ndarray = out
        return result

    def fits_now(
        self, mask: np.ndarray, k: int, c: int, dur: float, host: tuple[int, ...] = ()
    ) -> bool:
        """Whether `c` nodes of `mask` have `k` GPUs (and `host`) free from now for `dur`
        seconds."""
        key = (id(mask), k, host)
        ready = self._ready.get(key)
        if ready is None or ready[0] is not mask:  # (the mask kept: its id is never reused)
            ok = mask & (self._free >= k)
            for hfree, h in zip(self._hfree, host, strict=True):
                if h > 0:
                    ok &= hfree >= h
            ready = self._ready[key] = (mask, ok)
        clean = int(np.count_nonzero(ready[1] & self._untouched))
        if clean >= c:
            return True
        dirty = (mask & self.touched).nonzero()[0]
        if not dirty.size:
            return False
        stop = self._stop(dur)[0]
        starts, ends = self._free_runs(dirty, k, host)
        # usable now: its first free run starts now and lasts the job's first rows
        enough = (starts[dirty, 0] == 0) & (ends[dirty, 0] >= stop)
        return clean + int(np.count_nonzero(enough)) >= c

    def place(
        self, mask: np.ndarray, k: int, c: int, dur: float, host: tuple[int, ...] = ()
    ) -> tuple[int, np.ndarray] | None:
        """The earliest row at which `c` nodes of `mask` have `k` GPUs (and `host`) free for
        `dur` seconds, and those nodes (the tightest first, then by node order); they are then
        taken from that row for `dur`. None: no row within the window."""
        rows = self.rows
        stop = self._stop(dur)
        clean = (mask & self._untouched).nonzero()[0]
        clean_from = self._from(k, host)[clean]
        # the clean nodes usable by each row: the first row with `c` of them is the c-th
        # smallest row they are usable from (`rows`: never)
        ordered = np.sort(clean_from)
        nth = int(ordered[c - 1]) if ordered.size >= c else rows
        dirty = (mask & self.touched).nonzero()[0]
        if dirty.size:
            starts, ends = self._free_runs(dirty, k, host)
            first, until = starts[dirty], ends[dirty]
            # a run of free rows [first, until) is usable from each of its rows b whose span
            # ends within it (stop[b] <= until): from `first` to `until`'s place in `stop`
            until = np.searchsorted(stop, until, side="right")
            live = until > first
            if c == 1:  # the first row any node is usable from
                b = min(nth, int(first[live].min()) if live.any() else rows)
                if b >= rows:
                    return None
            else:  # per row, the clean nodes usable by then and the touched ones usable then
                count = np.searchsorted(ordered, np.arange(rows), side="right")
                step = np.bincount(first[live], minlength=rows + 1)[: rows + 1]
                step -= np.bincount(until[live], minlength=rows + 1)[: rows + 1]
                count += np.cumsum(step)[:rows]
                ready = (count >= c).nonzero()[0]
                if ready.size == 0:
                    return None
                b = int(ready[0])
            usable = ((first <= b) & (b < until)).any(axis=1)
            where = np.sort(np.concatenate((clean[clean_from <= b], dirty[usable])))
        elif nth >= rows:
            return None
        else:
            b = nth
            where = clean[clean_from <= b]
        fit = where if where.size == c else where[np.argsort(self._at(b, where), kind="stable")[:c]]
        self._touch(fit)
        if b == 0:  # starts now: holds its GPUs (and CPUs, memory) for its limit
            self._prof[fit, : stop[0]] -= k
            for hprof, h in zip(self._hprof, host, strict=True):
                hprof[fit, : stop[0]] -= h
        else:  # a reservation: Slurm's backfill map holds whole nodes, at bf_resolution (its
            # GPU row below anything a job asks holds the node's CPUs and memory too)
            lo, hi = self._reserved_rows(float(self.bp[b]), dur)
            self._prof[fit, lo:hi] -= _WHOLE_NODE
        self._changed[fit] += 1
        self.version += 1
        return b, fit

    def _free_runs(
        self, dirty: np.ndarray, k: int, host: tuple[int, ...]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per node (the rows of `dirty`, touched nodes, are current): its runs of rows with
        `k` GPUs (and `host`) free, in row order, as their first rows and the rows past them
        (padded with empty runs at `rows`). Kept per (k, host) and brought up to date only for
        the nodes a placement changed since."""
        key = (k, host)
        entry = self._runs.get(key)
        rows = self.rows
        if entry is None:
            seen = np.full(self._free.size, -1, dtype=np.int64)
            empty = np.full((self._free.size, 1), rows, dtype=np.int64)
            entry = self._runs[key] = (seen, empty, empty.copy())
        seen, starts, ends = entry
        stale = dirty[seen[dirty] != self._changed[dirty]]
        if stale.size:
            ok = self._prof[stale] >= k
            for hprof, h in zip(self._hprof, host, strict=True):
                if h > 0:
                    ok &= hprof[stale] >= h
            edges = np.zeros((stale.size, rows + 2), dtype=bool)
            edges[:, 1:-1] = ok
            # where a node's rows turn free (a run's first row) and turn short again (past
            # it), alternately, node by node
            at, turn = (edges[:, 1:] != edges[:, :-1]).nonzero()
            at, first, past = at[::2], turn[::2], turn[1::2]
            per = np.bincount(at, minlength=stale.size)
            width = max(int(per.max(initial=0)), 1)
            if width > starts.shape[1]:  # room for more runs a node
                grow = np.full((starts.shape[0], width - starts.shape[1]), rows, dtype=np.int64)
                starts = np.concatenate((starts, grow), axis=1)
                ends = np.concatenate((ends, grow), axis=1)
                self._runs[key] = (seen, starts, ends)
            starts[stale] = rows
            ends[stale] = rows
            slot = np.arange(at.size) - np.repeat(np.cumsum(per) - per, per)
            starts[stale[at], slot] = first
            ends[stale[at], slot] = past
            seen[stale] = self._changed[stale]
        return starts, ends

    def _reserved_rows(self, start: float, dur: float) -> tuple[int, int]:
        """The rows a reservation from `start` for `dur` holds: from `start` rounded down to
        bf_resolution to its end rounded down (at least one resolution), as Slurm's backfill
        map records it."""
        res = self.res
        first = math.floor(start / res) * res
        last = max(math.floor((start + dur) / res) * res, first + res)
        lo = max(bisect.bisect_right(self._bp, first) - 1, 0)
        return lo, bisect.bisect_left(self._bp, last)


def replay(
    w: Workload,
    policy: Policy,
    progress: Callable[[float], None] | None = None,
    *,
    past_end: bool = False,
) -> Outcome:
    """Replay `w` under `policy`; see the module docstring for the model.

    The replay stops at the end of the data (`w.horizon_e`), where the record stops; with
    `past_end` it goes on until every job it can start has started (a what-if that delays jobs
    still starts them; a job whose run time is unknown runs for its limit)."""
    w = in_default_partition(w, policy)
    n = w.size
    nodes = _Nodes(w, policy)
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    cut = np.zeros(n, dtype=bool)
    held = np.zeros(n, dtype=bool)
    known = ~np.isnan(w.run_s)
    limit = np.empty(n)
    qos_name = _qos_names(w)
    for j in range(n):
        limit[j], held[j] = _effective_limit(w, policy, j, qos_name[j])
    held |= _over_a_cap(w, policy, qos_name)  # (`fits_limits` would never pass it either)
    run = np.where(known, w.run_s, np.where(np.isfinite(limit), limit, np.nan))
    if w.pinned is not None:  # running when the period starts: as recorded, whatever the policy
        pinned = w.pinned.astype(bool)
        fixed = pinned & known
        limit[fixed] = np.maximum(np.nan_to_num(w.limit_s[fixed], nan=0.0), run[fixed])
        held[pinned] = False  # (it started, also one still running at the end: no cap held it)
    need = np.ceil(w.gpus / np.maximum(w.n_nodes, 1)).astype(np.int64)
    count = np.maximum(w.n_nodes, 1).astype(np.int64)
    total_gpus = max(int(nodes.total.sum()), 1)
    host = _host_needs(w, nodes, count)  # (free per node, per node per job): CPUs, memory
    host_of = [tuple(int(per[j]) for _, per in host) for j in range(n)] if host else [()] * n

    def host_free(j: int, mask: np.ndarray) -> np.ndarray:
        """`mask` less the nodes without the CPUs and memory job `j` asks free now."""
        for (free, _), h in zip(host, host_of[j], strict=True):
            if h > 0:
                mask = mask & (free >= h)
        return mask

    accounts = sorted(set(w.account))
    acct_of = {a: i for i, a in enumerate(accounts)}
    acct = np.array([acct_of[a] for a in w.account], dtype=np.int64)
    user_key = [f"{a}\x00{u}" for a, u in zip(w.account, w.user, strict=True)]
    shares = np.array([policy.shares.get(a, 1.0) for a in accounts], dtype=float)
    shares_norm = shares / shares.sum() if shares.sum() > 0 else np.full(len(accounts), 1.0)
    usage = np.zeros(len(accounts))
    acct_running = np.zeros(len(accounts), dtype=np.int64)
    assocs = sorted(set(user_key))
    assoc_of = {k: i for i, k in enumerate(assocs)}
    assoc = np.array([assoc_of[k] for k in user_key], dtype=np.int64)
    assoc_acct = np.array([acct_of[k.split("\x00", 1)[0]] for k in assocs], dtype=np.int64)
    assoc_usage = np.zeros(len(assocs))
    assoc_running = np.zeros(len(assocs), dtype=np.int64)
    user_running: dict[str, int] = {}
    acct_cap = np.array([policy.account_gpu_cap.get(a, -1) for a in accounts], dtype=np.int64)
    user_cap = {a: c for a, c in policy.user_gpu_cap.items()}
    one_cap = {f"{a}\x00{u}": c for (a, u), c in policy.assoc_user_gpu_cap.items()}
    tiers = {p: pp.priority_tier for p, pp in policy.partitions.items()}
    max_tier = max([1, *tiers.values()])
    multifactor = policy.priority_type == "priority/multifactor"

    # QOS: its priority factor (its priority ÷ the highest QOS priority, as Slurm normalises
    # it), its limits, and with preempt/qos whose running jobs its jobs may preempt
    qos_list = sorted(set(qos_name) | set(policy.qos))
    qos_of = {q: i for i, q in enumerate(qos_list)}
    qid = np.array([qos_of[q] for q in qos_name], dtype=np.int64)
    rules = [policy.qos.get(q, QosPolicy()) for q in qos_list]
    qos_prio = np.array([r.priority for r in rules], dtype=float)
    top_qos = float(qos_prio.max(initial=0.0))
    qos_factor = qos_prio[qid] / top_qos if top_qos > 0 else np.zeros(n)
    qos_cap = np.array([-1 if r.gpu_cap is None else r.gpu_cap for r in rules], dtype=np.int64)
    qos_user_cap = [r.user_gpu_cap for r in rules]
    qos_limits = bool((qos_cap >= 0).any()) or any(c is not None for c in qos_user_cap)
    qos_running = np.zeros(len(qos_list), dtype=np.int64)
    qos_user_running: dict[tuple[int, str], int] = {}
    preempting = policy.preempt_type == "preempt/qos"
    named = [
        frozenset(qos_of[v] for v in r.preempt if v in qos_of) if preempting else frozenset()
        for r in rules
    ]
    victim_mode = [r.preempt_mode or policy.preempt_mode for r in rules]
    targets = [frozenset(v for v in vs if victim_mode[v] != "OFF") for vs in named]
    can_preempt = np.array([bool(targets[q]) for q in qid.tolist()], dtype=bool)
    # Slurm queues a job that may preempt another's before it: a QOS ranks by the depth of
    # the chain of QOS below it that it may preempt
    level = np.zeros(len(qos_list), dtype=np.int64)
    for _ in range(len(qos_list)):
        level = np.array(
            [max([0, *(int(level[v]) + 1 for v in vs if v != q)]) for q, vs in enumerate(named)],
            dtype=np.int64,
        )
    preempt_rank = level[qid]
    ranks_by_preempt = bool(preempt_rank.any())
    preemptions = np.zeros(n, dtype=np.int64)
    requeued_s = np.zeros(n)
    due: dict[int, float] = {}  # running job → when its end reaches the scheduler
    requeued: list[tuple[float, int]] = []  # (when it may start again, job)

    alloc: dict[int, tuple[np.ndarray, int]] = {}  # running job → (its nodes, GPUs on each)
    expected_end: dict[int, float] = {}
    ends: list[tuple[float, int]] = []
    pending: list[int] = []
    pinned = np.zeros(n, dtype=bool) if w.pinned is None else w.pinned.astype(bool)
    pins = sorted((float(w.real_start_e[j]), int(j)) for j in np.flatnonzero(pinned))
    next_pin = 0
    index = {name: i for i, name in enumerate(nodes.names)}
    order = np.array(
        [j for j in np.argsort(w.submit_e, kind="stable") if not pinned[j]], dtype=np.int64
    )
    n_queued = len(order)
    next_submit = 0
    cancels = sorted((float(w.cancel_e[j]), j) for j in range(n) if np.isfinite(w.cancel_e[j]))
    next_cancel = 0
    last_bf = -_NEVER
    dirty = False

    def fits_limits(j: int) -> bool:
        a = acct[j]
        if acct_cap[a] >= 0 and acct_running[a] + w.gpus[j] > acct_cap[a]:
            return False
        mine = user_running.get(user_key[j], 0) + int(w.gpus[j])
        own = one_cap.get(user_key[j])
        if own is not None and mine > own:
            return False
        cap = user_cap.get(w.account[j])
        if cap is not None and mine > cap:
            return False
        return not qos_limits or fits_qos(j)

    def fits_qos(j: int) -> bool:
        q = int(qid[j])
        if qos_cap[q] >= 0 and qos_running[q] + w.gpus[j] > qos_cap[q]:
            return False
        each = qos_user_cap[q]
        return each is None or qos_user_running.get((q, w.user[j]), 0) + w.gpus[j] <= each

    def within_limits(q: np.ndarray) -> np.ndarray:
        """`fits_limits` over an array of jobs."""
        a = acct[q]
        ok: np.ndarray = (acct_cap[a] < 0) | (acct_running[a] + w.gpus[q] <= acct_cap[a])
        if user_cap or one_cap or qos_limits:
            for n in np.flatnonzero(ok).tolist():
                ok[n] = fits_limits(int(q[n]))
        return ok

    def begin(j: int, t: float, chosen: np.ndarray) -> None:
        nodes.free[chosen] -= need[j]  # a pinned job may take a node below zero: as it ran
        for free, per in host:
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
        heapq.heappush(ends, (stop + lag, j))  # its GPUs free for the scheduler after `lag`
        due[j] = stop + lag
        acct_running[acct[j]] += int(w.gpus[j])
        assoc_running[assoc[j]] += int(w.gpus[j])
        user_running[user_key[j]] = user_running.get(user_key[j], 0) + int(w.gpus[j])
        if qos_limits:
            qos_running[qid[j]] += int(w.gpus[j])
            mine = (int(qid[j]), w.user[j])
            qos_user_running[mine] = qos_user_running.get(mine, 0) + int(w.gpus[j])

    def finish(j: int) -> None:
        chosen, k = alloc.pop(j)
        nodes.free[chosen] += k
        for free, per in host:
            free[chosen] += per[j]
        expected_end.pop(j, None)
        due.pop(j, None)
        acct_running[acct[j]] -= int(w.gpus[j])
        assoc_running[assoc[j]] -= int(w.gpus[j])
        user_running[user_key[j]] -= int(w.gpus[j])
        if qos_limits:
            qos_running[qid[j]] -= int(w.gpus[j])
            qos_user_running[(int(qid[j]), w.user[j])] -= int(w.gpus[j])

    def preempt_for(j: int, t: float, mask: np.ndarray) -> np.ndarray | None:
        """With preempt/qos, the nodes `j` starts on once it has preempted the running jobs it
        needs gone (None: preempting every job it may preempt would not make room). Victims
        in Slurm's preempt/qos order: the lowest QOS priority first, then the fewest nodes,
        then the youngest; taken until the job fits, and only those on the nodes it gets."""
        allowed = targets[int(qid[j])]
        found = [
            v
            for v, (on, _) in alloc.items()
            if int(qid[v]) in allowed and not pinned[v] and bool(mask[on].any())
        ]
        found.sort(key=lambda v: (qos_prio[qid[v]], int(count[v]), -float(start[v]), -v))
        free = nodes.free.copy()
        spare_host = [f.copy() for f, _ in host]  # CPUs, memory free once the victims go

        def room(hosts: list[np.ndarray]) -> np.ndarray:
            fits = mask
            for hf, h in zip(hosts, host_of[j], strict=True):
                if h > 0:
                    fits = fits & (hf >= h)
            return fits

        taken: list[int] = []
        chosen = None
        for v in found:
            on, k = alloc[v]
            free[on] += k
            for hf, (_, per) in zip(spare_host, host, strict=True):
                hf[on] += per[v]
            taken.append(v)
            chosen = _pick(free, room(spare_host), int(need[j]), int(count[j]))
            if chosen is not None:
                break
        if chosen is None:
            return None
        # only those on the nodes it gets, and of those, none the nodes can spare (the last
        # taken, the most protected, first)
        victims = [v for v in taken if np.isin(alloc[v][0], chosen).any()]
        for v in reversed(victims.copy()):
            on, k = alloc[v]
            spare = free.copy()
            spare[on] -= k
            hosts = [hf.copy() for hf in spare_host]
            for hf, (_, per) in zip(hosts, host, strict=True):
                hf[on] -= per[v]
            if (spare[chosen] >= need[j]).all() and room(hosts)[chosen].all():
                free, spare_host = spare, hosts
                victims.remove(v)
        for v in victims:
            finish(v)
            preemptions[v] += 1
            if victim_mode[int(qid[v])] == "CANCEL":
                end[v] = t
                cut[v] = False
            else:  # REQUEUE: pending again, from scratch, once Slurm's requeue delay is over
                requeued_s[v] += t - start[v]
                start[v] = end[v] = np.nan
                cut[v] = False
                submit[v], accrue_from[v] = t, t + policy.requeue_delay_s + 1.0
                heapq.heappush(requeued, (accrue_from[v], v))
        return chosen

    def classic() -> np.ndarray:
        """Per association, its account's 2^(−usage/shares) (classic fair-share)."""
        total_use = usage.sum()
        use_norm = usage / total_use if total_use > 0 else np.zeros_like(usage)
        per_account = np.power(2.0, -use_norm / np.maximum(shares_norm, 1e-12))
        factor: np.ndarray = per_account[assoc_acct]
        return factor

    def fair_tree() -> np.ndarray:
        """Per association, Fair Tree's rank ÷ associations: accounts ordered by level
        fair-share (shares ÷ usage, both among siblings), then the users within each account
        by theirs (equal shares); ties share a rank."""
        total_use = usage.sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            acct_lf = np.where(usage > 0, shares_norm / (usage / max(total_use, 1e-300)), np.inf)
        ordered: list[tuple[float, float]] = []
        for i in range(len(assocs)):
            a = assoc_acct[i]
            siblings = assoc_acct == a
            n_users = int(siblings.sum())
            used = assoc_usage[siblings].sum()
            own = assoc_usage[i]
            lf = (1.0 / n_users) / (own / used) if own > 0 and used > 0 else np.inf
            ordered.append((-acct_lf[a], -lf))
        keys = np.array(ordered, dtype=[("a", float), ("u", float)])
        n_assoc = len(assocs)
        factor = np.empty(n_assoc)
        order = np.argsort(keys, order=("a", "u"), kind="stable")
        rank = 0
        for pos, i in enumerate(order):
            if pos == 0 or keys[i] != keys[order[pos - 1]]:
                rank = pos
            factor[i] = (n_assoc - rank) / n_assoc
        return factor

    # a requeued job is submitted anew at its requeue (Slurm resets its submit time) and its
    # age accrues from when it may start again (its begin time): both start as recorded
    submit = w.submit_e.copy()
    accrue_from = w.submit_e.copy()
    tier_of = np.array([tiers.get(p, 1) for p in w.partition], dtype=np.int64) / max_tier
    size_of = w.gpus / total_gpus
    if policy.favor_small:
        size_of = 1.0 - size_of
    job_index = np.arange(n)

    # Slurm recomputes fair-share every PriorityCalcPeriod (its decay thread, which runs from
    # slurmctld's start: `boot_e`), from the usage as it is then; a job's priority in between is
    # the one of the last tick. With no period, fair-share is fresh at every pass.
    calc = policy.calc_period_s
    # slurmctld's scheduler sees a submit, or a job's end, on its next pass: batch jobs are
    # queued for its agent (a tick a second, batch_sched_delay), an end once the node's epilog
    # is complete
    lag = policy.sched_latency_s
    phase = (policy.boot_e or 0.0) % calc if calc > 0 else 0.0
    fs_cache: dict[str, Any] = {}

    def snapshot() -> None:
        fs_cache["fs"] = fair_tree() if policy.fair_tree else classic()

    def last_tick(t: float) -> float:
        """The latest fair-share tick at or before `t`."""
        return phase + math.floor((t - phase) / calc) * calc

    def ranked(t: float, depth: int) -> list[int]:
        """The first `depth` pending jobs in priority order."""
        # basic: by (submit time, job); `pending` is kept in that order (jobs arrive by it)
        if not pending or (not multifactor and not ranks_by_preempt):
            return pending[:depth]
        if not multifactor:
            queue = np.array(pending, dtype=np.int64)
            ahead: list[int] = queue[np.argsort(-preempt_rank[queue], kind="stable")].tolist()
            return ahead[:depth]
        if calc <= 0:
            snapshot()
        fs = fs_cache["fs"]
        idx = np.array(pending, dtype=np.int64)
        if policy.max_age_s:
            age = np.minimum(1.0, np.maximum(0.0, t - accrue_from[idx]) / policy.max_age_s)
        else:
            age = np.ones(idx.size)
        p = (
            policy.weight_age * age
            + policy.weight_fairshare * fs[assoc[idx]]
            + policy.weight_job_size * size_of[idx]
            + policy.weight_partition * tier_of[idx]
        )
        if policy.weight_qos and top_qos > 0:
            p = p + policy.weight_qos * qos_factor[idx]
        keys: list[np.ndarray] = [job_index[idx], submit[idx], -np.floor(p)]
        if ranks_by_preempt:
            keys.append(-preempt_rank[idx])
        by = np.lexsort(keys)[:depth]
        ranking: list[int] = idx[by].tolist()
        return ranking

    def main_pass(t: float) -> None:
        blocked: set[str] = set()
        started = []
        for j in ranked(t, policy.default_queue_depth):
            part = w.partition[j]
            if part in blocked or held[j] or not fits_limits(j):
                continue
            mask = nodes.mask(part, w.gpu_type[j])
            if host:
                mask = host_free(j, mask)
            chosen = _pick(nodes.free, mask, int(need[j]), int(count[j]))
            if chosen is None and can_preempt[j]:
                chosen = preempt_for(j, t, nodes.mask(part, w.gpu_type[j]))
            if chosen is None:
                blocked.add(part)
                continue
            begin(j, t, chosen)
            started.append(j)
        if started:
            gone = set(started)
            pending[:] = [j for j in pending if j not in gone]

    # what backfill places a job by: partition, GPU type, GPUs per node, nodes, time limit,
    # CPUs and memory per node (where they constrain)
    dur_of = np.where(np.isfinite(limit), limit, policy.bf_window_s).tolist()
    shapes: list[_Shape] = [
        (part, gtype, k, c, dur, h)
        for part, gtype, k, c, dur, h in zip(
            w.partition, w.gpu_type, need.tolist(), count.tolist(), dur_of, host_of, strict=True
        )
    ]

    fit_index: dict[_FitKey, int] = {}
    for part, gtype, k, c, _, h in shapes:
        fit_index.setdefault((part, gtype, k, c, h), len(fit_index))
    fit_keys = list(fit_index)
    fit_id = np.array([fit_index[(*sh[:4], sh[5])] for sh in shapes], dtype=np.int64)

    buffers = _Buffers()

    def backfill(t: float) -> None:
        queue = ranked(t, policy.bf_max_job_test)
        # The pass leaves nothing behind but the jobs it starts, and only a job with its GPUs
        # free now can start. So once no job from here on could still start (given what the
        # pass has reserved so far, which only ever takes GPUs away), the rest of the queue
        # needs no placing: its reservations would shield no one.
        q = np.array(queue, dtype=np.int64)
        kinds, where = np.unique(fit_id[q], return_inverse=True)
        room = np.zeros(kinds.size, dtype=bool)
        for n, kind in enumerate(kinds.tolist()):
            part, gtype, k, c, h = fit_keys[kind]
            mask = nodes.mask(part, gtype)
            for (free, _), hk in zip(host, h, strict=True):
                if hk > 0:
                    mask = mask & (free >= hk)
            room[n] = int(np.count_nonzero(mask & (nodes.free >= k))) >= c
        maybe = room[where] & ~held[q] & within_limits(q)
        hopefuls: list[int] = np.flatnonzero(maybe).tolist()  # positions in `queue`
        if not hopefuls:
            return
        plan = _Profile(t, policy, nodes.free, expected_end, alloc, host, buffers)
        dead: set[_Shape] = set()  # shapes that cannot start now
        failed: set[_Shape] = set()  # shapes with no room at all
        checked = -1  # plan.version at which hopefuls[0] was last found able to start
        started = []
        for i, j in enumerate(queue):
            while hopefuls and (hopefuls[0] < i or checked != plan.version):
                h = queue[hopefuls[0]]
                hshape = shapes[h]
                if hopefuls[0] >= i and hshape not in dead and fits_limits(h):
                    if plan.fits_now(nodes.mask(hshape[0], hshape[1]), *hshape[2:]):
                        checked = plan.version
                        break
                    dead.add(hshape)
                hopefuls.pop(0)
                checked = -1
            if not hopefuls:
                break
            if held[j] or not fits_limits(j):
                continue
            shape = shapes[j]
            if shape in failed:  # reservations only take nodes away: no room now either
                continue
            placed = plan.place(nodes.mask(shape[0], shape[1]), *shape[2:])
            if placed is None:
                failed.add(shape)
                continue
            b, fit = placed
            if b == 0:  # the profile's first row is what is free now
                begin(j, t, fit)
                started.append(j)
        if started:
            gone = set(started)
            pending[:] = [j for j in pending if j not in gone]

    def accrue(dt_s: float) -> None:
        """Fair-share usage over `dt_s` seconds: decayed, plus the GPU-seconds run."""
        decay = 0.5 ** (dt_s / policy.decay_half_life_s) if policy.decay_half_life_s else 1.0
        usage[:] = usage * decay + acct_running * dt_s
        assoc_usage[:] = assoc_usage * decay + assoc_running * dt_s

    first = [float(w.submit_e[order[0]])] if n_queued else []
    t_use = min([*first, *(p for p, _ in pins[:1])], default=w.horizon_e)
    if multifactor:
        snapshot()  # no usage yet: every association ties
    horizon = math.inf if past_end else w.horizon_e
    while True:
        candidates = []
        if next_pin < len(pins):
            candidates.append(pins[next_pin][0])
        if next_submit < n_queued:
            candidates.append(float(w.submit_e[order[next_submit]]) + lag)
        while ends and due.get(ends[0][1]) != ends[0][0]:  # a preempted job's end: gone
            heapq.heappop(ends)
        if ends:
            candidates.append(ends[0][0])
        if requeued:
            candidates.append(requeued[0][0])
        if next_cancel < len(cancels):
            candidates.append(cancels[next_cancel][0])
        if pending and dirty:
            candidates.append(max(last_bf + policy.bf_interval_s, t_use))
        if not candidates:
            break
        t = min(candidates)
        if t > horizon or t == _NEVER:
            break
        if multifactor and t > t_use:  # usage decays, and grows with the GPUs running
            tick = last_tick(t) if calc > 0 else t
            if t_use < tick < t:  # fair-share as it was at the tick
                accrue(tick - t_use)
                snapshot()
                accrue(t - tick)
            else:
                accrue(t - t_use)
                if calc > 0 and tick == t:
                    snapshot()
        t_use = t
        while ends and ends[0][0] <= t:
            when, j = heapq.heappop(ends)
            if due.get(j) != when:  # the end of a run a preemption stopped
                continue
            finish(j)
            dirty = True
        while next_pin < len(pins) and pins[next_pin][0] <= t:
            j = pins[next_pin][1]
            next_pin += 1
            on = [index[x] for x in (w.job_nodes[j] if w.job_nodes else []) if x in index]
            begin(j, t, np.array(on, dtype=np.int64))
        while next_submit < n_queued and w.submit_e[order[next_submit]] + lag <= t:
            j = int(order[next_submit])
            next_submit += 1
            if w.cancel_e[j] <= t:  # cancelled before the scheduler saw it: it never queues
                continue
            pending.append(j)
            dirty = True
        while requeued and requeued[0][0] <= t:
            _, j = heapq.heappop(requeued)
            if w.cancel_e[j] > t:  # back in the queue, in its place by its new submit time
                bisect.insort(pending, j, key=lambda x: (float(submit[x]), x))
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
        start_e=start,
        end_e=end,
        cut_by_limit=cut,
        held_by_limit=held,
        runtime_known=known,
        preemptions=preemptions,
        requeued_s=requeued_s,
    )


def within_data(w: Workload, out: Outcome) -> Outcome:
    """`out` of a replay `past_end` as the replay that stopped at the end of the data gives it:
    the events up to the end are the same, so only the starts after it go (never started)."""
    late = out.start_e > w.horizon_e
    return Outcome(
        start_e=np.where(late, np.nan, out.start_e),
        end_e=np.where(late, np.nan, out.end_e),
        cut_by_limit=out.cut_by_limit & ~late,
        held_by_limit=out.held_by_limit,
        runtime_known=out.runtime_known,
        preemptions=out.preemptions,
        requeued_s=out.requeued_s,
    )
