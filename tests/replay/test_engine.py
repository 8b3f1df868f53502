"""The replay engine on hand-built workloads whose outcome is known (detectors/replay/engine.py).

Every case is small enough to schedule by hand; the expected start times in each test are
worked out in its comment."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import polars as pl
import pytest

from detectors.recommend.replayed import wait_quantiles
from detectors.replay.engine import Workload, replay, within_data
from detectors.replay.metrics import (
    calibrate,
    compare,
    slurm_capacity_gpu_h,
    slurm_entitlement,
)
from detectors.replay.policy import Policy, PolicyError, apply_settings
from detectors.replay.workload import check_changes

NAN = math.nan


# The hand-built cases count in whole seconds, with no scheduler latency (Slurm's second or so
# from a submit or an end to the pass that sees it; its own test below).
P0 = Policy(sched_latency_s=0.0)


def workload(
    jobs: list[dict], nodes: dict[str, int], horizon: float = 10_000.0, pinned: bool = False
) -> Workload:
    """jobs: dicts with submit, run, gpus and optionally limit, nodes, account, user, partition,
    type, real_start, cancel."""
    return Workload(
        job_id=[str(i) for i in range(len(jobs))],
        submit_e=np.array([j["submit"] for j in jobs], dtype=float),
        run_s=np.array([j.get("run", NAN) for j in jobs], dtype=float),
        cancel_e=np.array([j.get("cancel", math.inf) for j in jobs], dtype=float),
        limit_s=np.array([j.get("limit", j.get("run", NAN)) for j in jobs], dtype=float),
        gpus=np.array([j["gpus"] for j in jobs], dtype=np.int64),
        n_nodes=np.array([j.get("nodes", 1) for j in jobs], dtype=np.int64),
        partition=[j.get("partition", "gpu") for j in jobs],
        account=[j.get("account", "a") for j in jobs],
        user=[j.get("user", "u") for j in jobs],
        gpu_type=[j.get("type", "") for j in jobs],
        real_start_e=np.array([j.get("real_start", NAN) for j in jobs], dtype=float),
        nodes=list(nodes),
        node_gpus=np.array(list(nodes.values()), dtype=np.int64),
        node_model=["h100"] * len(nodes),
        node_partitions={},
        horizon_e=horizon,
        pinned=np.array([j.get("pinned", False) for j in jobs]) if pinned else None,
        job_nodes=[j.get("on", []) for j in jobs] if pinned else None,
    )


def starts(w: Workload, policy: Policy | None = None) -> list[float]:
    return [float(s) for s in replay(w, policy or P0).start_e]


FAST_BF = apply_settings(P0, ["bf_interval=1", "bf_resolution=1"])


def test_first_come_first_served_on_one_node():
    # 8 GPUs: A holds all until 100; B (8) waits for it, then C (8) for B
    w = workload(
        [
            {"submit": 0, "run": 100, "gpus": 8},
            {"submit": 1, "run": 50, "gpus": 8},
            {"submit": 2, "run": 10, "gpus": 8},
        ],
        {"n1": 8},
    )
    assert starts(w) == [0, 100, 150]


def test_backfill_starts_a_short_job_that_does_not_delay_the_reserved_one():
    # A holds 4 of 8 GPUs until its limit 100; B (8 GPUs) is reserved from 100. C (2 GPUs,
    # limit 50) ends before 100: backfilled at once. D (2 GPUs, limit 200) would delay B: it
    # starts when B ends (100 + 60), although GPUs are free before.
    w = workload(
        [
            {"submit": 0, "run": 100, "gpus": 4},
            {"submit": 1, "run": 60, "gpus": 8},
            {"submit": 2, "run": 50, "gpus": 2},
            {"submit": 3, "run": 200, "gpus": 2},
        ],
        {"n1": 8},
    )
    assert starts(w, FAST_BF) == [0, 100, 2, 160]


def test_backfill_runs_every_bf_interval_not_at_every_event():
    # as above, with Slurm's default bf_interval of 30 s: the pass at 1 s (B queued) finds C not
    # yet submitted; C waits for the next pass, at 31 s
    w = workload(
        [
            {"submit": 0, "run": 100, "gpus": 4},
            {"submit": 1, "run": 60, "gpus": 8},
            {"submit": 2, "run": 50, "gpus": 2},
        ],
        {"n1": 8},
    )
    assert starts(w, apply_settings(P0, ["bf_resolution=1"])) == [0, 100, 31]


def test_a_lower_max_time_lets_a_waiting_8_gpu_job_start_earlier_by_the_time_it_cuts():
    # A asks for 1,000 s and runs them; B (8 GPUs) waits for it. With MaxTime 500 s and jobs
    # resubmitted within it (cut), A ends at 500 and B starts 500 s earlier; A loses 500 s × 8.
    jobs = [
        {"submit": 0, "run": 1000, "gpus": 8, "limit": 1000},
        {"submit": 1, "run": 100, "gpus": 8, "limit": 100},
    ]
    w = workload(jobs, {"n1": 8})
    base = replay(w, P0)
    cut = replay(w, apply_settings(P0, ["partition.gpu.MaxTime=00:08:20", "over_limit=cut"]))

    assert base.start_e[1] - cut.start_e[1] == 500
    assert cut.cut_by_limit.tolist() == [True, False]
    c = compare(w, base, cut, {"a": 1.0}, capacity_gpu_h=(8 * 2000 / 3600,) * 2)
    assert c.cut_jobs == 1 and c.cut_gpu_h == pytest.approx(500 * 8 / 3600)


def test_a_comparison_where_one_replay_starts_no_job_still_compares_its_waits():
    # MaxTime below every job's limit holds them all: the what-if starts none. Its waits are
    # then an empty table, which must still join the recorded policy's by account and size
    # (`gpuledger detect` failed on an 8-GPU lake with a polars SchemaError there).
    jobs = [
        {"submit": 0, "run": 1000, "gpus": 8, "limit": 1000},
        {"submit": 1, "run": 100, "gpus": 8, "limit": 100},
    ]
    w = workload(jobs, {"n1": 8})
    base = replay(w, P0)
    held = replay(w, apply_settings(P0, ["partition.gpu.MaxTime=00:00:50"]))
    assert np.isnan(held.start_e).all()

    c = compare(w, base, held, {"a": 1.0}, capacity_gpu_h=(8 * 2000 / 3600,) * 2)

    by_account = c.waits.filter(pl.col("group") == "account")
    assert by_account["key"].to_list() == ["a"]
    assert by_account["base_jobs"].to_list() == [2]
    assert by_account["new_jobs"].to_list() in ([0], [None])


def test_a_job_asking_more_than_max_time_stays_pending_as_slurm_holds_it():
    jobs = [
        {"submit": 0, "run": 1000, "gpus": 8, "limit": 1000},
        {"submit": 1, "run": 100, "gpus": 8, "limit": 100},
    ]
    out = replay(workload(jobs, {"n1": 8}), apply_settings(P0, ["partition.gpu.MaxTime=10"]))

    assert np.isnan(out.start_e[0]) and out.held_by_limit.tolist() == [True, False]
    assert out.start_e[1] == 1


def test_an_account_gpu_cap_runs_its_jobs_one_after_another():
    # two 8-GPU nodes; account x submits three 8-GPU jobs. Uncapped: two at 0, one at 100.
    # GrpTRES=gres/gpu=8: one at a time.
    jobs = [{"submit": 0, "run": 100, "gpus": 8, "account": "x"} for _ in range(3)]
    w = workload(jobs, {"n1": 8, "n2": 8})

    assert starts(w) == [0, 0, 100]
    assert starts(w, apply_settings(P0, ["assoc.x.GrpTRES=gres/gpu=8"])) == [0, 100, 200]


def test_fair_share_puts_the_account_that_used_less_first():
    # h runs 8 GPUs from 0 to 100; at 100 h's second job (submitted at 10) and l's (at 20)
    # compete. First come first served: h's. With a fair-share weight, l has used nothing.
    jobs = [
        {"submit": 0, "run": 100, "gpus": 8, "account": "h"},
        {"submit": 10, "run": 100, "gpus": 8, "account": "h"},
        {"submit": 20, "run": 100, "gpus": 8, "account": "l"},
    ]
    w = workload(jobs, {"n1": 8})
    fair = apply_settings(
        P0,
        [
            "priority.PriorityType=priority/multifactor",
            "priority.PriorityWeightFairshare=10000",
            "priority.PriorityCalcPeriod=00:00:01",
        ],
    )

    assert starts(w) == [0, 100, 200]
    assert starts(w, fair) == [0, 200, 100]


def test_a_drained_node_takes_no_jobs_and_an_added_one_does():
    jobs = [{"submit": 0, "run": 100, "gpus": 8} for _ in range(2)]
    w = workload(jobs, {"n1": 8, "n2": 8})

    assert starts(w, apply_settings(P0, ["node.n2.State=DRAIN"])) == [0, 100]
    one = workload(jobs, {"n1": 8})
    assert starts(one, apply_settings(P0, ["node.n9.Gres=gpu:h100:8"])) == [0, 0]


def test_a_multi_node_job_waits_for_whole_nodes_of_its_gpu_type():
    jobs = [
        {"submit": 0, "run": 100, "gpus": 4},
        {"submit": 1, "run": 100, "gpus": 16, "nodes": 2},
    ]
    assert starts(workload(jobs, {"n1": 8, "n2": 8})) == [0, 100]
    assert starts(workload(jobs, {"n1": 8, "n2": 8, "n3": 8})) == [0, 1]


def test_a_job_cancelled_while_pending_never_starts_and_frees_its_place():
    jobs = [
        {"submit": 0, "run": 100, "gpus": 8},
        {"submit": 1, "run": 100, "gpus": 8, "cancel": 50},
        {"submit": 2, "run": 100, "gpus": 8},
    ]
    got = starts(workload(jobs, {"n1": 8}))
    assert got[0] == 0 and math.isnan(got[1]) and got[2] == 100


def test_a_job_cancelled_while_pending_is_cancelled_then_even_if_a_what_if_started_it():
    # the record: job 1 waited behind job 0 and was cancelled at 50, never having run; with a
    # second node it starts at once, and its user's scancel still comes at 50 (not its limit)
    jobs = [
        {"submit": 0, "run": 100, "gpus": 8},
        {"submit": 1, "gpus": 8, "limit": 600, "cancel": 50},
    ]
    out = replay(workload(jobs, {"n1": 8}), apply_settings(P0, ["node.n2.Gres=gpu:h100:8"]))
    assert list(out.start_e) == [0, 1] and list(out.end_e) == [100, 50]


def test_nothing_is_simulated_past_the_end_of_the_data():
    jobs = [{"submit": 0, "run": 100, "gpus": 8}, {"submit": 1, "run": 100, "gpus": 8}]
    got = starts(workload(jobs, {"n1": 8}, horizon=50))
    assert got[0] == 0 and math.isnan(got[1])


def test_a_replay_of_what_the_record_did_calibrates_exactly():
    jobs = [
        {"submit": 0, "run": 100, "gpus": 8, "real_start": 0, "account": "a"},
        {"submit": 1, "run": 50, "gpus": 8, "real_start": 100, "account": "b"},
        {"submit": 2, "run": 10, "gpus": 8, "real_start": 150, "account": "a"},
    ]
    w = workload(jobs, {"n1": 8})
    c = calibrate(w, replay(w, P0))

    assert (c.jobs, c.median_abs_start_s, c.p90_abs_start_s) == (3, 0.0, 0.0)
    assert c.rank_correlation == pytest.approx(1.0)
    assert c.wait_by_account["rel_diff"].to_list() == [0.0, 0.0]


def test_a_job_running_when_the_period_starts_holds_its_nodes_as_recorded():
    # the period starts at 100 with a 6-GPU job running on n1 since 40 (until 300, past its
    # 180 s limit under a new MaxTime): an 8-GPU job must take n2, the next 4-GPU one waits
    jobs = [
        {"submit": 0, "run": 260, "gpus": 6, "pinned": True, "on": ["n1"], "real_start": 40},
        {"submit": 100, "run": 100, "gpus": 8},
        {"submit": 101, "run": 100, "gpus": 4},
    ]
    w = workload(jobs, {"n1": 8, "n2": 8}, pinned=True)
    out = replay(w, apply_settings(P0, ["partition.gpu.MaxTime=3", "over_limit=cut"]))

    assert out.start_e.tolist() == [40, 100, 200]
    assert out.end_e[0] == 300 and not out.cut_by_limit[0]


@pytest.mark.parametrize("flags", ["", "NO_FAIR_TREE"])
def test_both_fair_share_algorithms_put_the_lighter_account_first(flags):
    jobs = [
        {"submit": 0, "run": 100, "gpus": 8, "account": "h"},
        {"submit": 10, "run": 100, "gpus": 8, "account": "h"},
        {"submit": 20, "run": 100, "gpus": 8, "account": "l"},
    ]
    fair = apply_settings(
        P0,
        [
            "priority.PriorityType=priority/multifactor",
            "priority.PriorityWeightFairshare=10000",
            "priority.PriorityCalcPeriod=00:00:01",
            f"priority.PriorityFlags={flags}",
        ],
    )
    assert fair.fair_tree is (flags == "")
    assert starts(workload(jobs, {"n1": 8}), fair) == [0, 200, 100]


def test_fair_tree_ranks_the_users_of_one_account_by_what_each_used():
    # one account; u1 ran first, so at 100 u2's job (submitted later) goes before u1's second.
    # Classic fair-share sees one account and keeps first come, first served.
    jobs = [
        {"submit": 0, "run": 100, "gpus": 8, "user": "u1"},
        {"submit": 10, "run": 100, "gpus": 8, "user": "u1"},
        {"submit": 20, "run": 100, "gpus": 8, "user": "u2"},
    ]
    settings = [
        "priority.PriorityType=priority/multifactor",
        "priority.PriorityWeightFairshare=10000",
        "priority.PriorityCalcPeriod=00:00:01",
    ]
    w = workload(jobs, {"n1": 8})

    assert starts(w, apply_settings(P0, settings)) == [0, 200, 100]
    classic = apply_settings(P0, [*settings, "priority.PriorityFlags=NO_FAIR_TREE"])
    assert starts(w, classic) == [0, 100, 200]


def test_one_user_association_cap_holds_that_user_only():
    # a user association capped at 4 GPUs: bob's second 4-GPU job waits for his first (ends at
    # 100); carol in the same account is not capped and starts at once
    w = workload(
        [
            {"submit": 0, "run": 100, "gpus": 4, "user": "bob"},
            {"submit": 1, "run": 100, "gpus": 4, "user": "bob"},
            {"submit": 2, "run": 100, "gpus": 4, "user": "carol"},
        ],
        {"n1": 8, "n2": 8},
    )
    capped = apply_settings(FAST_BF, ["assoc.a.bob.GrpTRES=gres/gpu=4"])
    assert starts(w, capped) == [0.0, 100.0, 2.0]
    assert starts(w, FAST_BF) == [0.0, 1.0, 2.0]


def test_fair_share_is_recomputed_every_priority_calc_period_not_at_every_event():
    # as in the fair-share case, but Slurm's default PriorityCalcPeriod (5 min): at 100 the
    # factors are still those of 0, when nobody had used anything, so first come first served
    jobs = [
        {"submit": 0, "run": 100, "gpus": 8, "account": "h"},
        {"submit": 10, "run": 100, "gpus": 8, "account": "h"},
        {"submit": 20, "run": 100, "gpus": 8, "account": "l"},
    ]
    policy = apply_settings(
        P0,
        ["priority.PriorityType=priority/multifactor", "priority.PriorityWeightFairshare=10000"],
    )
    assert policy.calc_period_s == 300
    assert starts(workload(jobs, {"n1": 8}), policy) == [0, 100, 200]


def test_fair_share_ticks_count_from_slurmctlds_start():
    # the fair-share case's jobs with a 2-minute PriorityCalcPeriod. Epoch-aligned, the ticks
    # are at 0 and 120: at 100 the factors are those of 0, when nobody had used anything, so
    # first come first served. With slurmctld started at 90 (BOOT_TIME), they are at 90 and
    # 210: at 100 account h has used 90 s and l's job goes first.
    jobs = [
        {"submit": 0, "run": 100, "gpus": 8, "account": "h"},
        {"submit": 10, "run": 100, "gpus": 8, "account": "h"},
        {"submit": 20, "run": 100, "gpus": 8, "account": "l"},
    ]
    policy = apply_settings(
        P0,
        [
            "priority.PriorityType=priority/multifactor",
            "priority.PriorityWeightFairshare=10000",
            "priority.PriorityCalcPeriod=2",
        ],
    )
    w = workload(jobs, {"n1": 8})
    assert starts(w, policy) == [0, 100, 200]
    assert starts(w, apply_settings(policy, ["boot_time=90"])) == [0, 200, 100]
    assert starts(w, apply_settings(policy, ["boot_time=1970-01-01T00:01:30"])) == [0, 200, 100]


def test_the_scheduler_sees_a_submit_or_an_end_a_second_later():
    jobs = [{"submit": 0, "run": 100, "gpus": 8}, {"submit": 5, "run": 10, "gpus": 8}]
    w = workload(jobs, {"n1": 8})
    assert Policy().sched_latency_s == 1
    assert starts(w, Policy()) == [1, 102]
    assert starts(w, apply_settings(Policy(), ["sched_latency=0"])) == [0, 100]
    out = replay(w, Policy())
    assert list(out.end_e) == [101, 112]  # each job runs for its recorded time


def test_a_what_if_replays_past_the_end_of_the_data_so_delayed_jobs_still_start():
    # a cap of 8 GPUs on the account runs the jobs one after another: the third starts at 200,
    # after the data's end at 150; stopped there it would never have started
    jobs = [{"submit": 0, "run": 100, "gpus": 8}, {"submit": 1, "run": 100, "gpus": 8}] + [
        {"submit": 2, "run": 10, "gpus": 8}
    ]
    w = workload(jobs, {"n1": 8, "n2": 8}, horizon=150)
    capped = apply_settings(P0, ["assoc.a.GrpTRES=gres/gpu=8"])
    assert starts(w, capped)[:2] == [0, 100] and math.isnan(starts(w, capped)[2])
    out = replay(w, capped, past_end=True)
    assert list(out.start_e) == [0, 100, 200]
    bounded = replay(w, capped)
    cut = within_data(w, out)
    for field in ("start_e", "end_e", "cut_by_limit", "held_by_limit"):
        np.testing.assert_array_equal(getattr(cut, field), getattr(bounded, field))
    # a job no policy lets start stays unstarted, and the replay still ends
    over = apply_settings(P0, ["assoc.a.GrpTRES=gres/gpu=4"])
    assert np.isnan(replay(w, over, past_end=True).start_e).all()


def test_occupancy_is_of_each_runs_own_nodes_and_never_past_one():
    # one 8-GPU node, 8-GPU jobs queued back to back for far longer than the horizon: both
    # runs fill every GPU they have. Adding two nodes triples what the proposal can hold, and
    # so its GPU-hours, not its occupancy (it was 300 % against the recorded node alone).
    jobs = [{"submit": 0, "run": 1000, "gpus": 8} for _ in range(30)]
    w = workload(jobs, {"n1": 8}, horizon=4000.0)
    wider = apply_settings(P0, ["node.n2.Gres=gpu:8", "node.n3.Gres=gpu:8"])
    base, new = replay(w, P0), replay(w, wider)
    capacity = (slurm_capacity_gpu_h(w, P0), slurm_capacity_gpu_h(w, wider))
    assert capacity == pytest.approx((8 * 4000 / 3600, 24 * 4000 / 3600))

    c = compare(w, base, new, slurm_entitlement(w, P0), capacity)

    assert c.gpu_h == pytest.approx((8 * 4000 / 3600, 24 * 4000 / 3600))
    assert c.occupancy == pytest.approx((1.0, 1.0))


def test_a_period_from_since_counts_only_its_own_hours():
    # the period starts at 5,000 (--since): a job running since 0 (submitted then, pinned)
    # counts from 5,000, and so does the capacity, so a node busy throughout is 100 % busy
    jobs = [
        {"submit": 0, "run": 10_000, "gpus": 8, "real_start": 0, "pinned": True, "on": ["n1"]},
    ]
    w = dataclasses.replace(workload(jobs, {"n1": 8}, pinned=True), origin_e=5000.0)
    assert w.first_e == 5000.0 and w.span_h == pytest.approx(5000 / 3600)
    base = replay(w, P0)

    c = compare(w, base, base, slurm_entitlement(w, P0), (slurm_capacity_gpu_h(w, P0),) * 2)

    assert c.gpu_h[0] == pytest.approx(8 * 5000 / 3600)
    assert c.occupancy[0] == pytest.approx(1.0)


def test_an_account_the_share_tree_lacks_is_entitled_to_nothing():
    jobs = [
        {"submit": 0, "run": 100, "gpus": 4, "account": "a"},
        {"submit": 0, "run": 100, "gpus": 4, "account": "b"},
        {"submit": 0, "run": 100, "gpus": 1, "account": "guest"},
    ]
    w = workload(jobs, {"n1": 8})
    tree = apply_settings(P0, ["assoc.a.Shares=0.5", "assoc.b.Shares=0.5"])
    assert slurm_entitlement(w, tree) == {"a": 0.5, "b": 0.5, "guest": 0.0}
    assert slurm_entitlement(w, P0) == {"a": 1.0, "b": 1.0, "guest": 1.0}  # no tree: equal
    out = replay(w, tree)

    c = compare(w, out, out, slurm_entitlement(w, tree), (slurm_capacity_gpu_h(w, tree),) * 2)

    shares = dict(zip(c.shares["account"], c.shares["entitlement"], strict=True))
    assert shares == pytest.approx({"a": 0.5, "b": 0.5, "guest": 0.0})
    # Jain's index over the entitled accounts alone: a and b used equal shares of theirs
    assert c.jain[0] == pytest.approx(1.0)


def test_only_what_the_proposal_cuts_beyond_the_baseline_is_its_cut():
    # The probe: a GPU cap with no effect printed "Cut short by a new limit: 3 jobs", as a
    # recorded TIMEOUT the baseline's MaxTime cuts too was counted against every proposal.
    # A (1,000 s run, limit 600 s) is cut in both; with MaxTime 400 s the proposal cuts it
    # 200 s more. B (300 s) is cut by neither.
    jobs = [
        {"submit": 0, "run": 1000, "gpus": 8, "limit": 600},
        {"submit": 1, "run": 300, "gpus": 8, "limit": 600},
    ]
    w = workload(jobs, {"n1": 8})
    base = replay(w, apply_settings(P0, ["partition.gpu.MaxTime=00:10:00", "over_limit=cut"]))
    same = replay(w, apply_settings(P0, ["partition.gpu.MaxTime=00:10:00", "over_limit=cut"]))
    less = replay(w, apply_settings(P0, ["partition.gpu.MaxTime=00:06:40", "over_limit=cut"]))
    capacity = (8 * 2000 / 3600,) * 2

    assert base.cut_by_limit.tolist() == [True, False]
    unchanged = compare(w, base, same, {"a": 1.0}, capacity_gpu_h=capacity)
    assert unchanged.cut_jobs == 0 and unchanged.cut_gpu_h == 0
    shorter = compare(w, base, less, {"a": 1.0}, capacity_gpu_h=capacity)
    assert shorter.cut_jobs == 1 and shorter.cut_gpu_h == pytest.approx(200 * 8 / 3600)


def test_jobs_a_new_cap_keeps_queued_to_the_horizon_are_held_by_it():
    # The probe: GrpTRES=gres/gpu=0 started 31 of 36 jobs, and the comparison said "kept
    # pending by one: 0 jobs" (only a time limit's holds were counted).
    jobs = [{"submit": k, "run": 100, "gpus": 2} for k in range(3)]
    w = workload(jobs, {"n1": 8})
    base = replay(w, P0)
    capped = replay(w, apply_settings(P0, ["assoc.a.GrpTRES=gres/gpu=0"]))

    assert np.isnan(capped.start_e).all() and not np.isnan(base.start_e).any()
    c = compare(w, base, capped, {"a": 1.0}, capacity_gpu_h=(8 * 300 / 3600,) * 2)
    assert c.held_jobs == 3 and c.started == (3, 0)


def test_jobs_running_when_the_period_starts_are_not_its_waits():
    # The probe: with --since, a job submitted long before the period and started just before
    # it (pinned: it runs as recorded) put its old wait in the period's p50/p95. The period
    # starts at 5,000; job 0 waited 4,000 s before it; job 1, submitted at 5,000, starts at
    # once on n2. Only job 1's wait (0 s) is the period's, baseline and proposal alike.
    jobs = [
        {"submit": 0, "run": 8000, "gpus": 8, "real_start": 4000, "pinned": True, "on": ["n1"]},
        {"submit": 5000, "run": 100, "gpus": 8, "real_start": 5000},
    ]
    w = dataclasses.replace(workload(jobs, {"n1": 8, "n2": 8}, pinned=True), origin_e=5000.0)
    base = replay(w, P0, past_end=True)
    new = replay(w, apply_settings(P0, ["bf_window=60"]), past_end=True)
    assert base.start_e.tolist() == [4000, 5000]

    c = compare(w, base, new, {"a": 1.0}, (slurm_capacity_gpu_h(w, P0),) * 2)

    row = c.waits.filter(pl.col("key") == "a").row(0, named=True)
    assert (row["base_jobs"], row["base_p50_s"], row["base_p95_s"]) == (1, 0.0, 0.0)
    assert (row["new_jobs"], row["new_p50_s"], row["new_p95_s"]) == (1, 0.0, 0.0)
    assert calibrate(w, base).jobs == 1  # the calibration leaves it out too
    # and so does the replay a recommendation's evidence carries (fairshare_weight's among them)
    assert wait_quantiles(w, base) == (0.0, 0.0)


@pytest.mark.parametrize(
    "cap",
    [
        "assoc.a.GrpTRES=gres/gpu=4",
        "assoc.a.MaxTRESPerUser=gres/gpu=4",
        "assoc.a.u.GrpTRES=gres/gpu=4",
        "qos.normal.GrpTRES=gres/gpu=4",
        "qos.normal.MaxTRESPerUser=gres/gpu=4",
    ],
)
def test_a_job_asking_more_gpus_than_a_cap_allows_is_held_by_it(cap):
    # The probe: assoc.X.GrpTRES=gres/gpu=0 kept 23 jobs pending for good, and `whatif replay`
    # said "0 held pending by one" (only a time limit's holds were marked). An 8-GPU job under
    # a 4-GPU cap never starts, however long the replay runs: held by the limit; the 4-GPU job
    # fits under it and starts at 0.
    jobs = [{"submit": 0, "run": 100, "gpus": 8}, {"submit": 0, "run": 100, "gpus": 4}]
    out = replay(workload(jobs, {"n1": 8}), apply_settings(P0, [cap]), past_end=True)

    assert np.isnan(out.start_e[0]) and out.start_e[1] == 0
    assert out.held_by_limit.tolist() == [True, False]


def test_a_job_running_when_the_period_starts_is_never_held_by_a_cap():
    # review: an 8-GPU job running at the period's start and still at its end (run unknown)
    # under a 4-GPU cap started at 0, as recorded, and was counted "held pending by a limit"
    jobs = [
        {"submit": 0, "gpus": 8, "pinned": True, "on": ["n1"], "real_start": 0, "limit": 50000},
        {"submit": 10, "run": 100, "gpus": 1, "account": "b"},
    ]
    w = workload(jobs, {"n1": 8, "n2": 8}, pinned=True)
    out = replay(w, apply_settings(P0, ["assoc.a.GrpTRES=gres/gpu=4"]))

    assert out.start_e[0] == 0 and not out.held_by_limit.any()


def test_a_job_that_records_no_partition_is_in_the_default_one():
    # The probe: Philly's jobs record no partition; a slurm.conf's `PartitionName=gpu
    # Default=YES` with a MaxTime of 100 s and over_limit=cut replayed as no change. Slurm puts
    # a job submitted without a partition in the default one: its 1,000 s run is cut at 100 s.
    jobs = [{"submit": 0, "run": 1000, "gpus": 8, "partition": "", "limit": NAN}]
    w = workload(jobs, {"n1": 8})
    limit = ["partition.gpu.MaxTime=00:01:40", "over_limit=cut"]

    no_default = replay(w, apply_settings(P0, limit))
    assert no_default.end_e.tolist() == [1000] and not no_default.cut_by_limit.any()
    out = replay(w, apply_settings(P0, [*limit, "partition.gpu.Default=YES"]))
    assert out.end_e.tolist() == [100] and out.cut_by_limit.tolist() == [True]


def test_a_partition_change_no_job_is_in_is_refused():
    # `partition.gpu.MaxTime` where every job records no partition: with no partition named
    # anywhere, the error says why and what to do (not "it has " and nothing); with `gpu`
    # configured but not the default, no job is in it (the change would replay as no change);
    # as the default partition, the jobs are in it.
    w = workload([{"submit": 0, "run": 100, "gpus": 8, "partition": ""}], {"n1": 8})
    change = ["partition.gpu.MaxTime=08:00:00"]

    with pytest.raises(PolicyError) as err:
        check_changes(w, P0, change)
    said = str(err.value)
    assert "the cluster has no partition 'gpu': the cluster's jobs record no partition" in said
    assert "--slurm-conf" in said and "Default=YES" in said and "qos.normal.MaxWall" in said
    configured = apply_settings(P0, ["partition.gpu.MaxTime=UNLIMITED"])
    with pytest.raises(PolicyError) as err:
        check_changes(w, configured, change)
    assert "no job of the period is in partition 'gpu'" in str(err.value)
    assert "1 of its jobs record no partition and no default partition takes them" in str(err.value)
    check_changes(w, apply_settings(configured, ["partition.gpu.Default=YES"]), change)
