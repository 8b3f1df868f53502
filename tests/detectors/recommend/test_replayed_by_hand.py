"""Each Slurm-replayable recommendation's replayed deltas (detectors/recommend/replayed.py) on
a hand-built lake whose replay is worked out by hand (issue #23's acceptance): the evidence's
figures are asserted exactly, not just their direction.

The replay's clock, which the arithmetic below follows (detectors/replay/engine.py): a submit
reaches the scheduler 1 s later (`sched_latency_s`), and a job's GPUs are free for it 1 s after
the job ends. So a job submitted at s onto free GPUs starts at s + 1, and a job waiting for GPUs
that free at e starts at e + 1. Each lake records what the baseline replays (the recorded
policy: Slurm's defaults, `priority/basic`, no limits), so the calibration is exact.

Occupancy = GPU-hours run up to the end of the data ÷ (the nodes' GPUs × the span from the first
submit to the end of the data); waits are over the jobs started (both runs go past the end of
the data), p95 interpolated linearly between the sorted waits as numpy's quantile does.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from detectors.recommend.recommendation import ClusterFacts, Recommendation
from detectors.recommend.replayed import with_replayed_deltas
from tests.marts import rows as r
from warehouse.connection import connect


def _job(job_id: str, submit: float, start: float, end: float, **fields: Any) -> r.Row:
    return r.job(job_id, start, end, submit_ts=r.at(submit), **fields)


def _lake(root: Path, jobs: Sequence[r.Row], nodes: Mapping[str, int]) -> Any:
    r.land(root, "jobs", jobs)
    r.land(root, "gpus", [r.gpu(node, i) for node, n in nodes.items() for i in range(n)])
    return connect(root, require=("jobs",))


def _facts(gpus: int, end: float) -> ClusterFacts:
    return ClusterFacts(
        cluster=r.CLUSTER,
        target="slurm",
        gpus_total=gpus,
        window_start=r.at(-3600),
        window_end=r.at(end + 3600),
        data_start_e=r.at(0).timestamp(),
        data_end_e=r.at(end).timestamp(),
    )


def _rec(kind: str, scope: str, evidence: dict[str, Any]) -> Recommendation:
    return Recommendation(
        cluster=r.CLUSTER,
        kind=kind,
        scope=scope,
        target="slurm",
        evidence=evidence,
        expected_gain_gpu_h=1.0,
        gain_kind="saved",
        risk="r",
        config="c",
    )


def _replayed(con: Any, facts: ClusterFacts, rec: Recommendation) -> dict[str, Any]:
    [out] = with_replayed_deltas(con, facts, [rec])
    assert out.evidence.items() >= rec.evidence.items()  # the recommender's figures stay
    return dict(out.evidence["replay"])


def _p95(waits: Sequence[float]) -> float:
    """numpy's linear quantile at 0.95, written out: 95 % of the way along the sorted waits."""
    w = sorted(waits)
    pos = 0.95 * (len(w) - 1)
    lo = int(pos)
    return w[lo] + (pos - lo) * (w[min(lo + 1, len(w) - 1)] - w[lo])


def _assert_exact_calibration(rp: dict[str, Any], jobs: int, *, tied: bool = False) -> None:
    """The baseline replays every recorded start to the second (the lakes record it); the
    start-order rank correlation is 1, or NaN (undefined) when every job started at once."""
    cal = rp["calibration"]
    assert (cal["jobs"], cal["median_abs_start_s"], cal["p90_abs_start_s"]) == (jobs, 0.0, 0.0)
    if tied:
        assert math.isnan(cal["rank_correlation"])
    else:
        assert cal["rank_correlation"] == pytest.approx(1.0)


# --- time_limit: a partition's MaxTime ------------------------------------------------------
#
# g001, 8 GPUs, partition gpu. Recorded (and replayed under no MaxTime):
#
#   1  4 GPUs  asks 24 h  submitted 0   ran      1 – 3,601   (wait 1)
#   2  8 GPUs  asks  2 h  submitted 60  ran  3,602 – 7,202   (wait 3,542: job 1 holds half the node)
#
# MaxTime=02:00:00 (Slurm holds a job asking more than MaxTime: PartitionTimeLimit): job 1 never
# starts (held), so the 8-GPU job 2 starts at 61, 3,541 s earlier, and runs 61 – 3,661.
# Data end 7,202: capacity 8 × 7,202 s. Baseline GPU-s 4 × 3,600 + 8 × 3,600; proposal 8 × 3,600.


@pytest.fixture(scope="module")
def time_limit_con(tmp_path_factory) -> Iterator[Any]:
    jobs = [
        _job("1", 0, 1, 3601, gpus=4, time_limit_s=86400),
        _job("2", 60, 3602, 7202, gpus=8, time_limit_s=7200),
    ]
    con = _lake(tmp_path_factory.mktemp("time-limit"), jobs, {"g001": 8})
    yield con
    con.close()


def test_lowering_max_time_lets_the_waiting_8_gpu_job_start_3541_s_earlier(time_limit_con):
    rec = _rec("time_limit", "partition=gpu", {"max_time_s": 7200.0})
    rp = _replayed(time_limit_con, _facts(8, 7202), rec)
    assert rp["settings"] == ["partition.gpu.MaxTime=02:00:00"] and rp["assumed"] == []
    assert rp["jobs"] == 2
    assert rp["jobs_started"] == {"baseline": 2, "proposal": 1}
    assert rp["jobs_held"] == 1 and rp["jobs_cut"] == 0 and rp["gpu_h_cut"] == 0.0
    # waits: baseline (1, 3,542), proposal (1,) — job 2's alone
    assert rp["wait_p50_s"] == {"baseline": (1 + 3542) / 2, "proposal": 1.0}
    assert rp["wait_p95_s"] == pytest.approx({"baseline": _p95([1, 3542]), "proposal": 1.0})
    assert rp["wait_p95_s"]["baseline"] == pytest.approx(1 + 0.95 * 3541)
    capacity = 8 * 7202
    assert rp["occupancy"] == pytest.approx(
        {"baseline": (4 * 3600 + 8 * 3600) / capacity, "proposal": 8 * 3600 / capacity}
    )
    _assert_exact_calibration(rp, 2)


# --- time_limit through backfill: jobs with no limit of their own get MaxTime --------------
#
# g001, 8 GPUs, no job asked for a time limit (UNLIMITED). Recorded (and replayed as such):
#
#   1  4 GPUs  submitted 0    ran     1 – 3,601  (wait 1)
#   2  8 GPUs  submitted 60   ran 7,322 – 9,122  (wait 7,262)
#   3  4 GPUs  submitted 120  ran   121 – 7,321  (wait 1)
#
# Unlimited, job 1 never ends as backfill sees it: job 2 gets no reservation, and job 3
# backfills onto the free half of the node at 121 (job 2 blocks the partition for the main
# scheduler), so job 2 waits for it too. With MaxTime=02:00:00 every job's limit is 2 h (none
# is cut: job 3 runs exactly 2 h): job 2 is reserved the node when job 1's limit ends (7,201),
# job 3 (121 + 7,200 = 7,321) would overrun that and is not backfilled, job 2 starts when job
# 1 ends (3,602: 3,720 s earlier) and job 3 after job 2 (5,403). Data end 9,122; job 3's run
# is counted up to it (4 × 3,719 GPU-s).


@pytest.fixture(scope="module")
def backfill_con(tmp_path_factory) -> Iterator[Any]:
    jobs = [
        _job("1", 0, 1, 3601, gpus=4),
        _job("2", 60, 7322, 9122, gpus=8),
        _job("3", 120, 121, 7321, gpus=4),
    ]
    con = _lake(tmp_path_factory.mktemp("backfill"), jobs, {"g001": 8})
    yield con
    con.close()


def test_max_time_gives_the_8_gpu_job_a_reservation_it_starts_3720_s_earlier(backfill_con):
    rec = _rec("time_limit", "partition=gpu", {"max_time_s": 7200.0})
    rp = _replayed(backfill_con, _facts(8, 9122), rec)
    assert rp["settings"] == ["partition.gpu.MaxTime=02:00:00"]
    assert rp["jobs_started"] == {"baseline": 3, "proposal": 3}
    assert rp["jobs_held"] == 0 and rp["jobs_cut"] == 0 and rp["gpu_h_cut"] == 0.0
    base, new = [1, 7262, 1], [1, 3542, 5283]
    assert rp["wait_p50_s"] == {"baseline": 1.0, "proposal": 3542.0}
    assert rp["wait_p95_s"] == pytest.approx({"baseline": _p95(base), "proposal": _p95(new)})
    capacity = 8 * 9122
    assert rp["occupancy"] == pytest.approx(
        {
            "baseline": (4 * 3600 + 8 * 1800 + 4 * 7200) / capacity,
            "proposal": (4 * 3600 + 8 * 1800 + 4 * 3719) / capacity,
        }
    )
    _assert_exact_calibration(rp, 3)


# --- gpu_cap: an account's GrpTRES, one user's ----------------------------------------------
#
# g001, 8 GPUs. Recorded (and replayed with no cap):
#
#   1  physics/alice  4 GPUs  submitted 0    ran     1 – 3,601  (wait 1)
#   2  physics/alice  4 GPUs  submitted 0    ran     1 – 3,601  (wait 1)
#   3  chem/bob       4 GPUs  submitted 600  ran 3,602 – 7,202  (wait 3,002)
#
# A 4-GPU cap on physics (or on alice, its only user): job 2 stays pending (AssocGrpGRES, which
# does not block the partition for others) until job 1's GPUs free at 3,602; chem's job 3 starts
# when the scheduler sees it, at 601 (3,001 s earlier). Waits (1, 3,602, 1); nothing is held or
# cut; the same 12 GPU-h run, so occupancy is unchanged.


@pytest.fixture(scope="module")
def gpu_cap_con(tmp_path_factory) -> Iterator[Any]:
    jobs = [
        _job("1", 0, 1, 3601, gpus=4, account="physics", user="alice"),
        _job("2", 0, 1, 3601, gpus=4, account="physics", user="alice"),
        _job("3", 600, 3602, 7202, gpus=4, account="chem", user="bob"),
    ]
    con = _lake(tmp_path_factory.mktemp("gpu-cap"), jobs, {"g001": 8})
    yield con
    con.close()


@pytest.mark.parametrize(
    ("scope", "setting"),
    [
        ("account=physics", "assoc.physics.GrpTRES=gres/gpu=4"),
        ("user=alice,account=physics", "assoc.physics.alice.GrpTRES=gres/gpu=4"),
    ],
)
def test_a_gpu_cap_lets_another_accounts_job_start_3001_s_earlier(gpu_cap_con, scope, setting):
    rp = _replayed(gpu_cap_con, _facts(8, 7202), _rec("gpu_cap", scope, {"cap_gpus": 4}))
    assert rp["settings"] == [setting] and rp["assumed"] == []
    assert rp["jobs_started"] == {"baseline": 3, "proposal": 3}
    assert rp["jobs_held"] == 0 and rp["jobs_cut"] == 0
    # waits: baseline (1, 1, 3,002), proposal (1, 3,602, 1)
    assert rp["wait_p50_s"] == {"baseline": 1.0, "proposal": 1.0}
    assert rp["wait_p95_s"] == pytest.approx(
        {"baseline": _p95([1, 1, 3002]), "proposal": _p95([1, 1, 3602])}
    )
    assert rp["wait_p95_s"]["proposal"] == pytest.approx(1 + 0.9 * 3601)
    same = 3 * 4 * 3600 / (8 * 7202)
    assert rp["occupancy"] == pytest.approx({"baseline": same, "proposal": same})
    _assert_exact_calibration(rp, 3)


# --- fairshare_weight: the accounts' Shares, under multifactor priority ---------------------
#
# g001, 8 GPUs; the recorded priority is basic, so both runs assume multifactor with
# PriorityWeightFairshare=10000, PriorityWeightAge=1000 (age adds at most 1000 × 4,203 s ÷ 7 d
# ≈ 7 here: it cannot outweigh fair-share's 5,000 step between two associations under Fair Tree).
#
#   1  physics  4 GPUs  submitted 0    ran     1 – 3,601
#   2  chem     4 GPUs  submitted 0    ran     1 – 1,801
#   3  physics  8 GPUs  submitted 60   ran 4,203 – 4,803  (wait 4,143)
#   4  chem     8 GPUs  submitted 120  ran 3,602 – 4,202  (wait 3,482)
#
# Jobs 3 and 4 both need the whole node, free at 3,602. Fair-share was last computed at the
# 3,600 s tick (PriorityCalcPeriod 5 min; T0 is midnight): physics had used ~2× chem's
# GPU-seconds (4 × 3,599 against 4 × 1,800). With equal shares chem's level fair-share is the
# higher, so job 4 goes first. The recommendation's shares, physics 0.8 and chem 0.2 of the
# accounts' total (2, one share each: Shares=1.6 and 0.4), make physics' the higher
# (0.8 ÷ 2/3 = 1.2 against 0.2 ÷ 1/3 = 0.6): job 3 starts at 3,602 (601 s earlier) and job 4 at
# 4,203 (601 s later). Waits (1, 1, 3,542, 4,083).


@pytest.fixture(scope="module")
def fairshare_con(tmp_path_factory) -> Iterator[Any]:
    jobs = [
        _job("1", 0, 1, 3601, gpus=4, account="physics"),
        _job("2", 0, 1, 1801, gpus=4, account="chem"),
        _job("3", 60, 4203, 4803, gpus=8, account="physics"),
        _job("4", 120, 3602, 4202, gpus=8, account="chem"),
    ]
    con = _lake(tmp_path_factory.mktemp("fairshare"), jobs, {"g001": 8})
    yield con
    con.close()


def test_a_fair_share_change_reorders_two_queued_jobs_by_601_s(fairshare_con):
    evidence = {
        "accounts": [
            {"account": "physics", "new_share": 0.8},
            {"account": "chem", "new_share": 0.2},
        ],
        "flagged": ["physics", "chem"],
    }
    rp = _replayed(fairshare_con, _facts(8, 4803), _rec("fairshare_weight", "cluster", evidence))
    assert rp["assumed"] == [
        "priority.PriorityType=priority/multifactor",
        "priority.PriorityWeightFairshare=10000",
        "priority.PriorityWeightAge=1000",
    ]
    assert rp["settings"] == ["assoc.physics.Shares=1.6", "assoc.chem.Shares=0.4"]
    assert rp["jobs_started"] == {"baseline": 4, "proposal": 4}
    assert rp["jobs_held"] == 0 and rp["jobs_cut"] == 0
    base, new = [1, 1, 4143, 3482], [1, 1, 3542, 4083]
    assert rp["wait_p50_s"] == {"baseline": (1 + 3482) / 2, "proposal": (1 + 3542) / 2}
    assert rp["wait_p95_s"] == pytest.approx({"baseline": _p95(base), "proposal": _p95(new)})
    # the same GPU-seconds either way, in order: 4 × 3,600 + 4 × 1,800 + 8 × 600 + 8 × 600
    same = (4 * 3600 + 4 * 1800 + 2 * 8 * 600) / (8 * 4803)
    assert rp["occupancy"] == pytest.approx({"baseline": same, "proposal": same})
    _assert_exact_calibration(rp, 4)


# --- drain_node: node State=DRAIN -----------------------------------------------------------
#
# g001 and g002, 4 GPUs each. Recorded (and replayed with both nodes):
#
#   1  4 GPUs  submitted 0  ran 1 – 3,601  (wait 1)
#   2  4 GPUs  submitted 0  ran 1 – 1,801  (wait 1)
#
# Draining g002 leaves one node: job 1 (first by job number) starts at 1, job 2 waits until its
# GPUs free at 3,602: 3,601 s later, past the end of the data (3,601), so it adds no GPU-hours
# there. Capacity 8 GPUs × 3,601 s (the recorded nodes: a drained node is lost capacity).


@pytest.fixture(scope="module")
def drain_con(tmp_path_factory) -> Iterator[Any]:
    jobs = [
        _job("1", 0, 1, 3601, gpus=4, nodes=["g001"]),
        _job("2", 0, 1, 1801, gpus=4, nodes=["g002"]),
    ]
    con = _lake(tmp_path_factory.mktemp("drain"), jobs, {"g001": 4, "g002": 4})
    yield con
    con.close()


def test_draining_a_node_delays_the_job_it_ran_by_3601_s(drain_con):
    rec = _rec("drain_node", "node=g002", {"hw_events": 3})
    rp = _replayed(drain_con, _facts(8, 3601), rec)
    assert rp["settings"] == ["node.g002.State=DRAIN"] and rp["assumed"] == []
    assert rp["jobs_started"] == {"baseline": 2, "proposal": 2}
    assert rp["jobs_held"] == 0 and rp["jobs_cut"] == 0
    assert rp["wait_p50_s"] == {"baseline": 1.0, "proposal": (1 + 3602) / 2}
    assert rp["wait_p95_s"] == pytest.approx({"baseline": 1.0, "proposal": _p95([1, 3602])})
    capacity = 8 * 3601
    assert rp["occupancy"] == pytest.approx(
        {"baseline": (4 * 3600 + 4 * 1800) / capacity, "proposal": 4 * 3600 / capacity}
    )
    _assert_exact_calibration(rp, 2, tied=True)
