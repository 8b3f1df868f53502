"""Low MFU on hand-made job_usage rows: large (GPUs AND hours) jobs below the MFU floor."""

from __future__ import annotations

import json

import pytest

from detectors.rules import RuleConfig, mfu
from detectors.rules.mfu import MfuThresholds
from detectors.rules.run import run_rules
from tests.detectors.rules.lake import at, connection, usage

H = 3600.0
NOW = at(48 * H)


def run(tmp_path, usages, **config):
    con = connection(tmp_path, job_usage=usages)
    return run_rules(con, RuleConfig(**config), NOW, rules=mfu.RULES).to_pylist()


def trained(job_id, gpus, hours, mfu_value, **fields):
    return usage(
        job_id,
        0,
        hours * H,
        gpus=gpus,
        alloc_gpu_h=gpus * hours,
        model_params=7_000_000_000,
        tokens_per_s_per_gpu=500.0,
        mfu=mfu_value,
        **fields,
    )


def test_a_large_long_job_below_the_mfu_floor_is_flagged_with_the_hours_at_stake(tmp_path):
    usages = [
        trained("slow", 16, 10.0, 0.05),  # 160 GPU-h at 5 %: flagged
        trained("fine", 16, 10.0, 0.40),  # a healthy MFU
        trained("small", 4, 10.0, 0.05),  # too few GPUs
        trained("short", 16, 0.5, 0.05),  # too short
        trained("unknown", 16, 10.0, None),  # no MFU (no parameter count or unknown GPU)
    ]
    found = run(tmp_path, usages)

    assert [f["subject_id"] for f in found] == ["slow"]
    [slow] = found
    assert slow["detector"] == "low_mfu" and slow["severity"] == "info"
    # at 15 % MFU the same tokens take 5/15 of the time: 160 × (1 - 1/3) GPU-h not needed
    assert slow["gpu_h_at_stake"] == pytest.approx(160 * (1 - 0.05 / 0.15))
    assert slow["message"].startswith(
        "Job slow (alice): 5.0% MFU on 16 GPUs for 10.0 h (500 tokens/s per GPU, 7.0 B "
        "parameters); at 15.0% the same tokens would take 106.7 fewer GPU-h"
    )
    evidence = json.loads(slow["evidence"])
    assert (evidence["mfu"], evidence["gpus"]) == (0.05, 16)
    assert evidence["fix"].startswith("Run `gpuledger job slow` for its bottleneck")


def test_the_thresholds_are_configurable(tmp_path):
    usages = [trained("a", 16, 10.0, 0.05), trained("b", 4, 10.0, 0.30)]
    found = run(tmp_path, usages, mfu=MfuThresholds(mfu_max=0.35, mfu_min_gpus=4))

    assert sorted(f["subject_id"] for f in found) == ["a", "b"]
