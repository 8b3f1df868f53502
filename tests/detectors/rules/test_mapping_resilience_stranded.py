"""Attribution self-check, resilience (incl. Young/Daly) and stranded GPUs on hand-made rows."""

from __future__ import annotations

import math

import pytest

from detectors.rules import RuleConfig, mapping, resilience, stranded
from detectors.rules.resilience import ResilienceThresholds, checkpoint_advice, young_daly_s
from detectors.rules.run import run_rules
from tests.detectors.rules.lake import CLUSTER, at, bucket, connection, job, occupancy, usage

DAY = 86400.0
NOW = at(10 * DAY)


def run(tmp_path, rules, config=None, **tables):
    con = connection(tmp_path, **tables)
    return run_rules(con, config or RuleConfig(), NOW, rules=rules).to_pylist()


# ---- mapping


def test_a_gpu_active_for_an_hour_with_no_job_is_flagged(tmp_path):
    buckets = [bucket(None, i * 300, busy=0.5, util_pct=50) for i in range(12)]  # 1 h active
    buckets += [bucket(None, 3600 + i * 300) for i in range(12)]  # 1 h idle: fine
    [finding] = run(tmp_path, mapping.RULES, gpu_job_buckets=buckets)
    assert finding["detector"] == "gpu_without_job"
    assert finding["subject_id"] == "GPU-g001-0"
    assert finding["gpu_h_at_stake"] == pytest.approx(1.0)
    assert finding["score"] == pytest.approx(0.5)


def test_a_gpu_whose_work_is_unknown_is_not_said_to_have_worked(tmp_path):
    # an hour of samples carrying no busy field (power alone, or values that are no number)
    buckets = [bucket(None, i * 300, busy_known=False) for i in range(12)]
    assert run(tmp_path, mapping.RULES, gpu_job_buckets=buckets) == []


def test_a_job_whose_gpus_sent_no_data_is_flagged(tmp_path):
    usages = [
        usage("1", 0, 7200, gpus=2, alloc_gpu_h=4.0, observed_gpu_h=0.0),
        usage("2", 0, 7200, gpus=2, alloc_gpu_h=4.0, observed_gpu_h=3.9),  # covered
        usage("3", 0, 600, alloc_gpu_h=0.5, observed_gpu_h=0.0),  # under 1 GPU-h
    ]
    [finding] = run(tmp_path, mapping.RULES, job_usage=usages, cluster_occupancy=occupancy(0, 7200))
    assert finding["detector"] == "job_without_data" and finding["subject_id"] == "1"
    assert finding["gpu_h_at_stake"] == pytest.approx(4.0)
    assert finding["severity"] == "warn"


def test_a_job_is_flagged_for_the_hours_its_clusters_gpus_reported_alone(tmp_path):
    """Every exporter stopped at 2 h (the probe's cluster `stop`: 23 owners mailed to adjust
    their requests) and none was deployed before 1 h: a job sends no data only where the
    cluster's other GPUs did."""
    usages = [
        usage("after", 7200, 14400, gpus=2, alloc_gpu_h=4.0, observed_gpu_h=0.0),
        usage("before", 0, 3600, gpus=2, alloc_gpu_h=2.0, observed_gpu_h=0.0),
        usage("across", 3600, 10800, gpus=2, alloc_gpu_h=4.0, observed_gpu_h=0.0),
    ]
    # 4 GPUs, the job's 2 not reporting; of the other 2, both for half an hour, one for the next
    reported = occupancy(3600, 5400, unobserved=2) + occupancy(5400, 7200, unobserved=3)

    [finding] = run(tmp_path, mapping.RULES, job_usage=usages, cluster_occupancy=reported)

    assert finding["subject_id"] == "across"
    # its 2 GPUs for the hour the cluster reported, the others 3/4 of it: 1.5 GPU-h
    assert finding["gpu_h_at_stake"] == pytest.approx(1.5)


def test_a_jobs_own_silent_gpus_do_not_lower_what_its_telemetry_should_have_covered(tmp_path):
    """Two nodes of 4 GPUs, the job's node's exporter dead for its hour: counted with the
    job's own GPUs, half the cluster reported and 2 of its 4 GPU-hours were at stake (review);
    every other GPU reported, so all 4 are."""
    usages = [usage("1", 0, 3600, gpus=4, alloc_gpu_h=4.0, observed_gpu_h=0.0)]
    reported = occupancy(0, 3600, gpus=8, unobserved=4)

    [finding] = run(tmp_path, mapping.RULES, job_usage=usages, cluster_occupancy=reported)

    assert finding["gpu_h_at_stake"] == pytest.approx(4.0)


def test_a_cluster_without_telemetry_flags_none_of_its_jobs(tmp_path):
    """No job of the cluster was observed (its scheduler's records alone, no exporter yet):
    no job's mapping is at fault. Per job, 31 users were mailed to adjust their requests."""
    usages = [
        usage("1", 0, 7200, gpus=2, alloc_gpu_h=4.0, observed_gpu_h=0.0),
        usage("2", 0, 7200, gpus=4, alloc_gpu_h=8.0, observed_gpu_h=0.0),
    ]
    assert run(tmp_path, mapping.RULES, job_usage=usages) == []


# ---- resilience


def test_young_daly_matches_the_formula():
    # delta = 300 s, M = 86400 s: sqrt(2*300*86400) = 7200; r = 300/172800
    r = 300 / 172800
    expected = 7200 * (1 + math.sqrt(r) / 3 + r / 9) - 300
    assert young_daly_s(300, 86400) == pytest.approx(expected)
    assert young_daly_s(300, 100) == 100  # delta >= 2M: checkpoint every MTBF
    assert math.isnan(young_daly_s(300, 0))


def outcome(
    job_id, gpus, start_s, end_s, outcome_, *, hw=False, requeued=False, account="ml", lost_s=0.0
):
    """A job_outcomes row; `lost_s` seconds of its GPUs before the run [start_s, end_s) were lost
    to requeues."""
    failed = outcome_ in ("failed", "node_fail")
    requeue_lost = gpus * lost_s / 3600
    alloc = gpus * (end_s - start_s) / 3600 + requeue_lost
    return {
        "cluster": CLUSTER,
        "job_id": job_id,
        "user": "alice",
        "account": account,
        "state": outcome_.upper(),
        "outcome": outcome_,
        "failed": failed,
        "timed_out": False,
        "preempted": False,
        "requeued": requeued,
        "alloc_gpu_h": alloc,
        "gpu_h_lost_requeue": requeue_lost,
        "gpu_h_lost": alloc if failed else requeue_lost,
        "hw_event_before_end": hw,
        "hw_event_kinds": "xid 79" if hw else None,
    }


def test_resilience_findings_from_hand_made_outcomes(tmp_path):
    # Three 16-GPU jobs of 24 h each: one completed, one node_fail after 24 h, one failed
    # after an XID 79 after 24 h -> 72 job-hours, 2 interruptions -> MTBF 36 h.
    outcomes = [
        outcome("1", 16, 0, DAY, "completed"),
        outcome("2", 16, DAY, 2 * DAY, "node_fail"),
        outcome("3", 16, 2 * DAY, 3 * DAY, "failed", hw=True),
    ]
    jobs = [
        job("1", 0, DAY, gpus=16),
        job("2", DAY, 2 * DAY, gpus=16, state="NODE_FAIL"),
        job("3", 2 * DAY, 3 * DAY, gpus=16, state="FAILED"),
    ]
    found = run(tmp_path, resilience.RULES, job_outcomes=outcomes, jobs=jobs)
    by = {(f["detector"], f["subject_id"]): f for f in found}

    hw = by[("failed_after_hw_event", "3")]
    assert hw["gpu_h_at_stake"] == pytest.approx(16 * 24)
    # account ml: 768 of 1152 GPU-h lost (2/3)
    account = by[("lost_gpu_hours", "ml")]
    assert account["gpu_h_at_stake"] == pytest.approx(768.0)
    assert account["score"] == pytest.approx(2 / 3)
    # checkpoint advice for both interrupted jobs: tau = Daly(300 s, 36 h)
    tau = young_daly_s(300, 36 * 3600)
    expected_loss = 16 * (tau / 2 + 300) / 3600
    advice = by[("checkpoint_interval", "2")]
    assert advice["gpu_h_at_stake"] == pytest.approx(16 * 24 - expected_loss)
    assert f"checkpoint every {round(tau / 60)} min" in advice["message"]
    assert ("checkpoint_interval", "1") not in by  # it was not interrupted


def test_checkpoint_advice_counts_each_run_lost_to_a_requeue(tmp_path):
    # Two 16-GPU jobs of 24 h: one completed, one requeued twice after 6 h runs, then completed
    # in 24 h -> 48 job-hours of last runs, 1 interrupted job -> MTBF 48 h.
    outcomes = [
        outcome("1", 16, 0, DAY, "completed"),
        outcome("2", 16, DAY, 2 * DAY, "completed", requeued=True, lost_s=2 * 6 * 3600),
    ]
    jobs = [job("1", 0, DAY, gpus=16), job("2", DAY, 2 * DAY, gpus=16, requeues=2)]
    found = run(tmp_path, resilience.RULES, job_outcomes=outcomes, jobs=jobs)
    [advice] = [f for f in found if f["detector"] == "checkpoint_interval"]

    tau = young_daly_s(300, 48 * 3600)
    expected_loss = 2 * 16 * (tau / 2 + 300) / 3600  # two runs lost, each half an interval
    assert advice["subject_id"] == "2"
    assert advice["gpu_h_at_stake"] == pytest.approx(16 * 12 - expected_loss)
    assert "lost 192.0 GPU-h in 2 interrupted runs (its last ran 24.0 h)" in advice["message"]


def test_each_cluster_gets_the_interruption_rate_of_its_own_jobs(tmp_path):
    # cluster a: 3 jobs of 24 h, 2 interrupted (MTBF 36 h); cluster b: 2 jobs of 24 h, 2
    # interrupted (MTBF 24 h). Pooled, both read "every 30.0 h here".
    outcomes, jobs = [], []
    for cluster, runs in (("a", ["completed", "node_fail", "node_fail"]), ("b", ["node_fail"] * 2)):
        for i, kind in enumerate(runs):
            job_id, start = f"{cluster}{i}", i * DAY
            outcomes.append(outcome(job_id, 16, start, start + DAY, kind) | {"cluster": cluster})
            state = "COMPLETED" if kind == "completed" else "NODE_FAIL"
            jobs.append(job(job_id, start, start + DAY, gpus=16, state=state, cluster=cluster))
    found = run(tmp_path, resilience.RULES, job_outcomes=outcomes, jobs=jobs)
    said = {f["subject_id"]: f["message"] for f in found if f["detector"] == "checkpoint_interval"}
    assert set(said) == {"a1", "a2", "b0", "b1"}
    for job_id, mtbf_h in (("a1", 36), ("b0", 24)):
        tau = young_daly_s(300, mtbf_h * 3600)
        assert f"are interrupted every {mtbf_h:.1f} h here" in said[job_id]
        assert f"checkpoint every {round(tau / 60)} min" in said[job_id]


def test_checkpoint_advice_per_size_class():
    import polars as pl

    jobs = pl.DataFrame(
        {
            "gpus": [1, 8, 8, 32],
            "runtime_s": [3600.0, 7200.0, 7200.0, 36000.0],
            "interrupted": [False, True, False, True],
        }
    )
    advice = {r["size_class"]: r for r in checkpoint_advice(jobs, 300).iter_rows(named=True)}
    assert advice["2-8 GPUs"]["interruptions"] == 1
    assert advice["2-8 GPUs"]["mtbf_s"] == pytest.approx(14400)
    assert advice["9-64 GPUs"]["mtbf_s"] == pytest.approx(36000)
    assert math.isnan(advice["1 GPU"]["interval_s"])  # no interruption: no advice


def test_a_small_account_loss_is_no_finding(tmp_path):
    outcomes = [outcome("1", 1, 0, 3600, "failed"), outcome("2", 1, 0, 3600, "completed")]
    config = RuleConfig(resilience=ResilienceThresholds(account_min_lost_gpu_h=100))
    assert (
        run(
            tmp_path,
            resilience.RULES,
            config,
            job_outcomes=outcomes,
            jobs=[job("1", 0, 3600), job("2", 0, 3600)],
        )
        == []
    )


# ---- stranded


def test_one_gpu_with_all_the_nodes_cpus_strands_seven(tmp_path):
    jobs = [
        # earlier, the node was full: 8 x (1 GPU, 12 CPUs) -> 96 CPUs, 8 GPUs
        *[
            job(f"f{i}", 0, 3600, gpus=1, cpus=12, mem_req_mib=10240, nodes=["g001"])
            for i in range(8)
        ],
        # then one job took 1 GPU and all 96 CPUs for 2 h
        job("9", 3600, 3 * 3600, gpus=1, cpus=96, mem_req_mib=10240, nodes=["g001"]),
        # and one took 2 GPUs with 24 CPUs: its fair share, nothing stranded
        job("10", 3 * 3600, 4 * 3600, gpus=2, cpus=24, mem_req_mib=20480, nodes=["g001"]),
    ]
    [finding] = run(tmp_path, stranded.RULES, jobs=jobs)
    assert finding["detector"] == "stranded_gpus" and finding["subject_id"] == "9"
    assert finding["gpu_h_at_stake"] == pytest.approx(7 * 2.0)
    assert "left 7 of the node's 8 GPUs unusable" in finding["message"]
    assert finding["message"].endswith("ask for --cpus-per-gpu=12 or less")  # memory was fair


def test_a_running_jobs_cpus_count_in_what_its_node_held_at_once(tmp_path):
    """A running job's CPUs were added and taken away at its start: on a 4-GPU node, R (1 GPU,
    16 CPUs, running) and C1 (1 GPU, 16 CPUs, ended) made a node of 16 CPUs seen, where both
    ran at once on 32; R "left 3 GPUs unusable" and C1 stranded three times what it did."""
    jobs = [
        job("R", 0, None, gpus=1, cpus=16, mem_req_mib=10240, nodes=["s01"], state="RUNNING"),
        job("C1", 0, 3600, gpus=1, cpus=16, mem_req_mib=10240, nodes=["s01"]),
        # the lake's data runs to 3 h (another node's job)
        job("Z", 0, 3 * 3600, gpus=1, cpus=1, mem_req_mib=1024, nodes=["s02"]),
    ]
    gpus = [{"cluster": CLUSTER, "node": "s01", "gpu_index": i, "source": "test"} for i in range(4)]
    found = {f["subject_id"]: f for f in run(tmp_path, stranded.RULES, jobs=jobs, gpus=gpus)}

    # 32 CPUs seen on the 4-GPU node: 8 a GPU; R and C1 each hold 16, one GPU's share more
    assert "left 1 of the node's 4 GPUs unusable" in found["R"]["message"]
    assert found["R"]["gpu_h_at_stake"] == pytest.approx(3.0)  # to the end of the data
    assert found["C1"]["gpu_h_at_stake"] == pytest.approx(1.0)


def test_a_node_seen_too_little_to_size_advises_nothing_impossible(tmp_path):
    """Three 1-GPU jobs held the node at once with 1 CPU and 1 GiB between two of them: the
    node "had" 2 CPUs and 3 GPUs (it has 16 and 8), and a 1-GPU job was told to ask for
    --cpus-per-gpu=0 or less. A share under one CPU or GiB per GPU is no node's size."""
    jobs = [
        job("1", 0, 3600, gpus=1, cpus=1, mem_req_mib=1024, nodes=["g001"]),
        job("2", 0, 3600, gpus=1, cpus=1, mem_req_mib=1024, nodes=["g001"]),
        job("3", 0, 3600, gpus=1, cpus=0, mem_req_mib=0, nodes=["g001"]),
    ]
    assert run(tmp_path, stranded.RULES, jobs=jobs) == []


def test_memory_can_strand_gpus_too(tmp_path):
    jobs = [
        *[
            job(f"f{i}", 0, 3600, gpus=1, cpus=12, mem_req_mib=10240, nodes=["g001"])
            for i in range(8)
        ],
        # 1 GPU, fair CPUs, but 60 GiB of the node's 80 GiB: 20 GiB left = 2 GPUs' share
        job("9", 3600, 7200, gpus=1, cpus=12, mem_req_mib=61440, nodes=["g001"]),
    ]
    [finding] = run(tmp_path, stranded.RULES, jobs=jobs)
    assert '"stranded_gpus":5' in finding["evidence"]
    # 80 GiB / 8 GPUs: 10 GiB each; the CPUs were fair, so only memory needs changing
    assert finding["message"].endswith("ask for --mem-per-gpu=10G or less")


def test_when_cpus_and_memory_both_strand_gpus_the_advice_fixes_both(tmp_path):
    jobs = [
        *[
            job(f"f{i}", 0, 3600, gpus=1, cpus=12, mem_req_mib=10240, nodes=["g001"])
            for i in range(8)
        ],
        # 2 GPUs with all 96 CPUs and all 80 GiB: a smaller CPU request alone strands 6 still
        job("9", 3600, 7200, gpus=2, cpus=96, mem_req_mib=81920, nodes=["g001"]),
    ]
    [finding] = run(tmp_path, stranded.RULES, jobs=jobs)
    assert "left 6 of the node's 8 GPUs unusable" in finding["message"]
    assert finding["message"].endswith(
        "ask for --cpus-per-gpu=12 or less and --mem-per-gpu=10G or less"
    )
    assert '"max_cpus_per_gpu":12' in finding["evidence"]
    assert '"max_mem_per_gpu_gib":10' in finding["evidence"]


def test_no_jobs_no_findings_for_any_of_these_families(tmp_path):
    for i, rules in enumerate((mapping.RULES, resilience.RULES, stranded.RULES)):
        assert run(tmp_path / str(i), rules) == []
