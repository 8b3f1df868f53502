"""The optimised engine gives the same outcome, job for job, as the engine as first written
(tests/replay/reference_engine.py) on a simulated cluster's workload, under each kind of policy
change: the speed-ups (a backfill pass that stops once nothing more can start, shapes that
found no room skipped, untouched nodes read off their step events) change no result."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from collector.sim.runner import SimConfig, simulate_records
from detectors.replay.engine import Outcome, Workload, replay
from detectors.replay.policy import Policy, apply_settings
from detectors.replay.workload import load_workload, recorded_settings
from tests.replay.reference_engine import replay as reference_replay
from warehouse.connection import connect
from warehouse.lake import Lake


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Workload, Policy]:
    root: Path = tmp_path_factory.mktemp("reference") / "lake"
    result = simulate_records(SimConfig(gpus=96, days=3, seed=11), Lake.at(root))
    assert result.jobs > 300 and result.samples == 0
    con = connect(root, require=("jobs",))
    try:
        # the reference predates the scheduler's latency: both run without it
        policy = apply_settings(Policy(), [*recorded_settings(con, "sim"), "sched_latency=0"])
        return load_workload(con, "sim"), policy
    finally:
        con.close()


CHANGES = {
    "recorded": [],
    "multifactor fair-share": [  # the reference models classic fair-share only
        "priority.PriorityType=priority/multifactor",
        "priority.PriorityFlags=NO_FAIR_TREE",
        "priority.PriorityWeightFairshare=10000",
        "priority.PriorityWeightAge=1000",
        "priority.PriorityWeightJobSize=500",
    ],
    "account GPU cap": [
        "assoc.llm-pretrain.GrpTRES=gres/gpu=16",
        "assoc.nlp-research.MaxTRESPerUser=gres/gpu=4",
    ],
    "partition MaxTime, held": ["partition.gpu.MaxTime=04:00:00"],
    "partition MaxTime, cut": ["partition.gpu.MaxTime=02:00:00", "over_limit=cut"],
    "drained nodes": ["node.gpu-001.State=DRAIN", "node.gpu-002.State=DRAIN"],
    "tight backfill": ["bf_window=120", "bf_max_job_test=20", "bf_resolution=600"],
    # cons_tres: the simulator's jobs ask 12 CPUs and 120 GiB a GPU (a whole node's 96 CPUs
    # for those that strand GPUs); some nodes smaller than that, some unknown
    "CPUs and memory per node": [
        *(f"node.gpu-{i:03d}.CPUs=64" for i in range(1, 9)),
        *(f"node.gpu-{i:03d}.RealMemory=600000" for i in range(3, 11)),
    ],
    "CPUs and memory, tight backfill": [
        *(f"node.gpu-{i:03d}.CPUs=48" for i in range(1, 13)),
        *(f"node.gpu-{i:03d}.RealMemory=500000" for i in range(1, 13)),
        "bf_window=120",
        "bf_resolution=600",
    ],
}


@pytest.fixture(scope="module")
def optimised(recorded) -> Callable[[str], Outcome]:
    """`optimised(name)`: the optimised engine's replay under change `name`, run once per module
    (the last test reads three of the differential cases' runs again)."""
    w, base = recorded
    runs: dict[str, Outcome] = {}

    def run(name: str) -> Outcome:
        if name not in runs:
            runs[name] = replay(w, apply_settings(base, CHANGES[name]))
        return runs[name]

    return run


@pytest.mark.parametrize("name", list(CHANGES))
def test_the_optimised_engine_matches_the_reference(recorded, optimised, name):
    w, base = recorded
    policy = apply_settings(base, CHANGES[name])
    new, old = optimised(name), reference_replay(w, policy)
    for field in ("start_e", "end_e", "cut_by_limit", "runtime_known"):
        np.testing.assert_array_equal(getattr(new, field), getattr(old, field), err_msg=field)
    # the reference marks a time limit's holds only; a job asking more GPUs than a cap on it
    # allows is held for good too (it never starts in either)
    over = _over_a_cap(w, policy)
    assert np.isnan(new.start_e[over]).all()
    np.testing.assert_array_equal(new.held_by_limit, old.held_by_limit | over)
    assert np.isfinite(new.start_e).sum() > w.size // 4  # a real workload, not an empty one


def _over_a_cap(w: Workload, policy: Policy) -> np.ndarray:
    """Per job, whether its GPUs exceed its account's or its user's cap (the caps CHANGES set)."""
    return np.array(
        [
            any(
                c is not None and int(g) > c
                for c in (
                    policy.account_gpu_cap.get(a),
                    policy.user_gpu_cap.get(a),
                    policy.assoc_user_gpu_cap.get((a, u)),
                )
            )
            for g, a, u in zip(w.gpus, w.account, w.user, strict=True)
        ],
        dtype=bool,
    )


def test_cpus_and_memory_per_node_change_the_replay(recorded, optimised):
    # the differential cases above exercise cons_tres only if it binds on this workload
    w, _ = recorded
    assert w.cpus is not None and np.isfinite(w.cpus).all() and w.mem_mib is not None
    free = optimised("recorded").start_e  # the recorded policy: no change
    for name in ("CPUs and memory per node", "CPUs and memory, tight backfill"):
        bound = optimised(name).start_e
        changed = ~((free == bound) | (np.isnan(free) & np.isnan(bound)))
        assert changed.sum() > w.size // 20, name
