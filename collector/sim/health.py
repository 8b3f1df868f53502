"""Hardware that misbehaves: GPUs that degrade and then fail (rising corrected ECC, then an
XID 48/79/94/95, row-remap failure, node drained), thermally throttled nodes, and exporter
outages that leave gaps in the telemetry."""

from __future__ import annotations

from dataclasses import dataclass

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

    def outages(self, fleet: Fleet) -> list[Outage]:
        """Node drains that the scheduler must respect (a failed GPU takes its node out)."""
        return [Outage(int(fleet.node_of[f.gpu]), f.fail_s, f.repair_s) for f in self.failures]


def make_health(rng: np.random.Generator, fleet: Fleet, days: int) -> Health:
    """About one failing GPU per 100 GPUs a week, one hot node per 16, a few exporter gaps."""
    horizon = days * DAY_S
    n_nodes = len(fleet.nodes)
    n_fail = max(1, round(fleet.n_gpus / 100 * days / 7)) if days >= 2 else 0
    failures = []
    if n_fail:
        gpus = rng.choice(fleet.n_gpus, size=min(n_fail, fleet.n_gpus), replace=False)
        for g in sorted(int(x) for x in gpus):
            fail = float(rng.uniform(min(1.5 * DAY_S, horizon / 2), horizon - 0.1 * DAY_S))
            lead = float(rng.uniform(18, 60) * HOUR_S)
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
    return Health(failures, thermal, gaps, no_prof, resets)
