"""An event-driven replay of Kueue's admission of GPU workloads (kueue.x-k8s.io, v1beta1/2).

Workloads arrive at their recorded creation time in a ClusterQueue asking for N GPUs, and once
admitted run for their recorded run time. The model follows Kueue's scheduler
(`pkg/scheduler/scheduler.go`, `pkg/cache/scheduler/resource_node.go`,
`pkg/scheduler/preemption/`), for one GPU resource per flavor and one level of cohorts:

* **Quota**: a ClusterQueue's usage in a flavor fits its `nominalQuota`; past it the queue
  borrows from its cohort, what the other members leave unused of the part they lend (all of
  their nominal quota, or their `lendingLimit`), up to its own `borrowingLimit` — Kueue's
  `available()`: the guaranteed local part (nominal − lendingLimit) plus what the cohort has
  free, capped by the borrowing limit.
* **Cycles**: at every event each ClusterQueue offers its head (highest priority, then oldest);
  heads that fit without borrowing go first, then by priority and creation time (with fair
  sharing: lowest dominant resource share after admission first). A head that no longer fits
  once others were admitted in the same cycle waits for the next. Flavors are tried in order;
  the first that fits is taken.
* **Queueing strategy**: under `StrictFIFO` a head that does not fit blocks its queue; under
  `BestEffortFIFO` it is set aside (inadmissible) until quota is freed in its cohort, and the
  next workload is tried.
* **Preemption** (Kueue's classical heuristic): candidates are the admitted workloads of the
  queue itself with lower priority (`withinClusterQueue`), and those of cohort members using
  more than their nominal quota (`reclaimWithinCohort`: `Any` or `LowerPriority`) when the
  incoming workload fits in its own nominal quota; other queues' first, then lowest priority,
  then the most recently admitted. They are removed in that order until the workload fits,
  then added back in reverse while it still fits. Victims requeue and later restart from
  scratch (a victim's start and end are its last run's, the runs thrown away its
  `requeued_s`, as in the Slurm replay); the preemptor is admitted at the same instant (Kueue
  admits it once the victims are gone; no other head can take their quota in between), and a
  victim is not considered again before the next event (its pods are still terminating).
* **Fair sharing** (`fairSharing.enable`): heads ordered by their queue's dominant resource
  share (GPUs borrowed ÷ GPUs the cohort lends × 1000 ÷ weight), and preemption in the cohort
  by Kueue's strategies `LessThanOrEqualToFinalShare` then `LessThanInitialShare`.

Workloads already admitted at the start of a `--since` period hold their quota until their
recorded end and are not preempted. Nothing is simulated past the end of the data, unless the
replay is asked to go `past_end`: then it runs until every workload it can admit was admitted
(a what-if that delays a workload still admits it; a workload that never ran in the record and
has no time limit holds its quota for good once admitted). Its calibration is the same replay
cut at the end of the data (`detectors.replay.engine.within_data`).
"""

from __future__ import annotations

import heapq
import math
from bisect import insort
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from detectors.replay.engine import Outcome, Workload
from detectors.replay.kueue.policy import ClusterQueuePolicy, KueuePolicy

__all__ = ["KueueOutcome", "KueueWorkload", "replay_kueue"]

_ARRIVE, _END, _CANCEL = 1, 0, 2  # ends first at one instant: they free quota
_FIT, _PREEMPT, _NOFIT = "fit", "preempt", "nofit"
_Victim = tuple[int, str]  # an admitted workload and its ClusterQueue


@dataclass(frozen=True, slots=True)
class KueueWorkload:
    """Kueue Workloads (one per row of `jobs`; `partition` is the ClusterQueue) and the
    priority class each names ("" : none)."""

    jobs: Workload
    priority_class: list[str]


@dataclass(frozen=True, slots=True)
class KueueOutcome:
    """The replay's outcome per workload, and how often each was preempted."""

    outcome: Outcome
    preemptions: np.ndarray
    unadmittable: int  # workloads whose ClusterQueue has no GPU quota in the policy


@dataclass(slots=True)
class _Admitted:
    flavor: str
    since: float
    pinned: bool


class _Quota:
    """Usage per (ClusterQueue, flavor) and what each may still take (Kueue's resource tree,
    one cohort level)."""

    def __init__(self, policy: KueuePolicy) -> None:
        self.queues = policy.queues
        self.usage: dict[tuple[str, str], float] = {}
        self.members: dict[str, list[str]] = {}
        for name, cq in policy.queues.items():
            if cq.cohort is not None:
                self.members.setdefault(cq.cohort, []).append(name)

    def nominal(self, cq: str, flavor: str) -> float:
        q = self.queues[cq].flavors.get(flavor)
        return 0.0 if q is None else q.nominal

    def local(self, cq: str, flavor: str) -> float:
        """The part of the nominal quota the queue keeps for itself (nominal − lendingLimit)."""
        q = self.queues[cq].flavors.get(flavor)
        if q is None or q.lending_limit is None:
            return 0.0
        return max(0.0, q.nominal - q.lending_limit)

    def used(self, cq: str, flavor: str) -> float:
        return self.usage.get((cq, flavor), 0.0)

    def cohort_free(self, cohort: str, flavor: str) -> float:
        quota = used = 0.0
        for m in self.members[cohort]:
            lq = self.local(m, flavor)
            quota += self.nominal(m, flavor) - lq
            used += max(0.0, self.used(m, flavor) - lq)
        return quota - used

    def cohort_lendable(self, cohort: str) -> float:
        flavors = {f for m in self.members[cohort] for f in self.queues[m].flavors}
        return sum(
            self.nominal(m, f) - self.local(m, f) for m in self.members[cohort] for f in flavors
        )

    def available(self, cq: str, flavor: str) -> float:
        policy = self.queues[cq]
        q = policy.flavors.get(flavor)
        if q is None:
            return 0.0
        use = self.used(cq, flavor)
        if policy.cohort is None:
            return q.nominal - use
        lq = self.local(cq, flavor)
        parent = self.cohort_free(policy.cohort, flavor)
        if q.borrowing_limit is not None:
            stored = q.nominal - lq
            parent = min(stored - max(0.0, use - lq) + q.borrowing_limit, parent)
        return max(0.0, lq - use) + parent

    def add(self, cq: str, flavor: str, gpus: float) -> None:
        self.usage[(cq, flavor)] = self.used(cq, flavor) + gpus

    def share(self, cq: str, extra: float = 0.0, flavor: str = "") -> float:
        """Kueue's dominant resource share of `cq` (with `extra` GPUs more in `flavor`)."""
        policy = self.queues[cq]
        if policy.cohort is None:
            return 0.0
        borrowed = sum(
            max(0.0, self.used(cq, f) + (extra if f == flavor else 0.0) - q.nominal)
            for f, q in policy.flavors.items()
        )
        lendable = self.cohort_lendable(policy.cohort)
        if borrowed <= 0 or lendable <= 0:
            return 0.0
        if policy.weight == 0:
            return math.inf
        return borrowed * 1000.0 / lendable / policy.weight


class _Replay:
    def __init__(self, kw: KueueWorkload, policy: KueuePolicy, past_end: bool = False) -> None:
        w = kw.jobs
        self.w, self.policy = w, policy
        self.horizon = math.inf if past_end else w.horizon_e
        n = w.size
        self.prio = np.array([policy.priorities.get(c, 0) for c in kw.priority_class], np.int64)
        self.gpus: list[float] = [float(g) for g in w.gpus]
        self.quota = _Quota(policy)
        self.start = np.full(n, np.nan)
        self.end = np.full(n, np.nan)
        self.known = ~np.isnan(w.run_s)
        self.preemptions = np.zeros(n, np.int64)
        self.requeued_s = np.zeros(n)  # seconds of runs an eviction threw away
        self.token = np.zeros(n, np.int64)
        self.evicted_at = np.full(n, -math.inf)
        self.pending: dict[str, list[tuple[int, float, int]]] = {}
        self.inadmissible: dict[str, set[int]] = {}
        self.admitted: dict[str, dict[int, _Admitted]] = {}
        self.events: list[tuple[float, int, int, int]] = []
        self.unadmittable = 0

    # -- helpers ---------------------------------------------------------------------------
    def _flavors(self, j: int, cq: ClusterQueuePolicy) -> list[str]:
        want = self.w.gpu_type[j]
        if want and want in cq.flavors:
            return [want]
        return list(cq.flavors)

    def _runtime(self, j: int) -> float:
        run = float(self.w.run_s[j])
        limit = float(self.w.limit_s[j])
        if run != run:  # never ran in the record: its limit, else to the end of the data
            return limit if limit == limit else math.inf
        return min(run, limit) if limit == limit else run

    def _release_cohort(self, cq: str) -> None:
        cohort = self.policy.queues[cq].cohort
        for m in self.quota.members.get(cohort, [cq]) if cohort is not None else [cq]:
            self.inadmissible.pop(m, None)

    def _admit(self, j: int, cq: str, flavor: str, t: float, pinned: bool = False) -> None:
        self.quota.add(cq, flavor, self.gpus[j])
        self.admitted.setdefault(cq, {})[j] = _Admitted(flavor, t, pinned)
        if self.start[j] != self.start[j]:
            self.start[j] = t
        ends = t + self._runtime(j)
        self.end[j] = np.nan if ends > self.horizon or ends == math.inf else ends
        if ends <= self.horizon and ends != math.inf:
            heapq.heappush(self.events, (ends, _END, j, int(self.token[j])))

    def _evict(self, j: int, cq: str, t: float) -> None:
        a = self.admitted[cq].pop(j)
        self.quota.add(cq, a.flavor, -self.gpus[j])
        self.token[j] += 1
        self.preemptions[j] += 1
        self.evicted_at[j] = t
        # the run is thrown away (Kueue restarts it from scratch): its start and end are its
        # next run's, as the Slurm replay's requeue gives them. Kept, a workload reclaimed
        # after 1 h, queued 10 h and run 10 h held its 8 GPUs for 21 h and waited none.
        self.requeued_s[j] += t - a.since
        self.start[j] = np.nan
        self.end[j] = np.nan
        insort(self.pending.setdefault(cq, []), self._key(j))
        self._release_cohort(cq)

    def _key(self, j: int) -> tuple[int, float, int]:
        return (-int(self.prio[j]), float(self.w.submit_e[j]), j)

    # -- preemption ------------------------------------------------------------------------
    def _allowed(self, policy_name: str, j: int, victim: int) -> bool:
        if policy_name == "Any":
            return True
        if policy_name == "LowerPriority":
            return bool(self.prio[victim] < self.prio[j])
        if policy_name == "LowerOrNewerEqualPriority":
            return bool(
                self.prio[victim] < self.prio[j]
                or (
                    self.prio[victim] == self.prio[j]
                    and self.w.submit_e[victim] > self.w.submit_e[j]
                )
            )
        return False

    def _order(self, cq: str, victims: list[tuple[int, str]]) -> list[tuple[int, str]]:
        """Kueue's CandidatesOrdering: other queues first, lower priority, newest admitted."""
        return sorted(
            victims,
            key=lambda v: (
                v[1] == cq,
                int(self.prio[v[0]]),
                -self.admitted[v[1]][v[0]].since,
                v[0],
            ),
        )

    def _fits(self, j: int, cq: str, flavor: str, borrow: bool) -> bool:
        q = self.quota
        need = self.gpus[j]
        if not borrow and q.used(cq, flavor) + need > q.nominal(cq, flavor):
            return False
        return need <= q.available(cq, flavor)

    def _remove(self, victim: int, vcq: str) -> None:
        self.quota.add(vcq, self.admitted[vcq][victim].flavor, -self.gpus[victim])

    def _restore(self, victim: int, vcq: str) -> None:
        self.quota.add(vcq, self.admitted[vcq][victim].flavor, self.gpus[victim])

    def _candidates(
        self, j: int, cq: str, flavor: str
    ) -> tuple[list[_Victim], list[_Victim], list[_Victim]]:
        policy = self.policy.queues[cq]
        q = self.quota
        same = []
        if policy.within_cluster_queue != "Never":
            same = [
                (v, cq)
                for v, a in self.admitted.get(cq, {}).items()
                if a.flavor == flavor
                and not a.pinned
                and self._allowed(policy.within_cluster_queue, j, v)
            ]
        hierarchy: list[tuple[int, str]] = []
        by_priority: list[tuple[int, str]] = []
        if policy.cohort is not None and policy.reclaim_within_cohort != "Never":
            advantage = q.used(cq, flavor) + self.gpus[j] <= q.nominal(cq, flavor)
            target = hierarchy if advantage else by_priority
            for m in q.members[policy.cohort]:
                if m == cq or q.used(m, flavor) <= q.nominal(m, flavor):
                    continue
                target += [
                    (v, m)
                    for v, a in self.admitted.get(m, {}).items()
                    if a.flavor == flavor
                    and not a.pinned
                    and self._allowed(policy.reclaim_within_cohort, j, v)
                ]
        return self._order(cq, hierarchy), self._order(cq, by_priority), self._order(cq, same)

    def _classical(self, j: int, cq: str, flavor: str) -> list[tuple[int, str]]:
        q = self.quota
        hierarchy, by_priority, same = self._candidates(j, cq, flavor)
        under_nominal = q.nominal(cq, flavor) > q.used(cq, flavor)
        if (not hierarchy and not by_priority) or not under_nominal:
            attempts = [True]
        elif not hierarchy:
            attempts = [False, True]
        else:
            attempts = [True, False]
        reclaim_only = set(by_priority)  # ReclaimWithoutBorrowing: borrowWithinCohort is Never
        for borrow in attempts:
            targets: list[tuple[int, str]] = []
            for v in (*hierarchy, *by_priority, *same):
                if v[1] != cq:
                    if borrow and v in reclaim_only:
                        continue
                    if q.used(v[1], flavor) <= q.nominal(v[1], flavor):
                        continue
                self._remove(*v)
                targets.append(v)
                if self._fits(j, cq, flavor, borrow):
                    for i in range(len(targets) - 2, -1, -1):  # add back what is not needed
                        self._restore(*targets[i])
                        if self._fits(j, cq, flavor, borrow):
                            targets[i] = targets[-1]
                            targets.pop()
                        else:
                            self._remove(*targets[i])
                    for t in targets:
                        self._restore(*t)
                    return targets
            for t in targets:
                self._restore(*t)
        return []

    def _fair(self, j: int, cq: str, flavor: str) -> list[tuple[int, str]]:
        q = self.quota
        hierarchy, by_priority, same = self._candidates(j, cq, flavor)
        pool: dict[str, list[tuple[int, str]]] = {}
        for v in (*same, *hierarchy, *by_priority):
            pool.setdefault(v[1], []).append(v)
        need = self.gpus[j]
        targets: list[tuple[int, str]] = []
        q.add(cq, flavor, need)  # Kueue's fair sharing counts the incoming workload first

        def fits() -> bool:
            q.add(cq, flavor, -need)
            ok = need <= q.available(cq, flavor)
            q.add(cq, flavor, need)
            return ok

        found = False
        for strategy in ("LessThanOrEqualToFinalShare", "LessThanInitialShare"):
            live = {m: list(vs) for m, vs in pool.items() if vs}
            while live and not (found := fits()):
                m = max(live, key=lambda name: (name == cq, q.share(name), name))
                v = live[m].pop(0)
                if not live[m]:
                    del live[m]
                if m != cq:
                    if q.used(m, flavor) <= q.nominal(m, flavor):
                        live.pop(m, None)
                        continue
                    mine = q.share(cq)
                    before = q.share(m)
                    self._remove(*v)
                    after = q.share(m)
                    ok = mine <= after if strategy.startswith("LessThanOrEqual") else mine < before
                    if not ok:
                        self._restore(*v)
                        live.pop(m, None)
                        continue
                else:
                    self._remove(*v)
                targets.append(v)
                pool[m].remove(v)
            if found:
                break
        q.add(cq, flavor, -need)
        if not found:
            for t in targets:
                self._restore(*t)
            return []
        for i in range(len(targets) - 2, -1, -1):
            self._restore(*targets[i])
            if need <= q.available(cq, flavor):
                targets[i] = targets[-1]
                targets.pop()
            else:
                self._remove(*targets[i])
        for t in targets:
            self._restore(*t)
        return targets

    # -- the scheduling cycle --------------------------------------------------------------
    def _nominate(self, j: int) -> tuple[str, str, bool, list[tuple[int, str]]]:
        cq = self.w.partition[j]
        policy = self.policy.queues[cq]
        flavors = self._flavors(j, policy)
        q = self.quota
        for f in flavors:
            if self.gpus[j] <= q.available(cq, f):
                return _FIT, f, q.used(cq, f) + self.gpus[j] > q.nominal(cq, f), []
        for f in flavors:
            targets = (
                self._fair(j, cq, f) if self.policy.fair_sharing else self._classical(j, cq, f)
            )
            if targets:
                return _PREEMPT, f, q.used(cq, f) + self.gpus[j] > q.nominal(cq, f), targets
        return _NOFIT, "", False, []

    def _heads(self, t: float) -> list[int]:
        """Each queue's first workload not set aside; one evicted at `t` is not back before the
        next event (its pods are still terminating): no preemption ping-pong at one instant."""
        heads = []
        for cq, queue in self.pending.items():
            skip = self.inadmissible.get(cq, set())
            head = next(
                (k[2] for k in queue if k[2] not in skip and self.evicted_at[k[2]] != t), None
            )
            if head is not None:
                heads.append(head)
        return heads

    def _cycle(self, t: float) -> bool:
        """One scheduling cycle at `t`; whether anything changed."""
        entries = [(j, *self._nominate(j)) for j in self._heads(t)]
        if not entries:
            return False
        if self.policy.fair_sharing:
            entries.sort(
                key=lambda e: (
                    self.quota.share(self.w.partition[e[0]], self.gpus[e[0]], e[2]),
                    *self._key(e[0]),
                )
            )
        else:
            entries.sort(key=lambda e: (e[3], *self._key(e[0])))
        changed = False
        evicted: set[int] = set()
        for j, mode, flavor, _borrows, targets in entries:
            cq = self.w.partition[j]
            if mode == _NOFIT:
                if self.policy.queues[cq].queueing_strategy == "BestEffortFIFO":
                    self.inadmissible.setdefault(cq, set()).add(j)
                    changed = True
                continue
            if mode == _FIT:
                if self.gpus[j] <= self.quota.available(cq, flavor):
                    self.pending[cq].remove(self._key(j))
                    self._admit(j, cq, flavor, t)
                    changed = True
                continue
            if any(v in evicted or v not in self.admitted.get(m, {}) for v, m in targets):
                continue  # overlapping targets: the next cycle decides
            for victim in targets:
                self._remove(*victim)
            fits = self.gpus[j] <= self.quota.available(cq, flavor)
            for victim in targets:
                self._restore(*victim)
            if not fits:
                continue  # another head took the quota this cycle: no preemption in vain
            for v, m in targets:
                self._evict(v, m, t)
                evicted.add(v)
            if self.gpus[j] <= self.quota.available(cq, flavor):
                # Kueue admits the preemptor once its victims are gone; here at once, so that
                # the quota they free is not taken by another head in between
                self.pending[cq].remove(self._key(j))
                self._admit(j, cq, flavor, t)
            changed = True
        return changed

    # -- the event loop --------------------------------------------------------------------
    def run(self, progress: Callable[[float], None] | None) -> KueueOutcome:
        w = self.w
        pinned = w.pinned if w.pinned is not None else np.zeros(w.size, dtype=bool)
        for j in range(w.size):
            cq = w.partition[j]
            known = cq in self.policy.queues and self.policy.queues[cq].flavors
            if pinned[j] and known:
                begun = float(w.real_start_e[j])
                heapq.heappush(self.events, (begun, _ARRIVE, j, -1))
            elif not known:
                self.unadmittable += 1
            else:
                # a period starts as it was: a workload pending at its start joins the queue
                # then, behind those admitted before (it was admitted before them into a quota
                # still empty, and the cohort held 22 GPUs of 16)
                arrive = float(w.submit_e[j])
                if w.origin_e == w.origin_e:
                    arrive = max(arrive, w.origin_e)
                heapq.heappush(self.events, (arrive, _ARRIVE, j, 0))
                if math.isfinite(float(w.cancel_e[j])):
                    heapq.heappush(self.events, (float(w.cancel_e[j]), _CANCEL, j, 0))
        steps = 0
        while self.events and self.events[0][0] <= self.horizon:
            t = self.events[0][0]
            while self.events and self.events[0][0] == t:
                _, kind, j, token = heapq.heappop(self.events)
                cq = w.partition[j]
                if kind == _ARRIVE and token == -1:
                    flavor = self._flavors(j, self.policy.queues[cq])[0]
                    self._admit(j, cq, flavor, t, pinned=True)
                elif kind == _ARRIVE:
                    insort(self.pending.setdefault(cq, []), self._key(j))
                elif kind == _END and token == self.token[j] and j in self.admitted.get(cq, {}):
                    a = self.admitted[cq].pop(j)
                    self.quota.add(cq, a.flavor, -self.gpus[j])
                    self._release_cohort(cq)
                elif kind == _CANCEL and self._key(j) in self.pending.get(cq, []):
                    if self.start[j] != self.start[j]:  # cancelled while it had never run
                        self.pending[cq].remove(self._key(j))
            for _ in range(10 * w.size + 100):  # cycles at one instant, bounded
                if not self._cycle(t):
                    break
            steps += 1
            if progress is not None and steps % 256 == 0:
                progress(t)
        n = w.size
        outcome = Outcome(
            start_e=self.start,
            end_e=self.end,
            cut_by_limit=np.zeros(n, dtype=bool),
            held_by_limit=np.zeros(n, dtype=bool),
            runtime_known=self.known,
            requeued_s=self.requeued_s,
        )
        return KueueOutcome(outcome, self.preemptions, self.unadmittable)


def replay_kueue(
    kw: KueueWorkload,
    policy: KueuePolicy,
    progress: Callable[[float], None] | None = None,
    *,
    past_end: bool = False,
) -> KueueOutcome:
    """Replay `kw` under `policy`: when each workload is admitted and ends (NaN: not before the
    end of the data, or with `past_end` never), and how often it was preempted."""
    return _Replay(kw, policy, past_end).run(progress)
