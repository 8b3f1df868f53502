"""The replay's QOS model on hand-built workloads whose outcome is known: QOS priority (Slurm's
multifactor QOS factor), QOS limits (GrpTRES, MaxTRESPerUser, MaxWall) and preempt/qos
preemption (CANCEL, REQUEUE) (detectors/replay/engine.py, detectors/replay/policy.py).

Each expected time is worked out in the test's comment."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from collector.sources.slurm.conf import settings_from_slurm_conf
from detectors.replay.engine import Outcome, Workload, replay
from detectors.replay.policy import Policy, PolicyError, QosPolicy, apply_settings, slurm_lines
from tests.replay.test_engine import P0, workload

MULTIFACTOR = apply_settings(
    P0,
    [
        "priority.PriorityType=priority/multifactor",
        "priority.PriorityWeightAge=1000",
        "priority.PriorityMaxAge=00:16:40",  # 1,000 s: a job gains one point a second
    ],
)


def with_qos(w: Workload, qos: list[str]) -> Workload:
    return dataclasses.replace(w, qos=qos)


def run(w: Workload, policy: Policy) -> Outcome:
    return replay(w, policy)


def starts(out: Outcome) -> list[float]:
    return [float(s) for s in out.start_e]


def queue_behind_a_full_node() -> Workload:
    # A holds the node's 8 GPUs until 100; B (normal, submitted at 10) and C (high, at 20)
    # both wait for it. At 100, B's age is 90 points, C's 80.
    w = workload(
        [
            {"submit": 0, "run": 100, "gpus": 8},
            {"submit": 10, "run": 50, "gpus": 8},
            {"submit": 20, "run": 50, "gpus": 8},
        ],
        {"n1": 8},
    )
    return with_qos(w, ["normal", "normal", "high"])


def test_a_high_priority_qos_job_starts_before_an_older_normal_one():
    w = queue_behind_a_full_node()
    # no QOS weight: B (90) before C (80); B runs 100-150, C from 150
    assert starts(run(w, MULTIFACTOR)) == [0, 100, 150]
    # PriorityWeightQOS=100, high's priority 10 the highest: C's QOS factor 10 ÷ 10 = 1,
    # +100 points (180 against B's 90): C runs 100-150, B starts 50 s later than it did, at 150
    policy = apply_settings(MULTIFACTOR, ["priority.PriorityWeightQOS=100", "qos.high.Priority=10"])
    assert starts(run(w, policy)) == [0, 150, 100]


def test_the_qos_factor_is_normalised_by_the_highest_qos_priority():
    w = queue_behind_a_full_node()
    # a QOS of priority 40 elsewhere makes high's factor 10 ÷ 40 = 0.25: +25 points, C at 105
    # against B's 90 still goes first
    base = apply_settings(
        MULTIFACTOR,
        ["priority.PriorityWeightQOS=100", "qos.high.Priority=10", "qos.urgent.Priority=40"],
    )
    assert starts(run(w, base)) == [0, 150, 100]
    # normal at 30 (0.75: +75, B at 165) now outranks high (C at 105): B first again
    assert starts(run(w, apply_settings(base, ["qos.normal.Priority=30"]))) == [0, 100, 150]
    # under priority/basic the QOS does not weigh: first come, first served
    basic = apply_settings(base, ["priority.PriorityType=priority/basic"])
    assert starts(run(w, basic)) == [0, 100, 150]


def test_a_qos_gpu_cap_holds_its_jobs_and_does_not_block_others():
    # two 8-GPU nodes; low may run 4 GPUs at once: L2 waits for L1's end (100) although
    # GPUs are free, and N (normal, 8 GPUs), queued behind L2, starts at once
    w = with_qos(
        workload(
            [
                {"submit": 0, "run": 100, "gpus": 4},
                {"submit": 1, "run": 100, "gpus": 4},
                {"submit": 2, "run": 100, "gpus": 8},
            ],
            {"n1": 8, "n2": 8},
        ),
        ["low", "low", "normal"],
    )
    assert starts(run(w, P0)) == [0, 1, 2]
    capped = apply_settings(P0, ["qos.low.GrpTRES=gres/gpu=4"])
    assert starts(run(w, capped)) == [0, 100, 2]
    assert starts(run(w, apply_settings(capped, ["qos.low.GrpTRES=-1"]))) == [0, 1, 2]


def test_a_qos_per_user_cap_counts_each_users_gpus_in_the_qos_across_accounts():
    # low allows 4 GPUs per user: u1's second job (another account) waits for its first;
    # u2's runs at once
    w = with_qos(
        workload(
            [
                {"submit": 0, "run": 100, "gpus": 4, "user": "u1", "account": "a"},
                {"submit": 1, "run": 100, "gpus": 4, "user": "u1", "account": "b"},
                {"submit": 2, "run": 100, "gpus": 4, "user": "u2", "account": "a"},
            ],
            {"n1": 8, "n2": 8},
        ),
        ["low", "low", "low"],
    )
    policy = apply_settings(P0, ["qos.low.MaxTRESPerUser=gres/gpu=4"])
    assert starts(run(w, policy)) == [0, 100, 2]
    assert apply_settings(P0, ["qos.low.MaxTRESPU=gres/gpu=4"]).qos == policy.qos


def test_qos_max_wall_holds_or_cuts_like_a_partitions_max_time():
    # short allows 60 s: S (limit 120) stays pending (Slurm's QOSMaxWallDurationPerJobLimit),
    # or with over_limit=cut runs 60 s of its 100; N (normal) is not capped
    w = with_qos(
        workload(
            [{"submit": 0, "run": 100, "limit": 120, "gpus": 1}] * 2,
            {"n1": 8},
        ),
        ["short", "normal"],
    )
    held = run(w, apply_settings(P0, ["qos.short.MaxWall=00:01:00"]))
    assert math.isnan(held.start_e[0]) and bool(held.held_by_limit[0])
    assert held.end_e[1] == 100 and not held.held_by_limit[1]
    cut = run(w, apply_settings(P0, ["qos.short.MaxWall=1", "over_limit=cut"]))
    assert cut.end_e.tolist() == [60, 100] and cut.cut_by_limit.tolist() == [True, False]
    # the tighter of the partition's MaxTime and the QOS's MaxWall
    both = apply_settings(P0, ["qos.short.MaxWall=2", "partition.gpu.MaxTime=1", "over_limit=cut"])
    assert run(w, both).end_e.tolist() == [60, 60]


PREEMPT = ["PreemptType=preempt/qos", "PreemptMode=REQUEUE", "qos.high.Preempt=low"]


def preemption_case() -> Workload:
    # L (low) holds the node's 8 GPUs for 1,000 s (from 1: Slurm sees a submit a second
    # later); H (high) asks for them at 100
    return with_qos(
        workload(
            [{"submit": 0, "run": 1000, "gpus": 8}, {"submit": 100, "run": 200, "gpus": 8}],
            {"n1": 8},
        ),
        ["low", "high"],
    )


def test_a_preempting_qos_job_starts_at_its_submit_and_the_victim_requeues():
    # Slurm's defaults: a second from a submit or an end to the pass that sees it, and a
    # requeued job may start again 120 + 1 s after its requeue. H starts at 101, L is
    # requeued then, after 100 s of run (eligible from 222), H ends at 301, seen at 302: L
    # reruns all of its 1,000 s from 302, to 1,302
    out = run(preemption_case(), apply_settings(Policy(), PREEMPT))
    assert starts(out) == [302, 101]
    assert out.end_e.tolist() == [1302, 301]
    assert out.preemptions is not None and out.preemptions.tolist() == [1, 0]
    assert out.requeued_s is not None and out.requeued_s.tolist() == [100, 0]


def test_a_requeued_job_waits_out_the_requeue_delay():
    # H (run 50) ends at 151, seen at 152; L, requeued at 101 with a 300 s delay, may start
    # from 402 only
    w = dataclasses.replace(preemption_case(), run_s=np.array([1000.0, 50.0]))
    out = run(w, apply_settings(Policy(), [*PREEMPT, "requeue_delay=300"]))
    assert starts(out) == [402, 101]


def test_a_cancelled_victim_ends_when_preempted():
    # low's own PreemptMode (CANCEL) overrides the cluster's REQUEUE: L ends at 101
    out = run(preemption_case(), apply_settings(Policy(), [*PREEMPT, "qos.low.PreemptMode=CANCEL"]))
    assert starts(out) == [1, 101] and out.end_e.tolist() == [101, 301]
    assert out.preemptions is not None and out.preemptions.tolist() == [1, 0]


def test_a_victim_holding_the_cpus_is_preempted_though_gpus_are_free():
    # n1: 8 GPUs, 16 CPUs. L (low, 1 GPU, all 16 CPUs) runs from 1; H (high, 1 GPU, 8 CPUs)
    # at 100 finds 7 GPUs free but no CPU: it preempts L and starts at 101. L, requeued, may
    # start again from 222 but H holds 8 CPUs until 301 (seen at 302): L reruns from 302
    w = dataclasses.replace(
        workload(
            [{"submit": 0, "run": 1000, "gpus": 1}, {"submit": 100, "run": 200, "gpus": 1}],
            {"n1": 8},
        ),
        qos=["low", "high"],
        cpus=np.array([16.0, 8.0]),
        mem_mib=np.array([math.nan, math.nan]),
    )
    out = run(w, apply_settings(Policy(), [*PREEMPT, "node.n1.CPUs=16"]))
    assert starts(out) == [302, 101]
    assert out.preemptions is not None and out.preemptions.tolist() == [1, 0]
    # with 24 CPUs there is room for both: no one is preempted
    out = run(w, apply_settings(Policy(), [*PREEMPT, "node.n1.CPUs=24"]))
    assert starts(out) == [1, 101]
    assert out.preemptions is not None and out.preemptions.tolist() == [0, 0]


def test_no_preemption_unless_preempt_qos_and_a_mode_say_so():
    # Slurm's defaults (preempt/none, PreemptMode=OFF), or a Preempt list with the mode OFF:
    # H waits for L's end (1,001, seen at 1,002)
    for settings in (
        ["qos.high.Preempt=low"],
        ["PreemptType=preempt/qos", "qos.high.Preempt=low"],  # PreemptMode=OFF
        [*PREEMPT, "qos.low.PreemptMode=OFF"],
        [*PREEMPT, "qos.high.Preempt=''"],
    ):
        out = run(preemption_case(), apply_settings(Policy(), settings))
        assert starts(out) == [1, 1002], settings
        assert out.preemptions is not None and not out.preemptions.any()


def test_only_the_victims_needed_go_youngest_first():
    # L1 (4 GPUs from 0) and L2 (4 GPUs from 10) share the node; H needs 4 GPUs at 20: it
    # preempts L2 only (the younger of two of the same QOS and size), cancelled at 20
    w = with_qos(
        workload(
            [
                {"submit": 0, "run": 1000, "gpus": 4},
                {"submit": 10, "run": 1000, "gpus": 4},
                {"submit": 20, "run": 100, "gpus": 4},
            ],
            {"n1": 8},
        ),
        ["low", "low", "high"],
    )
    out = run(w, apply_settings(P0, [*PREEMPT, "PreemptMode=CANCEL"]))
    assert starts(out) == [0, 10, 20] and out.end_e.tolist() == [1000, 20, 120]
    # a lower-priority QOS goes before a younger job: L1 in scavenger (priority 0 < low's 5)
    w2 = with_qos(w, ["scavenger", "low", "high"])
    policy = apply_settings(
        P0,
        [*PREEMPT, "PreemptMode=CANCEL", "qos.high.Preempt=low,scavenger", "qos.low.Priority=5"],
    )
    assert run(w2, policy).end_e.tolist() == [20, 1010, 120]


def test_a_job_that_may_preempt_queues_before_older_jobs_it_does_not_wait_for():
    # FIFO, one node: L (low) runs; N (normal, submitted at 50) waits for it. H (high,
    # preempts low) is queued ahead of N, as Slurm sorts a preemptor first, and starts at
    # its submit, 100, to 300; L, requeued at 100, is submitted anew then (Slurm resets a
    # requeued job's submit time), so N (50) goes before it: N 300-400, L from 400
    w = with_qos(
        workload(
            [
                {"submit": 0, "run": 1000, "gpus": 8},
                {"submit": 50, "run": 100, "gpus": 8},
                {"submit": 100, "run": 200, "gpus": 8},
            ],
            {"n1": 8},
        ),
        ["low", "normal", "high"],
    )
    out = run(w, apply_settings(P0, PREEMPT))
    assert starts(out) == [400, 300, 100]


def test_a_requeued_jobs_age_counts_from_when_it_may_start_again():
    # multifactor, a point of age a second: L (low, from 0) is requeued at 100 by H (high,
    # 100-500); it may start again from 221 and ages from then. At 500, N (submitted at 50)
    # has 450 points, L 279 (not 500, as its first submit would give): N 500-600, L from 600
    w = with_qos(
        workload(
            [
                {"submit": 0, "run": 1000, "gpus": 8},
                {"submit": 50, "run": 100, "gpus": 8},
                {"submit": 100, "run": 400, "gpus": 8},
            ],
            {"n1": 8},
        ),
        ["low", "normal", "high"],
    )
    out = run(w, apply_settings(MULTIFACTOR, PREEMPT))
    assert starts(out) == [600, 500, 100]


def test_without_qos_rows_the_replay_is_the_same():
    # recorded QOS names with no QOS policy change nothing (Policy.qos empty: every factor 0,
    # no limits, no preemption)
    w = queue_behind_a_full_node()
    plain = dataclasses.replace(w, qos=None)
    for policy in (P0, MULTIFACTOR, apply_settings(MULTIFACTOR, ["priority.PriorityWeightQOS=1"])):
        a, b = run(w, policy), run(plain, policy)
        np.testing.assert_array_equal(a.start_e, b.start_e)
        np.testing.assert_array_equal(a.end_e, b.end_e)


def test_qos_settings_change_what_they_name():
    p = apply_settings(
        Policy(),
        [
            "qos.high.Priority=1000",
            "qos.high.GrpTRES=gres/gpu=16",
            "qos.high.MaxTRESPerUser=gres/gpu=4",
            "qos.high.MaxWall=2-00:00:00",
            "qos.high.Preempt=low,scavenger",
            "qos.high.PreemptMode=requeue",
            "qos.low.PreemptMode=cluster",
            "PreemptType=preempt/qos",
            "PreemptMode=CANCEL,GANG",
            "requeue_delay=0",
        ],
    )
    assert p.qos["high"] == QosPolicy(
        priority=1000,
        gpu_cap=16,
        user_gpu_cap=4,
        max_wall_s=172800,
        preempt=frozenset({"low", "scavenger"}),
        preempt_mode="REQUEUE",
    )
    assert p.qos["low"].preempt_mode is None  # the cluster's
    assert (p.preempt_type, p.preempt_mode, p.requeue_delay_s) == ("preempt/qos", "CANCEL", 0)


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("qos.high.Colour=red", "qos.high.Colour: unknown QOS setting 'Colour'"),
        ("qos.high.Priority=top", "qos.high.Priority=top: not a number"),
        ("qos.high.GrpTRES=cpu=4", "expected gres/gpu=N"),
        ("qos.high.MaxWall=a week", "not a Slurm time"),
        ("qos.high.PreemptMode=SUSPEND", "SUSPEND, WITHIN and PRIORITY are not modelled"),
        ("PreemptMode=cluster", "PreemptMode=cluster: expected OFF, CANCEL, REQUEUE"),
        ("PreemptType=preempt/partition_prio", "preempt/partition_prio is not modelled"),
        ("requeue_delay=-5", "requeue_delay=-5: expected a number ≥ 0"),
        ("priority.Foo=1", "priority.Foo: unknown priority setting (one of priority.{"),
    ],
)
def test_a_bad_qos_setting_is_one_line_naming_it(setting, named):
    with pytest.raises(PolicyError) as err:
        apply_settings(Policy(), [setting])
    assert named in str(err.value) and "\n" not in str(err.value)


def test_qos_settings_say_how_to_make_them_on_a_live_cluster():
    lines = slurm_lines(["qos.high.Priority=1000", "PreemptType=preempt/qos"], "della")
    assert lines[0] == "sacctmgr -i modify qos where name=high set Priority=1000"
    assert lines[1].startswith("# slurm.conf: PreemptType=preempt/qos")


def test_a_slurm_conf_sets_preemption_but_no_qos():
    # QOS live in slurmdbd: slurm.conf has the cluster's PreemptType and PreemptMode only; a
    # mode the replay does not model (SUSPEND) is left out, not refused
    text = "PreemptType=preempt/qos\nPreemptMode=REQUEUE\nSchedulerParameters=requeue_delay=30\n"
    p = apply_settings(Policy(), settings_from_slurm_conf(text))
    assert (p.preempt_type, p.preempt_mode, p.requeue_delay_s) == ("preempt/qos", "REQUEUE", 30)
    suspend = settings_from_slurm_conf("PreemptType=preempt/qos\nPreemptMode=SUSPEND,GANG\n")
    assert suspend == [("PreemptType", "preempt/qos")]


def test_the_qos_of_the_landed_snapshot_reach_the_replay(tmp_path):
    # `collect slurm-config` on the test cluster's answers, with two QOS and preemption on
    from collector.sources.slurm.config import collect_slurm_config
    from detectors.replay.workload import recorded_settings
    from tests.replay.test_slurm_config import NOW, runner
    from warehouse.connection import connect
    from warehouse.lake import Lake

    def with_qos(argv: list[str]) -> str:
        text = runner(argv)
        if "qos" in argv:
            text += "high|1000|cpu=64,gres/gpu=16|gres/gpu=8|2-00:00:00|normal,scavenger|cluster\n"
            text += "scavenger|0|||||requeue\n"
        if argv[:3] == ["scontrol", "show", "config"]:
            text = text.replace(
                "PreemptMode             = OFF", "PreemptMode             = REQUEUE"
            )
            text = text.replace("= preempt/none", "= preempt/qos")
        return text

    lake = tmp_path / "lake"
    collect_slurm_config(Lake.at(lake), "testcluster", with_qos, NOW)
    policy = apply_settings(Policy(), recorded_settings(connect(lake), "testcluster"))

    assert policy.qos["high"] == QosPolicy(
        priority=1000,
        gpu_cap=16,
        user_gpu_cap=8,
        max_wall_s=2 * 86400,
        preempt=frozenset({"normal", "scavenger"}),
        preempt_mode=None,
    )
    assert policy.qos["normal"] == QosPolicy()
    assert policy.qos["scavenger"].preempt_mode == "REQUEUE"
    assert (policy.preempt_type, policy.preempt_mode) == ("preempt/qos", "REQUEUE")


def test_compare_and_the_out_rows_count_the_preemptions():
    from detectors.replay.metrics import compare, outcome_table

    w = preemption_case()
    base = run(w, Policy())
    new = run(w, apply_settings(Policy(), PREEMPT))
    c = compare(w, base, new, {"a": 1.0}, (8 * 2000 / 3600,) * 2)
    # L was preempted once, after 100 s on 8 GPUs: 800 GPU-seconds thrown away
    assert c.preempted == (0, 1)
    assert c.requeued_gpu_h == (0.0, pytest.approx(800 / 3600))
    assert outcome_table(w, new)["preemptions"].to_list() == [1, 0]


def test_on_a_simulated_month_qos_limits_hold_and_only_the_named_qos_is_preempted(tmp_path):
    # the simulator's jobs drawn into three QOS: whatever the replay does, at no start do
    # the jobs running hold more GPUs than the cluster has, or scavenger more than its cap,
    # and only scavenger jobs are preempted
    from collector.sim.runner import SimConfig, simulate_records
    from detectors.replay.workload import load_workload, recorded_settings
    from warehouse.connection import connect
    from warehouse.lake import Lake

    root = tmp_path / "lake"
    simulate_records(SimConfig(gpus=96, days=3, seed=11), Lake.at(root))
    con = connect(root, require=("jobs",))
    try:
        w = load_workload(con, "sim")
        recorded = apply_settings(Policy(), recorded_settings(con, "sim"))
    finally:
        con.close()
    rng = np.random.default_rng(3)
    qos = rng.choice(["normal", "high", "scavenger"], size=w.size, p=[0.5, 0.2, 0.3])
    w = with_qos(w, qos.tolist())
    policy = apply_settings(
        recorded,
        [
            "priority.PriorityType=priority/multifactor",
            "priority.PriorityWeightQOS=10000",
            "qos.high.Priority=100",
            "qos.scavenger.GrpTRES=gres/gpu=32",
            *PREEMPT,
            "qos.high.Preempt=scavenger",
        ],
    )
    out = replay(w, policy)

    assert out.preemptions is not None and out.preemptions.sum() > 0
    assert set(qos[out.preemptions > 0]) == {"scavenger"}
    ran = np.isfinite(out.start_e)
    assert (out.start_e[ran] >= w.submit_e[ran]).all() and (
        out.end_e[ran] >= out.start_e[ran]
    ).all()
    total = int(w.node_gpus.sum())
    for t in np.unique(out.start_e[ran]):
        running = ran & (out.start_e <= t) & (out.end_e > t)
        assert w.gpus[running].sum() <= total
        assert w.gpus[running & (qos == "scavenger")].sum() <= 32
