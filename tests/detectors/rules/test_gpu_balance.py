"""Partially idle jobs and straggler GPUs on hand-made per-GPU daily rows."""

from __future__ import annotations

import json

import pytest

from detectors.rules import RuleConfig, gpu_balance
from detectors.rules.gpu_balance import GpuBalanceThresholds
from detectors.rules.run import run_rules
from tests.detectors.rules.lake import at, connection, device_day, job

NOW = at(86400)


def run(tmp_path, days, jobs, **thresholds):
    con = connection(tmp_path, job_gpu_daily=days, jobs=jobs)
    config = RuleConfig(gpu_balance=GpuBalanceThresholds(**thresholds))
    return run_rules(con, config, NOW, rules=gpu_balance.RULES).to_pylist()


def test_two_of_four_gpus_never_active_is_partial_idle(tmp_path):
    days = [device_day("5", g, observed_s=7200, busy=0.6 if g < 2 else 0.0) for g in range(4)]
    [finding] = run(tmp_path, days, [job("5", 0, 7200, gpus=4)])

    assert finding["detector"] == "partial_idle"
    assert finding["gpu_h_at_stake"] == pytest.approx(2 * 2.0)  # 2 GPUs x 2 h
    assert finding["severity"] == "warn"  # half the GPUs
    assert "2 of its 4 GPUs never did any work" in finding["message"]
    assert "--gres=gpu:2" in finding["message"]
    assert json.loads(finding["evidence"])["idle_gpu_uuids"] == ["GPU-g001-2", "GPU-g001-3"]


def test_a_job_whose_other_gpus_sent_no_data_is_not_told_to_ask_for_fewer(tmp_path):
    # 2 of its 4 GPUs reported, one of them never active: the other two did unknown work
    days = [device_day("5", g, observed_s=7200, busy=0.6 if g < 1 else 0.0) for g in range(2)]
    [finding] = run(tmp_path, days, [job("5", 0, 7200, gpus=4)])

    assert "1 of the 2 GPUs that reported (of its 4) never did any work" in finding["message"]
    assert "--gres" not in finding["message"]


@pytest.mark.parametrize(
    ("busy", "expected"),
    [
        ([0.6, 0.6, 0.6, 0.6], []),  # all working
        ([0.0, 0.0, 0.0, 0.0], []),  # all idle: an idle job, not a partial one
        ([0.6, 0.0, 0.6, 0.6], ["partial_idle"]),  # one of four idle: info
    ],
)
def test_partial_idle_needs_some_but_not_all_gpus_idle(tmp_path, busy, expected):
    days = [device_day("5", g, busy=b) for g, b in enumerate(busy)]
    found = run(tmp_path, days, [job("5", 0, 3600, gpus=4)])
    assert [f["detector"] for f in found] == expected


def test_a_gpu_at_half_the_median_activity_is_a_straggler(tmp_path):
    days = [device_day("6", g, busy=0.3 if g == 3 else 0.6) for g in range(4)]
    [finding] = run(tmp_path, days, [job("6", 0, 3600, gpus=4)])

    assert finding["detector"] == "straggler_gpu"
    assert finding["subject_kind"] == "gpu" and finding["subject_id"] == "GPU-g001-3"
    assert finding["job_id"] == "6"
    # 4 GPU-h observed, each waiting at ratio 0.3/0.6 = 0.5 -> 2 GPU-h lost
    assert finding["gpu_h_at_stake"] == pytest.approx(2.0)
    assert "runs at 50% of the job's median" in finding["message"]


def test_several_stragglers_of_one_job_share_its_loss_never_count_it_twice(tmp_path):
    # 8 GPUs for 1 h, busy 0.6; GPUs 6 and 7 at 0.3 and 0.15. The job waits for its slowest:
    # 8 GPU-h × (1 - 0.15/0.6) = 6 GPU-h lost once, split 0.5 : 0.75 between the two (each
    # counted its own 8 × (1 - ratio): 4 + 6 = 10 GPU-h, more than the job's 8 observed)
    busy = {6: 0.3, 7: 0.15}
    days = [device_day("7", g, busy=busy.get(g, 0.6)) for g in range(8)]
    found = run(tmp_path, days, [job("7", 0, 3600, gpus=8)])

    by_gpu = {f["subject_id"]: f for f in found}
    assert set(by_gpu) == {"GPU-g001-6", "GPU-g001-7"}
    assert sum(f["gpu_h_at_stake"] for f in found) == pytest.approx(6.0)
    assert by_gpu["GPU-g001-7"]["gpu_h_at_stake"] == pytest.approx(6.0 * 0.75 / 1.25)
    assert (
        "3.6 of the 6.0 GPU-h the job lost waiting for its 2 slow GPUs"
        in (by_gpu["GPU-g001-7"]["message"])
    )


def test_a_gpu_at_80_percent_of_the_median_is_not_a_straggler(tmp_path):
    days = [device_day("6", g, busy=0.48 if g == 3 else 0.6) for g in range(4)]
    assert run(tmp_path, days, [job("6", 0, 3600, gpus=4)]) == []


def test_no_rows_no_findings(tmp_path):
    assert run(tmp_path, [], []) == []
