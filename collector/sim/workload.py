"""Jobs of the simulated cluster: workload archetypes, their arrivals and outcomes, and a
first-come-first-served scheduler that places them on free GPUs (so queue waits arise)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from collector.sim.fleet import Fleet, User

__all__ = ["ARCHETYPES", "Archetype", "Job", "make_jobs", "schedule"]

HOUR_S = 3600.0
DAY_S = 86400.0


@dataclass(frozen=True, slots=True)
class Archetype:
    """A kind of job: how often normal and wasteful users submit it, its size and run time."""

    name: str
    code: int
    weight: float
    weight_wasteful: float
    sizes: tuple[int, ...]
    size_p: tuple[float, ...]
    median_h: float
    sigma: float
    fail_p: float
    partition: str = "gpu"
    labels: tuple[str, ...] = ()  # sim_truth labels that span the whole run


ARCHETYPES: dict[str, Archetype] = {
    a.name: a
    for a in (
        Archetype("pretrain", 0, 0.0, 0.0, (16, 32, 64), (0.5, 0.35, 0.15), 20, 0.5, 0.3),
        Archetype("finetune", 1, 0.30, 0.10, (1, 2, 4, 8), (0.25, 0.25, 0.3, 0.2), 3, 0.8, 0.5),
        Archetype(
            "input_bound",
            2,
            0.12,
            0.08,
            (1, 2, 4, 8),
            (0.3, 0.3, 0.25, 0.15),
            4,
            0.7,
            0.35,
            labels=("low_efficiency",),
        ),
        Archetype("inference", 3, 0.05, 0.03, (1, 2, 4), (0.5, 0.3, 0.2), 30, 0.4, 0.1),
        Archetype(
            "notebook",
            4,
            0.10,
            0.18,
            (1, 2),
            (0.7, 0.3),
            5,
            0.5,
            0.05,
            "interactive",
            labels=("low_efficiency",),
        ),
        Archetype(
            "idle",
            5,
            0.03,
            0.15,
            (1, 2, 4, 8),
            (0.4, 0.3, 0.2, 0.1),
            4,
            0.8,
            0.1,
            labels=("idle",),
        ),
        Archetype(
            "partial", 6, 0.03, 0.15, (4, 8), (0.6, 0.4), 5, 0.6, 0.2, labels=("partial_idle",)
        ),
        Archetype("hung", 7, 0.012, 0.012, (4, 8), (0.5, 0.5), 5, 0.6, 0.0),
        Archetype(
            "memory_hold",
            8,
            0.02,
            0.08,
            (1, 2, 4),
            (0.5, 0.3, 0.2),
            6,
            0.6,
            0.05,
            labels=("memory_hold",),
        ),
        Archetype(
            "overallocated",
            9,
            0.03,
            0.10,
            (1, 2),
            (0.7, 0.3),
            8,
            0.6,
            0.1,
            labels=("overallocated",),
        ),
        Archetype("debug", 10, 0.14, 0.08, (1, 2), (0.7, 0.3), 0.3, 0.8, 0.75),
    )
}
CODE_OF = {a.name: a.code for a in ARCHETYPES.values()}


@dataclass(slots=True)
class Job:
    """One simulated job; times are seconds from the start of the simulated window."""

    job_id: int
    user: User
    archetype: Archetype
    gpus: int
    submit_s: float
    runtime_s: float  # how long it runs if nothing stops it
    time_limit_s: float
    state: str  # final state: COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL
    stranding: bool = False  # asks for a whole node's CPUs with 1-2 GPUs
    hang_s: float | None = None  # hung jobs: seconds after start when progress stops
    active_k: int = 0  # partial jobs: how many of their GPUs do work
    straggler: int = -1  # rank of a slow GPU in a multi-node job, -1 for none
    level: float = 0.5  # per-job variation of activity, 0-1
    # hard setting only (collector/sim/noise.py): a small kernel every poll_period_s for
    # poll_len_s; a service busy then resting (rest_frac of each burst_period_s); the memory
    # an idle rank of a partially idle job holds (share of the GPU)
    poll_period_s: float = 0.0
    poll_len_s: float = 0.0
    poll_phase_s: float = 0.0
    burst_period_s: float = 0.0
    rest_frac: float = 0.0
    idle_fb_frac: float = 0.006
    start_s: float | None = None
    end_s: float | None = None
    placement: list[int] = field(default_factory=list)  # fleet GPU numbers, rank order


def _round_limit(seconds: float) -> float:
    """Users ask for round limits: 30 min steps under 4 h, whole hours above; at most 3 days."""
    step = 1800.0 if seconds < 4 * HOUR_S else HOUR_S
    return float(min(3 * DAY_S, max(step, np.ceil(seconds / step) * step)))


def _draw_job(
    rng: np.random.Generator, job_id: int, user: User, pretrain_ok: bool, max_gpus: int
) -> Job:
    names = list(ARCHETYPES)
    weights = np.array(
        [
            (0.22 if pretrain_ok else 0.0)
            if n == "pretrain"
            else (ARCHETYPES[n].weight_wasteful if user.wasteful else ARCHETYPES[n].weight)
            for n in names
        ]
    )
    arch = ARCHETYPES[names[int(rng.choice(len(names), p=weights / weights.sum()))]]
    sizes = [s for s in arch.sizes if s <= max_gpus] or [1]
    size_p = np.array(arch.size_p[: len(sizes)])
    gpus = int(rng.choice(sizes, p=size_p / size_p.sum()))
    runtime = float(
        np.clip(rng.lognormal(np.log(arch.median_h * HOUR_S), arch.sigma), 300, 60 * HOUR_S)
    )
    excess = rng.random() < (0.45 if user.wasteful else 0.08)
    limit = _round_limit(runtime * (rng.uniform(6, 15) if excess else rng.uniform(1.2, 2.5)))
    runtime = min(runtime, limit)
    job = Job(job_id, user, arch, gpus, 0.0, runtime, limit, "COMPLETED", level=float(rng.random()))
    roll = rng.random()
    if arch.name == "hung":
        job.hang_s = runtime * rng.uniform(0.15, 0.5)
        job.runtime_s = limit
        job.state = "TIMEOUT"
    elif roll < arch.fail_p:
        # most failures come early (bad config, OOM at the first step); some late
        early = rng.random() < 0.75
        job.runtime_s = float(
            min(runtime, rng.exponential(600) + 30 if early else rng.uniform(0.05, 1) * runtime)
        )
        job.state = "FAILED"
    elif roll < arch.fail_p + 0.07:
        job.runtime_s = float(rng.uniform(0.05, 1) * runtime)
        job.state = "CANCELLED"
    if arch.name == "partial":
        job.active_k = int(rng.integers(1, 3))
    if arch.name == "pretrain" and rng.random() < 0.3:
        job.straggler = int(rng.integers(0, gpus))
    if arch.name == "finetune" and gpus <= 2 and rng.random() < 0.1:
        job.stranding = True
    return job


def _arrival_times(rng: np.random.Generator, n: int, days: int) -> np.ndarray:
    """Submit times with a working-day rhythm: busier 9-18 h, quieter at night and weekends."""
    horizon = days * DAY_S
    out: list[np.ndarray] = []
    got = 0
    while got < n:
        t = rng.uniform(0, horizon, size=2 * n)
        hour = (t % DAY_S) / HOUR_S
        weekday = (t // DAY_S) % 7 < 5
        w = np.where((hour >= 9) & (hour < 18), 1.0, 0.45) * np.where(weekday, 1.0, 0.55)
        keep = t[rng.random(t.size) < w]
        out.append(keep)
        got += keep.size
    return np.sort(np.concatenate(out)[:n])


def make_jobs(
    rng: np.random.Generator,
    fleet: Fleet,
    users: list[User],
    pretrain_accounts: set[str],
    days: int,
    load: float = 1.0,
) -> list[Job]:
    """Draw jobs until their GPU-time is `load` × the fleet's capacity, then give them submit times.

    The first jobs, about 18 hours of the fleet's capacity, were queued in the 6 hours before the
    window opens, so the cluster starts as busy as it is later, not empty.
    """
    capacity = fleet.n_gpus * days * DAY_S
    activity = np.array([u.activity for u in users])
    p_user = activity / activity.sum()
    max_gpus = max(1, fleet.n_gpus // 4)
    jobs: list[Job] = []
    demand = 0.0
    while demand < load * capacity:
        user = users[int(rng.choice(len(users), p=p_user))]
        job = _draw_job(rng, 1000 + len(jobs), user, user.account in pretrain_accounts, max_gpus)
        jobs.append(job)
        demand += job.gpus * job.runtime_s
    warm = 0.75 * fleet.n_gpus * DAY_S
    queued = np.cumsum([j.gpus * j.runtime_s for j in jobs])
    backlog = min(int(np.searchsorted(queued, warm)) + 1, len(jobs) // 3)
    times = np.concatenate(
        [
            np.sort(rng.uniform(-6 * HOUR_S, 0, size=backlog)),
            _arrival_times(rng, len(jobs) - backlog, days),
        ]
    )
    for job, t in zip(jobs, times, strict=True):
        job.submit_s = float(t)
    return jobs


@dataclass(frozen=True, slots=True)
class Outage:
    """A node (or one GPU) out of service: `[start_s, end_s)`; `kill` ends jobs running at start."""

    node: int
    start_s: float
    end_s: float


def schedule(jobs: list[Job], fleet: Fleet, outages: list[Outage], horizon_s: float) -> None:
    """Place jobs in submit order on the GPUs that free up first (FCFS, best fit by node).

    A multi-node job runs on nodes of one GPU model; a job on one node takes that node's model
    (an untyped `--gres=gpu:N` request), recorded as its `gpu_type`.

    A job never straddles the start of a node outage unless it was already running (then it
    ends there with NODE_FAIL). Jobs that cannot start before `horizon_s` stay pending.
    """
    per = fleet.gpus_per_node
    n_nodes = len(fleet.nodes)
    free = np.zeros((n_nodes, per))
    models = [fleet.model_of[n] for n in range(n_nodes)]
    pools = [
        np.array([n for n in range(n_nodes) if models[n] == m], dtype=np.int64)
        for m in dict.fromkeys(models)  # first seen first: the H100 nodes, then the island
    ]
    by_node: dict[int, list[Outage]] = {}
    for o in outages:
        by_node.setdefault(o.node, []).append(o)

    def shift(node: int, t: float) -> float:
        for o in by_node.get(node, ()):
            if o.start_s <= t < o.end_s:
                t = o.end_s
        return t

    for job in sorted(jobs, key=lambda j: j.submit_s):
        submit = max(job.submit_s, 0.0)
        if job.gpus > per:
            # whole nodes of one GPU model (NCCL does not span models): the pool whose
            # `need`-th node frees up first, then its earliest nodes
            need = job.gpus // per
            ready = np.array([shift(n, max(submit, free[n].max())) for n in range(n_nodes)])
            chosen = np.array([], dtype=np.int64)
            for pool in pools:
                if len(pool) < need:
                    continue
                picked = pool[np.argsort(ready[pool], kind="stable")[:need]]
                if chosen.size == 0 or ready[picked].max() < ready[chosen].max():
                    chosen = picked
            if chosen.size == 0:
                continue  # no pool of one model is large enough: it never starts
            start = float(ready[chosen].max())
            slots = [(int(n), s) for n in sorted(chosen) for s in range(per)]
        else:
            k = per if job.stranding else job.gpus
            kth = np.partition(free, k - 1, axis=1)[:, k - 1]
            ready = np.array([shift(n, max(submit, kth[n])) for n in range(n_nodes)])
            best = int(np.lexsort((-kth, ready))[0])
            start = float(ready[best])
            order = np.argsort(free[best], kind="stable")
            slots = [(best, int(s)) for s in order[: job.gpus]]
            if job.stranding:
                held = [(best, int(s)) for s in order[:per]]
        if start >= horizon_s:
            continue  # still pending when the window closes
        end = start + job.runtime_s
        for n, _ in slots:
            for o in by_node.get(n, ()):
                if start < o.start_s < end:
                    end = o.start_s
                    job.state = "NODE_FAIL"
        job.start_s, job.end_s = start, end
        job.placement = [n * per + s for n, s in slots]
        for n, s in held if job.stranding and job.gpus <= per else slots:
            free[n, s] = shift(n, end)
