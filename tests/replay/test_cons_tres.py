"""CPUs and memory per node in the replay (Slurm's select/cons_tres): hand-built cases whose
outcome is known (detectors/replay/engine.py), and the node sizes the replay reads from a
`--set`, a slurm.conf and the `collect slurm-config` snapshot (detectors/replay/policy.py,
collector/sources/slurm/conf.py, detectors/replay/workload.py).

Each case's expected start times are worked out in its comment; the cases count in whole
seconds with no scheduler latency, as tests/replay/test_engine.py does."""

from __future__ import annotations

import dataclasses
import math
import random
import re

import numpy as np
import pytest

from collector.sources.slurm.conf import settings_from_slurm_conf
from collector.sources.slurm.config import collect_slurm_config
from detectors.replay.engine import Workload, replay
from detectors.replay.policy import Policy, PolicyError, apply_settings
from detectors.replay.workload import recorded_settings
from tests.replay.test_engine import FAST_BF, P0, workload
from tests.replay.test_policy import SLURM_CONF
from tests.replay.test_slurm_config import NOW, runner
from warehouse.connection import connect
from warehouse.lake import Lake

NAN = math.nan


def asking(w: Workload, cpus: list[float], mem: list[float] | None = None) -> Workload:
    """`w` with each job's CPUs and memory (MiB) over all its nodes (NaN: not recorded)."""
    return dataclasses.replace(
        w,
        cpus=np.array(cpus, dtype=float),
        mem_mib=np.array(mem if mem is not None else [NAN] * len(cpus), dtype=float),
    )


def starts(w: Workload, policy: Policy, settings: list[str] | None = None) -> list[float]:
    return [float(s) for s in replay(w, apply_settings(policy, settings or [])).start_e]


TWO_ONE_GPU_JOBS = workload(
    [{"submit": 0, "run": 100, "gpus": 1}, {"submit": 1, "run": 50, "gpus": 1}], {"n1": 8}
)


def test_a_job_holding_all_the_cpus_blocks_the_next_one_until_it_ends():
    # n1: 8 GPUs, 16 CPUs. A (1 GPU, 16 CPUs) starts at 0 and holds every CPU until 100; B
    # (1 GPU, 4 CPUs) finds 7 GPUs free but no CPU: it starts when A ends, at 100
    w = asking(TWO_ONE_GPU_JOBS, [16, 4])
    assert starts(w, P0, ["node.n1.CPUs=16"]) == [0, 100]
    # with 20 CPUs, 4 are left: B starts as it arrives
    assert starts(w, P0, ["node.n1.CPUs=20"]) == [0, 1]


def test_memory_binds_the_same_way():
    # n1: 64000 MiB. A asks 60000, B 8000: B waits for A (100); with 68000 MiB it does not
    w = asking(TWO_ONE_GPU_JOBS, [NAN, NAN], [60000, 8000])
    assert starts(w, P0, ["node.n1.RealMemory=64000"]) == [0, 100]
    assert starts(w, P0, ["node.n1.RealMemory=68000"]) == [0, 1]


def test_unknown_cpus_or_memory_leave_a_job_unconstrained():
    w = asking(TWO_ONE_GPU_JOBS, [16, 4], [60000, 8000])
    # the node's sizes not given (a lake without the config snapshot): GPUs alone decide
    assert starts(w, P0) == [0, 1]
    # the node's given, the jobs' not recorded: the same
    unrecorded = asking(TWO_ONE_GPU_JOBS, [NAN, NAN], [NAN, NAN])
    assert starts(unrecorded, P0, ["node.n1.CPUs=16", "node.n1.RealMemory=64000"]) == [0, 1]
    # a workload that carries no CPUs at all (the engine's callers before cons_tres)
    assert starts(TWO_ONE_GPU_JOBS, P0, ["node.n1.CPUs=16"]) == [0, 1]


def test_backfill_respects_cpus():
    # n1: 8 GPUs, 16 CPUs. A (4 GPUs, 12 CPUs, limit 100) runs from 0. B (8 GPUs) waits for
    # A's end and is reserved from 100. C (2 GPUs, 8 CPUs, limit 50) would end before B's
    # reservation, but only 4 CPUs are free: it cannot start now, and from 100 B holds the
    # node, so C starts when B ends (160). D (2 GPUs, 4 CPUs, limit 50) fits now: backfilled
    # at its submit (2).
    w = workload(
        [
            {"submit": 0, "run": 100, "gpus": 4},
            {"submit": 1, "run": 60, "gpus": 8},
            {"submit": 2, "run": 50, "gpus": 2},
            {"submit": 2, "run": 50, "gpus": 2},
        ],
        {"n1": 8},
    )
    w = asking(w, [12, 4, 8, 4])
    assert starts(w, FAST_BF, ["node.n1.CPUs=16"]) == [0, 100, 160, 2]
    # GPUs alone: C is backfilled at 2 as well
    assert starts(w, FAST_BF) == [0, 100, 2, 2]


def test_cpus_come_back_when_a_job_ends():
    # n1: 8 GPUs, 16 CPUs. A (1 GPU, 16 CPUs, limit 100, runs 30) leaves no CPU. B (8 GPUs,
    # 1 CPU) waits for A's GPU. C (1 GPU, 4 CPUs) cannot start before A ends (30); then the
    # main scheduler starts B (all 8 GPUs), so C waits for B (30 + 60 = 90)
    w = workload(
        [
            {"submit": 0, "run": 30, "limit": 100, "gpus": 1},
            {"submit": 1, "run": 60, "gpus": 8},
            {"submit": 2, "run": 10, "gpus": 1},
        ],
        {"n1": 8},
    )
    assert starts(asking(w, [16, 1, 4]), FAST_BF, ["node.n1.CPUs=16"]) == [0, 30, 90]


def test_a_job_on_several_nodes_asks_its_cpus_spread_over_them():
    # n1, n2: 8 GPUs and 16 CPUs each. A (1 GPU, 8 CPUs) takes n1 until 100. B asks 2 nodes,
    # 14 GPUs: 7 a node, which n1 still has. Its CPUs per node are its total ÷ 2 rounded up:
    # 16 CPUs → 8 a node, which n1 has left (starts at 1); 17 → 9, which n1 has not (100)
    w = workload(
        [{"submit": 0, "run": 100, "gpus": 1}, {"submit": 1, "run": 50, "gpus": 14, "nodes": 2}],
        {"n1": 8, "n2": 8},
    )
    cpus = ["node.n1.CPUs=16", "node.n2.CPUs=16"]
    assert starts(asking(w, [8, 16]), P0, cpus) == [0, 1]
    assert starts(asking(w, [8, 17]), P0, cpus) == [0, 100]


def test_a_job_asking_more_than_any_node_has_asks_a_whole_node():
    # the record says the job ran: asking 32 CPUs of 16-CPU nodes it is taken to ask all 16
    # (it starts at 0, not never), and B (1 CPU) waits for it (100)
    w = asking(TWO_ONE_GPU_JOBS, [32, 1])
    assert starts(w, P0, ["node.n1.CPUs=16"]) == [0, 100]


def test_a_job_goes_to_the_node_with_its_cpus():
    # n1: 4 GPUs, 4 CPUs; n2: 8 GPUs, CPUs unknown (unconstrained). A (1 GPU, 8 CPUs) may
    # only use n2 (GPUs alone, best fit would put it on n1, the tighter). B (8 GPUs, 1 CPU)
    # needs all of n2: it waits for A (100); GPUs alone it starts at once
    w = workload(
        [{"submit": 0, "run": 100, "gpus": 1}, {"submit": 1, "run": 50, "gpus": 8}],
        {"n1": 4, "n2": 8},
    )
    w = asking(w, [8, 1])
    assert starts(w, P0, ["node.n1.CPUs=4"]) == [0, 100]
    assert starts(w, P0) == [0, 1]


def test_the_live_clusters_jobs_never_run_out_of_cpus_or_memory():
    # tests/slurm_live/test_live_replay.py: 64 jobs of 1-8 GPUs on gpu-node01 (8 h100) and
    # gpu-node02 (4 a100), both 16 CPUs and 16000 MiB (tests/infra/slurm/slurm.conf.in); each
    # job asks only --gres, so Slurm gives it 1 CPU and DefMemPerCPU=1024 MiB. At most 8 jobs
    # share a node (one GPU each at least): 8 CPUs, 8192 MiB. cons_tres changes no start
    rng = random.Random(7)
    jobs = []
    for i in range(64):
        gpus = rng.choices((1, 2, 4, 8), weights=(40, 25, 25, 10))[0]
        kind = "h100" if gpus == 8 or rng.random() < 0.6 else "a100"
        jobs.append(
            {
                "submit": 0.0 if i < 48 else 45.0,
                "run": float(rng.randint(4, 16)),
                "limit": 60.0 * rng.choice((1, 2, 3)),
                "gpus": gpus,
                "type": kind,
            }
        )
    w = workload(jobs, {"gpu-node01": 8, "gpu-node02": 4})
    w = dataclasses.replace(w, node_model=["h100", "a100"])
    w = asking(w, [1] * len(jobs), [1024] * len(jobs))
    sizes = [f"node.gpu-node0{i}.{k}" for i in (1, 2) for k in ("CPUs=16", "RealMemory=16000")]
    policy = apply_settings(Policy(), ["bf_interval=2"])
    assert starts(w, policy, sizes) == starts(w, policy)


def test_node_size_settings_and_a_bad_one():
    p = apply_settings(Policy(), ["node.n1.CPUs=64", "node.n1.RealMemory=512000"])
    assert p.node_cpus == {"n1": 64} and p.node_mem_mib == {"n1": 512000}
    for bad, named in (
        ("node.n1.CPUs=0", "node.n1.CPUs=0: expected an integer ≥ 1"),
        ("node.n1.RealMemory=lots", "node.n1.RealMemory=lots: not a number"),
        ("node.n1.Cores=4", "unknown node setting 'Cores' (State, Gres, CPUs, RealMemory)"),
    ):
        with pytest.raises(PolicyError, match=re.escape(named)):
            apply_settings(Policy(), [bad])


def test_a_slurm_conf_gives_the_nodes_cpus_and_memory():
    p = apply_settings(Policy(), settings_from_slurm_conf(SLURM_CONF))
    assert p.node_cpus == {"gpu01": 64, "gpu02": 64, "gpu03": 64}
    assert p.node_mem_mib == dict.fromkeys(("gpu01", "gpu02", "gpu03"), 512000)

    conf = """
SelectType=select/cons_tres
NodeName=DEFAULT Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 RealMemory=256000
NodeName=a[1-2] Gres=gpu:h100:8
NodeName=b1 CPUs=48 Gres=gpu:4
NodeName=c1 Gres=gpu:4 RealMemory=1
"""
    p = apply_settings(Policy(), settings_from_slurm_conf(conf))
    # DEFAULT's layout: 2 sockets × 16 cores × 2 threads; b1's own CPUs win over it
    assert p.node_cpus == {"a1": 64, "a2": 64, "b1": 48, "c1": 64}
    # RealMemory=1 is Slurm's default (not configured): unknown
    assert p.node_mem_mib == {"a1": 256000, "a2": 256000, "b1": 256000}
    # memory not a consumable resource (CR_Core): no memory limit to replay
    cores_only = conf + "SelectTypeParameters=CR_Core\n"
    assert apply_settings(Policy(), settings_from_slurm_conf(cores_only)).node_mem_mib == {}
    # a line without CPUs or a layout leaves them unknown (not Slurm's default of 1)
    bare = apply_settings(Policy(), settings_from_slurm_conf("NodeName=d1 Gres=gpu:8\n"))
    assert bare.node_cpus == {} and bare.node_gres == {"d1": (8, "")}


def test_the_config_snapshot_gives_the_nodes_cpus_and_memory(tmp_path):
    # the test cluster's `scontrol show node -o`: CPUTot=16 RealMemory=16000, CR_CORE_MEMORY
    lake = tmp_path / "lake"
    collect_slurm_config(Lake.at(lake), "testcluster", runner, NOW)
    policy = apply_settings(Policy(), recorded_settings(connect(lake), "testcluster"))
    assert policy.node_cpus == {"gpu-node01": 16, "gpu-node02": 16}
    assert policy.node_mem_mib == {"gpu-node01": 16000, "gpu-node02": 16000}

    def cores_only(argv: list[str]) -> str:
        return runner(argv).replace("CR_CORE_MEMORY", "CR_CORE")

    other = tmp_path / "other"
    collect_slurm_config(Lake.at(other), "testcluster", cores_only, NOW)
    policy = apply_settings(Policy(), recorded_settings(connect(other), "testcluster"))
    assert policy.node_cpus == {"gpu-node01": 16, "gpu-node02": 16}
    assert policy.node_mem_mib == {}
