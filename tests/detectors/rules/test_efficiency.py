"""Low-efficiency users, MIG candidates, oversized time limits and power caps on hand-made
job_usage rows (job_profiles reads job_usage, jobs_latest, job_gpu_daily and the model table)."""

from __future__ import annotations

import json

import pytest

from detectors.rules import RuleConfig, efficiency
from detectors.rules.efficiency import EfficiencyThresholds, PowerThresholds
from detectors.rules.run import run_rules
from tests.detectors.rules.lake import at, connection, device_day, job, usage

DAY = 86400.0
NOW = at(10 * DAY)


def run(tmp_path, usages, jobs=(), days=(), **config):
    con = connection(tmp_path, job_usage=usages, jobs=list(jobs), job_gpu_daily=list(days))
    return run_rules(con, RuleConfig(**config), NOW, rules=efficiency.RULES).to_pylist()


def test_low_efficiency_needs_ratio_and_hours_and_top_n(tmp_path):
    usages = [
        # bob: 100 GPU-h, 10 effective -> 10 %, 90 wasted
        usage("1", 5 * DAY, 6 * DAY, user="bob", alloc_gpu_h=100.0, effective_gpu_h=10.0),
        # carol: 50 GPU-h, 5 effective -> 10 %, 45 wasted
        usage("2", 5 * DAY, 6 * DAY, user="carol", alloc_gpu_h=50.0, effective_gpu_h=5.0),
        # dave: 10 GPU-h at 0 % -> under the 24 GPU-h floor
        usage("3", 5 * DAY, 6 * DAY, user="dave", alloc_gpu_h=10.0, effective_gpu_h=0.0),
        # erin: 200 GPU-h at 50 % -> efficient enough (100 wasted)
        usage("4", 5 * DAY, 6 * DAY, user="erin", alloc_gpu_h=200.0, effective_gpu_h=100.0),
        # frank: wasteful but his job ended 8 days before the lake's end (outside 7 days)
        usage("5", 0, DAY - 1, user="frank", alloc_gpu_h=100.0, effective_gpu_h=0.0),
        # the lake's latest job ends at day 9: the window is days 2-9
        usage("6", 8 * DAY, 9 * DAY, user="erin", alloc_gpu_h=1.0, effective_gpu_h=1.0),
    ]
    # ranks by waste among all users: erin 100 (but 50 % efficient), bob 90, carol 45, dave 10
    found = run(tmp_path, usages, efficiency=EfficiencyThresholds(user_top_n=2))
    users = [f for f in found if f["detector"] == "low_efficiency_user"]
    assert [f["subject_id"] for f in users] == ["bob"]
    [bob] = users
    assert bob["gpu_h_at_stake"] == pytest.approx(90.0)
    assert bob["end_ts"] == at(9 * DAY) and bob["start_ts"] == at(2 * DAY)
    assert "10.0% efficient over the last 7 days" in bob["message"]
    assert "did work across 1 job;" in bob["message"]  # one job: not "1 jobs"

    both = run(tmp_path / "b", usages)
    assert sorted(f["subject_id"] for f in both if f["detector"] == "low_efficiency_user") == [
        "bob",
        "carol",
    ]


def test_a_user_is_judged_on_what_the_telemetry_saw_inside_the_window(tmp_path):
    """Hours no sample covered are not known to be wasted (a cluster without telemetry read
    "0.0% efficient, 0.0 of 117.6 allocated GPU-h did work"), and a job counts for the part
    of its run inside the window: one GPU idle for 30 days was 720 GPU-h wasted "over the last
    7 days"."""
    usages = [
        # bob: 100 GPU-h allocated, none observed (no telemetry)
        usage("1", 5 * DAY, 6 * DAY, user="bob", alloc_gpu_h=100.0, observed_gpu_h=0.0),
        # carol: one GPU idle over 30 days (days -20 to 10), the lake's end at day 10
        usage("2", -20 * DAY, 10 * DAY, user="carol", alloc_gpu_h=720.0, effective_gpu_h=0.0),
    ]
    found = run(tmp_path, usages)
    users = {f["subject_id"]: f for f in found if f["detector"] == "low_efficiency_user"}

    assert set(users) == {"carol"}
    carol = users["carol"]
    assert carol["gpu_h_at_stake"] == pytest.approx(7 * 24.0)  # its 7 days, 1 GPU
    assert "0.0 of the 168.0 allocated GPU-h the telemetry saw did work" in carol["message"]


def test_a_small_lightly_used_job_is_a_mig_candidate(tmp_path):
    # 8 % of 81559 MiB, 10 % busy for 4 h on 1 GPU: 1g.10gb (1/8 memory >= 9.6 %, 1/7 >= 12 %)
    usages = [
        usage(
            "7",
            0,
            4 * 3600,
            alloc_gpu_h=4.0,
            observed_gpu_h=4.0,
            busy_mean=0.10,
            sm_active_mean=0.10,
            fb_used_mib_max=0.08 * 81559,
        )
    ]
    days = [device_day("7", 0, observed_s=4 * 3600, busy=0.1)]
    [finding] = [f for f in run(tmp_path, usages, days=days) if f["detector"] == "overallocated"]
    assert "a MIG 1g.10gb slice would do" in finding["message"]
    assert finding["gpu_h_at_stake"] == pytest.approx(4.0 * 6 / 7)
    # the same job on a 1g.10gb slice already: nothing to free ("use a 1g.10gb slice")
    on_slice = [device_day("7", 0, observed_s=4 * 3600, busy=0.1) | {"mig_instance": 3}]
    found = run(tmp_path / "slice", usages, days=on_slice)
    assert [f for f in found if f["detector"] == "overallocated"] == []


def test_a_busy_or_big_job_is_no_mig_candidate(tmp_path):
    common = {"alloc_gpu_h": 4.0, "observed_gpu_h": 4.0}
    usages = [
        usage("8", 0, 14400, busy_mean=0.6, sm_active_mean=0.6, fb_used_mib_max=8000.0, **common),
        usage("9", 0, 14400, busy_mean=0.1, sm_active_mean=0.1, fb_used_mib_max=60000.0, **common),
        usage("10", 0, 14400, busy_mean=0.0, sm_active_mean=0.0, fb_used_mib_max=100.0, **common),
    ]
    days = [device_day(j, 0, observed_s=14400) for j in ("8", "9", "10")]
    assert [f for f in run(tmp_path, usages, days=days) if f["detector"] == "overallocated"] == []


def test_a_limit_ten_times_the_run_time_is_flagged_with_a_suggestion(tmp_path):
    usages = [
        usage("11", 0, 3600, gpus=2),
        usage("12", 0, 3600, gpus=2),
        usage("14", 0, 3600, gpus=0),
        usage("15", 0, 3900, gpus=1),
    ]
    jobs = [
        job("11", 0, 3600, time_limit_s=36000, gpus=2),  # 10x
        job("12", 0, 3600, time_limit_s=14400, gpus=2),  # 4x: below 5x
        job("14", 0, 3600, time_limit_s=36000, gpus=0),  # 10x, but a CPU-only job
        job("15", 0, 3900, time_limit_s=36000, gpus=1),  # 65 min: 97.5 rounds up to 1:45
    ]
    found = {
        f["subject_id"]: f
        for f in run(tmp_path, usages, jobs)
        if f["detector"] == "time_limit_excess"
    }
    assert set(found) == {"11", "15"}
    finding = found["11"]
    assert "ran 60 min of a 600 min limit (10.0x); --time=1:30:00 would do" in finding["message"]
    # the quarter hour `gpuledger job` advises too (it said 2:00:00 where the job said 01:45:00)
    assert "--time=1:45:00 would do" in found["15"]["message"]
    assert finding["gpu_h_at_stake"] == 0.0
    assert '"unused_reservation_gpu_h":18.0' in finding["evidence"]


def test_high_power_at_low_activity_is_a_power_cap_candidate(tmp_path):
    # 500 W mean on a 700 W GPU at 20 % SM for 10 GPU-h; cap 0.6 x 700 = 420 W
    # -> (500 - 420) W x 10 h = 0.8 kWh, so a 0.5 kWh floor is needed to flag it
    row = dict(
        alloc_gpu_h=10.0,
        observed_gpu_h=10.0,
        busy_mean=0.2,
        sm_active_mean=0.2,
        power_w_mean=500.0,
        fb_used_mib_max=70000.0,
    )
    usages = [usage("13", 0, 36000, **row)]
    days = [device_day("13", 0, observed_s=36000, busy=0.2)]
    assert [
        f for f in run(tmp_path, usages, days=days) if f["detector"] == "power_cap_candidate"
    ] == []
    [finding] = [
        f
        for f in run(tmp_path / "b", usages, days=days, power=PowerThresholds(power_min_kwh=0.5))
        if f["detector"] == "power_cap_candidate"
    ]
    assert "a 420 W cap (nvidia-smi -pl) would save about 0.8 kWh" in finding["message"]


def test_no_jobs_no_findings(tmp_path):
    assert run(tmp_path, []) == []


def test_a_multi_gpu_job_gets_a_mig_slice_only_if_one_slice_holds_all_of_it(tmp_path):
    two = {"gpus": 2, "alloc_gpu_h": 8.0, "observed_gpu_h": 8.0}
    usages = [
        # 2 GPUs, each 9 % busy and 7 % of its memory: 18 % of a GPU's work in all (21.6 %
        # with headroom), more than a 1g slice (1/7) holds, but one 2g.20gb slice holds it
        usage("20", 0, 14400, busy_mean=0.09, sm_active_mean=0.09, fb_used_mib_max=5709.0, **two),
        # 2 GPUs at 3 % each and 4 % memory: one 1g.10gb slice holds both (7.2 %, 9.6 %)
        usage("21", 0, 14400, busy_mean=0.03, sm_active_mean=0.03, fb_used_mib_max=3262.0, **two),
        # 2 GPUs at 25 % each: 60 % of a GPU with headroom, more than a 4g slice: one GPU
        usage("23", 0, 14400, busy_mean=0.25, sm_active_mean=0.25, fb_used_mib_max=5709.0, **two),
    ]
    days = [
        device_day(j, i, observed_s=14400, busy=0.05) for j in ("20", "21", "23") for i in (0, 1)
    ]
    found = {
        f["subject_id"]: f
        for f in run(tmp_path, usages, days=days)
        if f["detector"] == "overallocated"
    }
    assert "on 2 GPUs; one MIG 2g.20gb slice would hold all of it" in found["20"]["message"]
    assert found["20"]["gpu_h_at_stake"] == pytest.approx(8.0 * (1 - 2 / 14))
    assert "on 2 GPUs; one MIG 1g.10gb slice would hold all of it" in found["21"]["message"]
    assert found["21"]["gpu_h_at_stake"] == pytest.approx(8.0 * (1 - 1 / 14))
    fewer = found["23"]
    assert "MIG" not in fewer["message"]
    assert "together 1 GPU would do: ask for --gres=gpu:1" in fewer["message"]
    assert '"gpus_needed":1' in fewer["evidence"] and '"mig_profile":null' in fewer["evidence"]
    assert fewer["gpu_h_at_stake"] == pytest.approx(8.0 / 2)


def test_a_lightly_used_job_on_many_gpus_is_told_how_many_it_needs(tmp_path):
    # 8 GPUs, each 25 % busy and 10 % of memory: 2 GPUs of work, 2.4 with headroom: 3 GPUs
    usages = [
        usage(
            "22",
            0,
            4 * 3600,
            gpus=8,
            alloc_gpu_h=32.0,
            observed_gpu_h=32.0,
            busy_mean=0.25,
            sm_active_mean=0.25,
            fb_used_mib_max=0.10 * 81559,
        )
    ]
    days = [device_day("22", i, observed_s=4 * 3600, busy=0.25) for i in range(8)]
    [finding] = [f for f in run(tmp_path, usages, days=days) if f["detector"] == "overallocated"]
    assert "on 8 GPUs; together 3 GPUs would do: ask for --gres=gpu:3" in finding["message"]
    assert finding["gpu_h_at_stake"] == pytest.approx(32.0 * 5 / 8)


def test_where_only_gpu_util_is_known_a_lightly_used_job_is_judged_on_its_own_ceiling(tmp_path):
    # no profiling fields: busy is GPU_UTIL / 100, which reads 100 % whenever a kernel runs
    common = {"alloc_gpu_h": 4.0, "observed_gpu_h": 4.0, "sm_active_mean": None}
    usages = [
        usage("30", 0, 14400, busy_mean=0.35, fb_used_mib_max=4000.0, **common),
        usage("31", 0, 14400, busy_mean=0.7, fb_used_mib_max=4000.0, **common),
    ]
    days = [device_day(j, 0, observed_s=14400) for j in ("30", "31")]
    found = [f for f in run(tmp_path, usages, days=days) if f["detector"] == "overallocated"]
    assert [f["subject_id"] for f in found] == ["30"]
    assert json.loads(found[0]["evidence"])["signal"] == "gpu_util"
