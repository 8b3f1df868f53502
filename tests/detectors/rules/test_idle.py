"""Idle, memory-hold and hung jobs on hand-made 5-minute buckets."""

from __future__ import annotations

import json

import pytest

from detectors.rules import RuleConfig, idle
from detectors.rules.idle import IdleThresholds
from detectors.rules.run import run_rules
from tests.detectors.rules.lake import CLUSTER, at, bucket, connection, job

NOW = at(86400)


def run(tmp_path, buckets, jobs, **thresholds):
    con = connection(tmp_path, gpu_job_buckets=buckets, jobs=jobs)
    config = RuleConfig(idle=IdleThresholds(**thresholds))
    return run_rules(con, config, NOW, rules=idle.RULES).to_pylist()


def test_a_two_gpu_job_idle_for_75_minutes_is_one_idle_finding(tmp_path):
    # 2 GPUs x 24 buckets (2 h): busy for the first 45 min (9 buckets), idle for 75 min (15).
    buckets = [
        bucket("7", i * 300, gpu_index=g, busy=0.6 if i < 9 else 0.0, util_pct=90 if i < 9 else 0)
        for i in range(24)
        for g in (0, 1)
    ]
    [finding] = run(tmp_path, buckets, [job("7", 0, 7200, gpus=2)])

    assert finding["detector"] == "idle_job"
    assert finding["subject_kind"] == "job" and finding["subject_id"] == "7"
    assert finding["gpu_h_at_stake"] == pytest.approx(2 * 75 / 60)  # 2.5 GPU-h
    assert finding["start_ts"] == at(45 * 60) and finding["end_ts"] == at(7200)
    assert finding["severity"] == "warn"
    assert finding["score"] == pytest.approx(75 / 120)
    assert "idle for 1.25 h of 2.0 h observed (2.5 GPU-h)" in finding["message"]
    assert finding["message"].startswith("Job 7 (alice, 2 GPUs): ")
    assert json.loads(finding["evidence"])["longest_s"] == 75 * 60


@pytest.mark.parametrize(("busy_at_end", "observed_end"), [(False, 7 * 3600), (True, 8 * 3600)])
def test_the_evidence_says_where_the_latest_idle_run_began_and_whether_it_goes_on(
    tmp_path, busy_at_end, observed_end
):
    """Idle 1-3 h, busy 3-5 h, idle 5-7 h (then busy to 8 h): one finding spanning both idle
    runs; the alerts escalate the latest run alone, and only while the job is still in it."""

    def busy(i: int) -> float:
        hour = i * 300 / 3600
        return 0.6 if hour < 1 or 3 <= hour < 5 or hour >= 7 else 0.0

    buckets = [bucket("7", i * 300, busy=busy(i), util_pct=0) for i in range(observed_end // 300)]
    [finding] = run(tmp_path, buckets, [job("7", 0, 8 * 3600)])

    evidence = json.loads(finding["evidence"])
    assert finding["start_ts"] == at(3600) and finding["end_ts"] == at(7 * 3600)
    assert evidence["episode_start_e"] == at(5 * 3600).timestamp()
    assert evidence["observed_end_e"] == at(observed_end).timestamp()


def test_a_scheduler_record_landing_after_the_samples_keeps_the_findings_id(tmp_path):
    """The id hashes the job's start: without its record the finding was anchored at the idle
    span's start, and the record's arrival made a second finding of the same idleness."""
    buckets = [bucket("7", i * 300, busy=0.6 if i < 9 else 0.0, util_pct=0) for i in range(24)]
    held = {
        "cluster": CLUSTER,
        "job_id": "7",
        "node": "g001",
        "gpu_index": 0,
        "start_ts": at(0),
        "end_ts": at(7200),
        "source": "test",
    }
    con = connection(tmp_path, gpu_job_buckets=buckets, jobs=[], job_gpus=[held])
    [before] = run_rules(con, RuleConfig(), NOW, rules=idle.RULES).to_pylist()
    con = connection(tmp_path, gpu_job_buckets=buckets, jobs=[job("7", 0, 7200)], job_gpus=[held])
    [after] = run_rules(con, RuleConfig(), NOW, rules=idle.RULES).to_pylist()

    assert before["finding_id"] == after["finding_id"]
    assert before["start_ts"] == after["start_ts"] == at(45 * 60)


def test_one_busy_gpu_keeps_the_job_from_being_idle(tmp_path):
    buckets = [
        bucket("7", i * 300, gpu_index=g, busy=0.5 if g == 0 else 0.0, util_pct=50 if g == 0 else 0)
        for i in range(24)
        for g in (0, 1)
    ]
    assert run(tmp_path, buckets, [job("7", 0, 7200, gpus=2)]) == []


def test_55_idle_minutes_are_below_the_60_minute_threshold(tmp_path):
    buckets = [bucket("7", i * 300, busy=0.5 if i < 13 else 0.0, util_pct=50) for i in range(24)]
    buckets = [bucket("7", i * 300, busy=0.5, util_pct=50) for i in range(13)]
    buckets += [bucket("7", i * 300) for i in range(13, 24)]  # 11 buckets = 55 min
    assert run(tmp_path, buckets, [job("7", 0, 7200)]) == []


def test_60_idle_minutes_after_work_are_the_60_minute_threshold(tmp_path):
    """The window held the busy bucket starting exactly an hour before the last idle one: an
    hour idle after work took 65 minutes to flag."""
    buckets = [bucket("7", i * 300, busy=0.5, util_pct=50) for i in range(12)]
    buckets += [bucket("7", i * 300) for i in range(12, 24)]  # 12 buckets = 60 min
    buckets += [bucket("7", i * 300, busy=0.5, util_pct=50) for i in range(24, 36)]
    [finding] = run(tmp_path, buckets, [job("7", 0, 3 * 3600)])

    assert finding["detector"] == "idle_job"
    assert finding["gpu_h_at_stake"] == pytest.approx(1.0)
    assert finding["start_ts"] == at(3600) and finding["end_ts"] == at(7200)


def test_a_short_job_idle_for_its_whole_run_is_flagged(tmp_path):
    buckets = [bucket("8", i * 300) for i in range(3)]  # 15 minutes, never active
    [finding] = run(tmp_path, buckets, [job("8", 0, 900)])
    assert finding["detector"] == "idle_job"
    assert finding["message"].endswith("its whole run")
    assert finding["message"].startswith("Job 8 (alice, 1 GPU): ")  # not "1 GPUs"


def test_idle_with_memory_allocated_is_memory_hold_not_idle(tmp_path):
    buckets = [bucket("9", i * 300, fb_mib=60_000) for i in range(24)]  # 74 % of 81559 MiB
    [finding] = run(tmp_path, buckets, [job("9", 0, 7200)])
    assert finding["detector"] == "memory_hold"
    assert finding["gpu_h_at_stake"] == pytest.approx(2.0)
    assert "74% of a GPU" in finding["message"]


def test_full_gpu_util_with_no_sm_activity_for_40_minutes_is_hung(tmp_path):
    buckets = [bucket("10", i * 300, busy=0.6, util_pct=98) for i in range(12)]
    buckets += [bucket("10", i * 300, busy=0.003, util_pct=100) for i in range(12, 20)]  # 40 min
    [finding] = run(tmp_path, buckets, [job("10", 0, 6000)])
    assert finding["detector"] == "hung_job"
    assert finding["start_ts"] == at(3600)
    assert finding["gpu_h_at_stake"] == pytest.approx(40 / 60)


def test_without_sm_activity_a_hung_gpu_is_told_by_its_idle_power(tmp_path):
    # no SM field: busy falls back to GPU_UTIL (so the samples look busy); power 110 W is
    # (110-70)/(700-70) = 6 % of the way to the limit.
    buckets = [bucket("11", i * 300, busy=1.0, util_pct=100, power_w=110.0) for i in range(12)]
    for row in buckets:
        row["sm_sum"], row["sm_known_s"] = None, 0.0
    [finding] = run(tmp_path, buckets, [job("11", 0, 3600)])
    assert finding["detector"] == "hung_job"
    busy_power = [bucket("12", i * 300, busy=1.0, util_pct=100, power_w=400.0) for i in range(12)]
    for row in busy_power:
        row["sm_sum"], row["sm_known_s"] = None, 0.0
    assert run(tmp_path, busy_power, [job("12", 0, 3600)]) == []


def test_no_buckets_no_findings(tmp_path):
    assert run(tmp_path, [], []) == []


def test_the_finding_id_depends_on_the_job_not_the_figures(tmp_path):
    first = [bucket("7", i * 300) for i in range(14)]
    more = [bucket("7", i * 300) for i in range(20)]
    [a] = run(tmp_path, first, [job("7", 0, None)])
    [b] = run(tmp_path / "2", more, [job("7", 0, None)])
    assert a["finding_id"] == b["finding_id"]
    assert a["gpu_h_at_stake"] != b["gpu_h_at_stake"]
    assert a["cluster"] == CLUSTER


# ---- duty cycle (issue #27): short spikes do not break a state; real work does


def _poll(row, seconds=60.0, engine=0.06, util=80.0):
    """A bucket in which a small kernel (a health check, a monitoring agent) ran `seconds`."""
    row["active_s"] = seconds
    row["idle_s"] = row["observed_s"] - seconds
    row["effective_s"] = engine * seconds
    row["util_sum"] = util * seconds
    row["sm_sum"] = engine * seconds
    return row


def _no_profiling(row):
    row["sm_sum"], row["sm_known_s"] = None, 0.0
    return row


def test_a_small_kernel_every_20_minutes_does_not_hide_an_idle_job(tmp_path):
    buckets = [bucket("20", i * 300) for i in range(36)]  # 3 h
    for row in buckets[::4]:
        _poll(row)
    [finding] = run(tmp_path, buckets, [job("20", 0, 3 * 3600)])
    assert finding["detector"] == "idle_job"
    evidence = json.loads(finding["evidence"])
    assert evidence["signal"] == "sm_active" and evidence["windowed"] is True
    assert finding["gpu_h_at_stake"] == pytest.approx(3.0)


def test_real_work_now_and_then_is_not_idle(tmp_path):
    # a notebook: a cell at SM 0.5 for a minute every 20 minutes
    buckets = [bucket("21", i * 300) for i in range(36)]
    for row in buckets[::4]:
        _poll(row, seconds=60, engine=0.5)
    assert run(tmp_path, buckets, [job("21", 0, 3 * 3600)]) == []


def test_a_bursty_service_resting_40_percent_of_the_time_is_not_waste(tmp_path):
    # busy 6 buckets, resting 4 (40 %), model kept in memory: never idle, never a memory hold
    buckets = [
        bucket(
            "22",
            i * 300,
            busy=0.5 if i % 10 < 6 else 0.0,
            util_pct=90 if i % 10 < 6 else 0,
            fb_mib=50_000,
        )
        for i in range(60)
    ]
    assert run(tmp_path, buckets, [job("22", 0, 5 * 3600)]) == []


def test_without_profiling_fields_idle_is_read_from_power_and_says_so(tmp_path):
    idle_power = [_no_profiling(bucket("23", i * 300, power_w=71.0)) for i in range(24)]
    for row in idle_power[::4]:
        _poll(row)
        row["power_sum"] = 71.0 * 240 + 160.0 * 60  # the kernel draws a little
    [finding] = run(tmp_path, idle_power, [job("23", 0, 7200)])
    assert finding["detector"] == "idle_job"
    assert json.loads(finding["evidence"])["signal"] == "power"
    assert "work read from power" in finding["message"]
    working = [_no_profiling(bucket("24", i * 300, power_w=71.0)) for i in range(24)]
    for row in working[::4]:
        _poll(row)
        row["power_sum"] = 71.0 * 240 + 450.0 * 60  # real work draws real power
    assert run(tmp_path / "2", working, [job("24", 0, 7200)]) == []


def test_without_power_either_idle_falls_back_to_gpu_util(tmp_path):
    buckets = [_no_profiling(bucket("25", i * 300, power_w=None)) for i in range(24)]
    [finding] = run(tmp_path, buckets, [job("25", 0, 7200)])
    assert json.loads(finding["evidence"])["signal"] == "gpu_util"
    assert "work read from GPU_UTIL" in finding["message"]


def test_engine_activity_alone_is_read_as_the_work(tmp_path):
    # samples carrying engine_active only (no SM activity, no GPU_UTIL, no power): busy is known
    # from the engine, so a job half busy is not idle, and one with no activity is
    def engine_only(row):
        row["util_sum"], row["util_known_s"] = None, 0.0
        return _no_profiling(row)

    busy = [engine_only(bucket("27", i * 300, busy=0.5, power_w=None)) for i in range(24)]
    assert run(tmp_path, busy, [job("27", 0, 7200)]) == []
    still = [engine_only(bucket("28", i * 300, busy=0.0, power_w=None)) for i in range(24)]
    [finding] = run(tmp_path / "2", still, [job("28", 0, 7200)])
    assert finding["detector"] == "idle_job"
    assert json.loads(finding["evidence"])["signal"] == "sm_active"


def test_a_job_that_trained_for_hours_then_hung_is_hung_from_the_hang(tmp_path):
    buckets = [bucket("26", i * 300, busy=0.6, util_pct=98) for i in range(48)]  # 4 h
    buckets += [bucket("26", i * 300, busy=0.004, util_pct=100) for i in range(48, 60)]
    buckets[52] = bucket("26", 52 * 300, busy=0.3, util_pct=100)  # one odd bucket in the hang
    [finding] = run(tmp_path, buckets, [job("26", 0, 5 * 3600)])
    assert finding["detector"] == "hung_job"
    assert finding["start_ts"] == at(4 * 3600)
    assert finding["gpu_h_at_stake"] == pytest.approx(55 / 60)
