"""The Kueue replay on hand-built workloads whose outcome is known
(detectors/replay/kueue/engine.py). Each expected admission time is worked out in a comment."""

from __future__ import annotations

import math

import numpy as np
import pytest

from detectors.replay.engine import Workload
from detectors.replay.kueue.engine import KueueWorkload, replay_kueue
from detectors.replay.kueue.policy import KueuePolicy, apply_kueue_settings
from detectors.replay.metrics import calibrate, compare
from detectors.replay.policy import PolicyError

NAN = math.nan


def workloads(jobs: list[dict], horizon: float = 10_000.0, origin: float = NAN) -> KueueWorkload:
    """jobs: dicts with submit, run, gpus, cq and optionally prio (a priority class), type,
    cancel, real_start, pinned."""
    n = len(jobs)
    return KueueWorkload(
        jobs=Workload(
            job_id=[str(i) for i in range(n)],
            submit_e=np.array([j["submit"] for j in jobs], dtype=float),
            run_s=np.array([j.get("run", NAN) for j in jobs], dtype=float),
            cancel_e=np.array([j.get("cancel", math.inf) for j in jobs], dtype=float),
            limit_s=np.full(n, NAN),
            gpus=np.array([j["gpus"] for j in jobs], dtype=np.int64),
            n_nodes=np.ones(n, dtype=np.int64),
            partition=[j["cq"] for j in jobs],
            account=[j.get("account", j["cq"]) for j in jobs],
            user=["u"] * n,
            gpu_type=[j.get("type", "") for j in jobs],
            real_start_e=np.array([j.get("real_start", NAN) for j in jobs], dtype=float),
            nodes=[],
            node_gpus=np.zeros(0, dtype=np.int64),
            node_model=[],
            node_partitions={},
            horizon_e=horizon,
            pinned=np.array([j.get("pinned", False) for j in jobs]),
            origin_e=origin,
        ),
        priority_class=[j.get("prio", "") for j in jobs],
    )


def policy(*settings: str) -> KueuePolicy:
    return apply_kueue_settings(KueuePolicy(), settings)


def starts(kw: KueueWorkload, p: KueuePolicy) -> list[float]:
    return [float(s) for s in replay_kueue(kw, p).outcome.start_e]


TWO_TEAMS = (
    "clusterqueue.a.nominalQuota.nvidia.com/gpu=8",
    "clusterqueue.a.cohort=research",
    "clusterqueue.b.nominalQuota.nvidia.com/gpu=8",
    "clusterqueue.b.cohort=research",
)


def test_a_full_quota_makes_the_second_workload_wait_exactly_until_the_first_ends():
    # a: 8 GPUs. W0 (8) runs 0–100; W1 (4) waits for it, admitted at 100
    kw = workloads(
        [
            {"submit": 0, "run": 100, "gpus": 8, "cq": "a"},
            {"submit": 5, "run": 10, "gpus": 4, "cq": "a"},
        ]
    )
    assert starts(kw, policy("clusterqueue.a.nominalQuota.nvidia.com/gpu=8")) == [0, 100]


def test_a_period_starts_as_it_was_a_workload_pending_then_waits_for_those_running():
    """--since 1000: W0 (8 GPUs) ran from 900 (pinned), W1 (8) was submitted at 800 and still
    pending at 1000. W1 was admitted at 800 into a quota still empty, beside W0: 16 of 8."""
    kw = workloads(
        [
            {"submit": 700, "run": 500, "gpus": 8, "cq": "a", "pinned": True, "real_start": 900},
            {"submit": 800, "run": 100, "gpus": 8, "cq": "a"},
        ],
        origin=1000.0,
    )
    assert starts(kw, policy("clusterqueue.a.nominalQuota.nvidia.com/gpu=8")) == [900, 1400]


def test_raising_the_nominal_quota_removes_the_known_wait():
    kw = workloads(
        [
            {"submit": 0, "run": 100, "gpus": 8, "cq": "a"},
            {"submit": 5, "run": 10, "gpus": 4, "cq": "a"},
        ]
    )
    base = policy("clusterqueue.a.nominalQuota.nvidia.com/gpu=8")
    wider = apply_kueue_settings(base, ["clusterqueue.a.nominalQuota.nvidia.com/gpu=12"])
    base_out, new_out = replay_kueue(kw, base).outcome, replay_kueue(kw, wider).outcome
    assert [float(s) for s in new_out.start_e] == [0, 5]
    c = compare(kw.jobs, base_out, new_out, {"a": 1.0}, capacity_gpu_h=(1.0, 1.0))
    waits = c.waits.filter(c.waits["key"] == "a")
    # W1 waited 95 s (the p95 of 0 and 95 s, nearest rank); now nobody waits
    assert waits["base_p95_s"][0] == 95
    assert waits["new_p95_s"][0] == 0


def test_borrowing_from_an_idle_cohort_member_admits_at_once():
    # a (8) and b (8) in one cohort; b is idle: W0 asks 12 of a's 8, borrows 4 from b at once
    kw = workloads([{"submit": 0, "run": 100, "gpus": 12, "cq": "a"}])
    assert starts(kw, policy(*TWO_TEAMS)) == [0]
    # without the cohort it can never fit
    alone = policy("clusterqueue.a.nominalQuota.nvidia.com/gpu=8")
    assert math.isnan(starts(kw, alone)[0])


def test_borrowing_limit_and_lending_limit_bound_what_is_borrowed():
    kw = workloads([{"submit": 0, "run": 100, "gpus": 12, "cq": "a"}])
    capped = policy(*TWO_TEAMS, "clusterqueue.a.borrowingLimit.nvidia.com/gpu=2")
    assert math.isnan(starts(kw, capped)[0])  # 8 + 2 < 12
    lends_little = policy(*TWO_TEAMS, "clusterqueue.b.lendingLimit.nvidia.com/gpu=3")
    assert math.isnan(starts(kw, lends_little)[0])  # 8 + 3 < 12
    lends_enough = policy(*TWO_TEAMS, "clusterqueue.b.lendingLimit.nvidia.com/gpu=4")
    assert starts(kw, lends_enough) == [0]


def test_the_lender_reclaims_its_quota_by_preempting_the_borrower():
    # W0 (a, 12 GPUs) borrows 4 of b's from 0. W1 (b, 8) arrives at 50: b is owed its 8.
    # With reclaimWithinCohort=Any, W0 is preempted at 50 and W1 admitted at once; W0 requeues
    # and restarts from scratch when W1 ends at 80 (it runs its whole 100 s again: to 180). Its
    # start is its last run's, and the 50 s thrown away are requeued (its start was kept at 0:
    # it held its 12 GPUs 180 s, not 150, and waited none).
    jobs = [
        {"submit": 0, "run": 100, "gpus": 12, "cq": "a"},
        {"submit": 50, "run": 30, "gpus": 8, "cq": "b"},
    ]
    kw = workloads(jobs)
    p = policy(*TWO_TEAMS, "clusterqueue.b.preemption.reclaimWithinCohort=Any")
    out = replay_kueue(kw, p)
    assert [float(s) for s in out.outcome.start_e] == [80, 50]
    assert [float(e) for e in out.outcome.end_e] == [180, 80]
    assert out.outcome.requeued_s is not None
    assert out.outcome.requeued_s.tolist() == [50, 0]
    assert out.preemptions.tolist() == [1, 0]
    # without preemption the lender waits for the borrower to end
    out = replay_kueue(kw, policy(*TWO_TEAMS))
    assert [float(s) for s in out.outcome.start_e] == [0, 100]
    assert out.preemptions.tolist() == [0, 0]


def test_reclaim_lower_priority_spares_an_equal_priority_borrower():
    jobs = [
        {"submit": 0, "run": 100, "gpus": 12, "cq": "a", "prio": "high"},
        {"submit": 50, "run": 30, "gpus": 8, "cq": "b", "prio": "high"},
    ]
    p = policy(
        *TWO_TEAMS,
        "clusterqueue.b.preemption.reclaimWithinCohort=LowerPriority",
        "priorityclass.high=100",
    )
    assert starts(workloads(jobs), p) == [0, 100]
    jobs[0]["prio"] = "low"  # preempted at 50: it runs again from 80, when W1 is done
    assert starts(workloads(jobs), apply_kueue_settings(p, ["priorityclass.low=1"])) == [80, 50]


def test_within_cluster_queue_preemption_by_priority():
    # a: 8 GPUs. W0 (low) holds them; W1 (high, 8) arrives at 10 and preempts it
    jobs = [
        {"submit": 0, "run": 100, "gpus": 8, "cq": "a", "prio": "low"},
        {"submit": 10, "run": 20, "gpus": 8, "cq": "a", "prio": "high"},
    ]
    base = ("clusterqueue.a.nominalQuota.nvidia.com/gpu=8", "priorityclass.high=10")
    assert starts(workloads(jobs), policy(*base)) == [0, 100]
    p = policy(*base, "clusterqueue.a.preemption.withinClusterQueue=LowerPriority")
    out = replay_kueue(workloads(jobs), p)
    assert [float(s) for s in out.outcome.start_e] == [30, 10]
    assert [float(e) for e in out.outcome.end_e] == [130, 30]


def test_strict_fifo_blocks_behind_its_head_best_effort_does_not():
    # a: 8 GPUs. W0 (4) runs 0–100; W1 (8) cannot fit until 100; W2 (2) could start at 2.
    jobs = [
        {"submit": 0, "run": 100, "gpus": 4, "cq": "a"},
        {"submit": 1, "run": 50, "gpus": 8, "cq": "a"},
        {"submit": 2, "run": 10, "gpus": 2, "cq": "a"},
    ]
    quota = "clusterqueue.a.nominalQuota.nvidia.com/gpu=8"
    # BestEffortFIFO (Kueue's default): W2 goes round the blocked head at once
    assert starts(workloads(jobs), policy(quota)) == [0, 100, 2]
    # StrictFIFO: W2 waits behind W1, which runs 100–150
    strict = policy(quota, "clusterqueue.a.queueingStrategy=StrictFIFO")
    assert starts(workloads(jobs), strict) == [0, 100, 150]


def test_fair_sharing_admits_the_queue_with_the_lower_share_first():
    # a, b, c (4 GPUs each, all lent) share a cohort of 12. At 0 a runs 6 GPUs (borrows 2),
    # b runs 4: 2 GPUs are left. At 10 X (a, 2) and Y (b, 2) arrive together; only one fits.
    # Classical order: both borrow, same priority and time: X, the first, goes; Y waits for it
    # (60). Fair sharing: b's share after Y (2 of 12 borrowed) is below a's (4 of 12): Y goes.
    three = (
        *(f"clusterqueue.{q}.nominalQuota.nvidia.com/gpu=4" for q in "abc"),
        *(f"clusterqueue.{q}.cohort=all" for q in "abc"),
    )
    jobs = [
        {"submit": 0, "run": 100, "gpus": 6, "cq": "a"},
        {"submit": 0, "run": 100, "gpus": 4, "cq": "b"},
        {"submit": 10, "run": 50, "gpus": 2, "cq": "a"},
        {"submit": 10, "run": 50, "gpus": 2, "cq": "b"},
    ]
    assert starts(workloads(jobs), policy(*three)) == [0, 0, 10, 60]
    assert starts(workloads(jobs), policy(*three, "fairSharing.enable=true")) == [0, 0, 60, 10]


def test_a_cancelled_pending_workload_leaves_the_queue():
    jobs = [
        {"submit": 0, "run": 100, "gpus": 8, "cq": "a"},
        {"submit": 1, "gpus": 8, "cq": "a", "cancel": 50},
        {"submit": 2, "run": 10, "gpus": 8, "cq": "a"},
    ]
    got = starts(workloads(jobs), policy("clusterqueue.a.nominalQuota.nvidia.com/gpu=8"))
    assert got[0] == 0 and math.isnan(got[1]) and got[2] == 100


def test_a_workload_of_an_unknown_cluster_queue_is_never_admitted():
    kw = workloads([{"submit": 0, "run": 10, "gpus": 1, "cq": "nowhere"}])
    out = replay_kueue(kw, policy("clusterqueue.a.nominalQuota.nvidia.com/gpu=8"))
    assert math.isnan(out.outcome.start_e[0]) and out.unadmittable == 1


def test_the_calibration_of_a_faithful_replay_is_exact():
    jobs = [
        {"submit": 0, "run": 100, "gpus": 8, "cq": "a", "real_start": 0},
        {"submit": 5, "run": 10, "gpus": 4, "cq": "a", "real_start": 100},
    ]
    kw = workloads(jobs)
    c = calibrate(
        kw.jobs, replay_kueue(kw, policy("clusterqueue.a.nominalQuota.nvidia.com/gpu=8")).outcome
    )
    assert c.jobs == 2 and c.median_abs_start_s == 0


@pytest.mark.parametrize(
    ("setting", "names"),
    [
        ("clusterqueue.a.nominalQuota.nvidia.com/gpu=lots", "clusterqueue.a.nominalQuota"),
        ("clusterqueue.a.queueingStrategy=Random", "queueingStrategy=Random"),
        ("clusterqueue.a.preemption.reclaimWithinCohort=Sometimes", "reclaimWithinCohort"),
        ("clusterqueue.a.colour=blue", "clusterqueue.a.colour"),
        ("priorityclass.high=urgent", "priorityclass.high=urgent"),
        ("fairSharing.enable=maybe", "fairSharing.enable=maybe"),
        ("partition.gpu.MaxTime=10", "partition.gpu.MaxTime"),
        ("clusterqueue.a.fairSharing.weight=-2", "weight=-2"),
        ("nokey", "nokey"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(setting: str, names: str):
    with pytest.raises(PolicyError) as err:
        policy(setting)
    assert names in str(err.value) and "\n" not in str(err.value)


def test_a_queue_with_two_flavors_needs_the_flavor_named():
    p = policy(
        "clusterqueue.a.nominalQuota.nvidia.com/gpu@h100=8",
        "clusterqueue.a.nominalQuota.nvidia.com/gpu@a100=4",
    )
    with pytest.raises(PolicyError, match="a100"):
        apply_kueue_settings(p, ["clusterqueue.a.nominalQuota.nvidia.com/gpu=16"])
    # flavors are tried in order: a 10-GPU workload fits neither; 6 fits h100 only
    kw = workloads(
        [
            {"submit": 0, "run": 10, "gpus": 10, "cq": "a"},
            {"submit": 0, "run": 10, "gpus": 6, "cq": "a"},
        ]
    )
    got = starts(kw, p)
    assert math.isnan(got[0]) and got[1] == 0


def test_past_the_end_of_the_data_a_delayed_workload_is_still_admitted():
    # one queue of 8 GPUs, data ending at 10,000 s: the second 8-GPU workload (submitted at
    # 100) waits for the first, which runs 9,000 s, then needs 5,000 s; a third never ran in
    # the record and has no limit: admitted at 14,000, it holds its quota for good
    kw = workloads(
        [
            {"submit": 0, "run": 9000, "gpus": 8, "cq": "a"},
            {"submit": 100, "run": 5000, "gpus": 8, "cq": "a"},
            {"submit": 200, "gpus": 8, "cq": "a"},
        ]
    )
    p = policy("clusterqueue.a.nominalQuota.nvidia.com/gpu=8")
    stopped = replay_kueue(kw, p).outcome
    assert list(stopped.start_e[:2]) == [0, 9000] and math.isnan(stopped.start_e[2])
    assert math.isnan(stopped.end_e[1])  # it runs past the end of the data
    past = replay_kueue(kw, p, past_end=True).outcome
    assert list(past.start_e) == [0, 9000, 14000]
    assert list(past.end_e[:2]) == [9000, 14000] and math.isnan(past.end_e[2])
    # cut at the end of the data, it is the replay that stopped there
    from detectors.replay.engine import within_data

    cut = within_data(kw.jobs, past)
    assert list(cut.start_e[:2]) == [0, 9000] and math.isnan(cut.start_e[2])
