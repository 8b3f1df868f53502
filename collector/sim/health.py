"""Hardware that misbehaves: GPUs that degrade and then fail (rising corrected ECC, then an
XID 48/79/94/95, row-remap failure, node drained), thermally throttled nodes, and exporter
outages that leave gaps in the telemetry.

The `hard` setting makes failures subtler (shorter lead, a slow and small corrected-ECC climb
drawn error by error, row remaps pending only shortly before, a bus failure announced by a few
GSP XIDs rather than ECC, now and then an XID 92 or 63 before a memory failure) and adds what
real fleets have: healthy GPUs whose corrected-ECC count is non-zero or creeps up, healthy GPUs
with a few sporadic bursts of corrected errors, driver reloads that reset the volatile counters,
and exporter outages of tens of minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from collector.sim.fleet import Fleet
from collector.sim.workload import DAY_S, HOUR_S, Outage

__all__ = ["Failure", "Health", "Span", "make_health"]


@dataclass(frozen=True, slots=True)
class Failure:
    """A GPU that degrades from `degrade_s`, fails at `fail_s` with `xid`, is back at `repair_s`."""

    gpu: int
    degrade_s: float
    fail_s: float
    repair_s: float
    xid: int  # 48 double-bit ECC, 79 fell off the bus, 94/95 contained/uncontained ECC

    @property
    def remap_failure(self) -> bool:
        return self.xid in (94, 95)


@dataclass(frozen=True, slots=True)
class Span:
    node: int
    start_s: float
    end_s: float


@dataclass(frozen=True, slots=True)
class Health:
    failures: list[Failure]
    thermal: list[Span]  # node throttled for thermal reasons
    gaps: list[Span]  # the node's exporter did not answer: no samples
    no_profiling: frozenset[int]  # nodes whose DCP profiling fields are blank
    energy_resets: dict[int, list[float]]  # GPU -> times its energy counter restarts at 0
    hard: bool = False  # noisier telemetry and subtler failures (see the module docstring)
    benign_sbe: dict[int, tuple[float, float]] = field(default_factory=dict)
    # GPU -> (corrected-ECC count at the start, its creep per day) on healthy GPUs (hard only)
    precursor_xids: list[tuple[int, float, int]] = field(default_factory=list)
    # (GPU, time, XID) non-fatal XIDs in the hours before a failure (hard only)
    sbe_steps: list[tuple[int, float, int]] = field(default_factory=list)
    # (GPU, time, errors) corrected errors added to the volatile counter at that time (hard
    # only): the slow climb of a failing GPU and the sporadic bursts of healthy ones
    driver_reloads: dict[int, list[float]] = field(default_factory=dict)
    # GPU -> times a driver reload resets its volatile ECC counters to 0 (hard only)

    def outages(self, fleet: Fleet) -> list[Outage]:
        """Node drains that the scheduler must respect (a failed GPU takes its node out)."""
        return [Outage(int(fleet.node_of[f.gpu]), f.fail_s, f.repair_s) for f in self.failures]


GSP_XIDS = (119, 120)  # GSP RPC timeout / GSP error: non-fatal, often before a bus failure
MEMORY_PRECURSOR_XIDS = (92, 63)  # high single-bit error rate; a row-remap recording event


def _climb(
    extra: np.random.Generator, f: Failure
) -> tuple[list[tuple[int, float, int]], list[tuple[int, float, int]]]:
    """A failing GPU's corrected errors (hard setting), one by one, and its memory XIDs.

    Few errors (a bus failure: 0-3; a memory failure: 4-20) at a rate that accelerates towards
    the failure (error times drawn with density ~ x^2 over the degrading span), so the first
    hours look like a healthy GPU's sporadic error.
    """
    span = f.fail_s - f.degrade_s
    n = int(extra.integers(0, 4)) if f.xid == 79 else int(extra.integers(4, 21))
    steps = [
        (f.gpu, f.degrade_s + span * float(u) ** (1 / 3), 1 + int(extra.random() < 0.15))
        for u in extra.random(n)
    ]
    xids = []
    if f.xid != 79:
        for code in MEMORY_PRECURSOR_XIDS:
            if extra.random() < 0.3:
                at = f.fail_s - float(extra.uniform(0.5, 3.0)) * HOUR_S
                xids.append((f.gpu, max(at, f.degrade_s), code))
    return steps, xids


def make_health(
    rng: np.random.Generator,
    fleet: Fleet,
    days: int,
    *,
    failure_rate: float = 1.0,
    hard: bool = False,
    hard_rng: np.random.Generator | None = None,
) -> Health:
    """About `failure_rate` failing GPUs per 100 GPUs a week, one hot node per 16, a few gaps.

    `hard_rng` draws what only the hard setting has (so the default draws stay as they were).
    """
    horizon = days * DAY_S
    n_nodes = len(fleet.nodes)
    n_fail = max(1, round(fleet.n_gpus / 100 * days / 7 * failure_rate)) if days >= 2 else 0
    failures = []
    if n_fail:
        gpus = rng.choice(fleet.n_gpus, size=min(n_fail, fleet.n_gpus), replace=False)
        for g in sorted(int(x) for x in gpus):
            fail = float(rng.uniform(min(1.5 * DAY_S, horizon / 2), horizon - 0.1 * DAY_S))
            lead = float(rng.uniform(18, 60) * HOUR_S)
            if hard:  # the same draw mapped onto 4-24 h: less warning
                lead = 4 * HOUR_S + (lead - 18 * HOUR_S) * 20 / 42
            failures.append(
                Failure(
                    gpu=g,
                    degrade_s=max(0.0, fail - lead),
                    fail_s=fail,
                    repair_s=fail + float(rng.uniform(8, 30) * HOUR_S),
                    xid=int(rng.choice([48, 79, 94, 95], p=[0.3, 0.2, 0.3, 0.2])),
                )
            )
    thermal = []
    for node in rng.choice(n_nodes, size=max(1, n_nodes // 16), replace=False):
        for day in range(days):
            if rng.random() < 0.6:  # hot afternoons
                start = day * DAY_S + rng.uniform(12, 15) * HOUR_S
                thermal.append(Span(int(node), start, start + rng.uniform(2, 5) * HOUR_S))
    gaps = []
    for _ in range(max(1, n_nodes * days // 40)):
        start = float(rng.uniform(0, horizon - HOUR_S))
        gaps.append(Span(int(rng.integers(n_nodes)), start, start + float(rng.uniform(5, 40) * 60)))
    no_prof = frozenset(
        int(n) for n in rng.choice(n_nodes, size=max(1, n_nodes // 16), replace=False)
    )
    resets: dict[int, list[float]] = {}
    for f in failures:
        resets.setdefault(f.gpu, []).append(f.repair_s)  # driver reload after the repair
    reset_gpu = int(rng.integers(fleet.n_gpus))
    resets.setdefault(reset_gpu, []).append(float(rng.uniform(0, horizon)))
    if not hard:
        return Health(failures, thermal, gaps, no_prof, resets)
    extra = hard_rng if hard_rng is not None else np.random.default_rng(0)
    failing = {f.gpu for f in failures}
    benign: dict[int, tuple[float, float]] = {}
    for g in range(fleet.n_gpus):
        if g not in failing and extra.random() < 0.08:  # healthy GPUs that log corrected errors
            creep = float(extra.uniform(0.5, 4.0)) if extra.random() < 0.4 else 0.0
            benign[g] = (float(extra.integers(1, 40)), creep)
    precursors: list[tuple[int, float, int]] = []
    for f in failures:
        if f.xid == 79:  # a bus failure is announced by a few GSP errors in its last hours
            for _ in range(int(extra.integers(1, 4))):
                at = f.fail_s - float(extra.uniform(1.2, 6.0)) * HOUR_S
                precursors.append((f.gpu, max(at, f.degrade_s), int(extra.choice(GSP_XIDS))))
    healthy = [g for g in range(fleet.n_gpus) if g not in failing]
    for _ in range(max(1, fleet.n_gpus * days // 200)):  # and some healthy GPUs have them too
        g = healthy[int(extra.integers(len(healthy)))]
        precursors.append((g, float(extra.uniform(0, horizon)), int(extra.choice(GSP_XIDS))))
    steps: list[tuple[int, float, int]] = []
    for f in failures:
        climb, memory_xids = _climb(extra, f)
        steps.extend(climb)
        precursors.extend(memory_xids)
    for g in healthy:  # a few sporadic corrected errors: one burst, now and then two
        if extra.random() < 0.15:
            for _ in range(1 + int(extra.random() < 0.3)):
                steps.append((g, float(extra.uniform(0, horizon)), int(extra.integers(1, 5))))
    reloads: dict[int, list[float]] = {}
    for f in failures:
        reloads.setdefault(f.gpu, []).append(f.repair_s)
    for g in extra.choice(fleet.n_gpus, size=max(1, fleet.n_gpus // 32), replace=False):
        reloads.setdefault(int(g), []).append(float(extra.uniform(0, horizon)))
    for _ in range(max(1, n_nodes * days // 8)):  # exporter outages of tens of minutes
        start = float(extra.uniform(0, horizon - HOUR_S))
        node = int(extra.integers(n_nodes))
        gaps.append(Span(node, start, start + float(extra.uniform(10, 60)) * 60))
    precursors.sort(key=lambda p: (p[1], p[0]))
    steps.sort(key=lambda p: (p[0], p[1]))
    return Health(
        failures,
        thermal,
        gaps,
        no_prof,
        resets,
        True,
        benign,
        precursors,
        steps,
        {g: sorted(ts) for g, ts in reloads.items()},
    )
