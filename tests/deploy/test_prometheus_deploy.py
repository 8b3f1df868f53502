"""The shipped Prometheus scrape config and recording rules, checked by the real promtool."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", *args], cwd=DEPLOY, capture_output=True, text=True, check=False, timeout=60
    )


def test_scrape_config_and_rules_are_valid():
    result = promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "14 rules found" in result.stdout


def test_recording_rules_compute_gpuledgers_definitions():
    # Hand-computed expectations (busy from engine activity before GPU_UTIL, idle < 0.01,
    # per-job and cluster sums, the idle-job and ECC alerts) are in the test file.
    result = promtool("test", "rules", "tests/gpuledger-dcgm.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("broken", ["hpc_job:gpu_busy:avg", "cluster:gpus_idle:count"])
def test_the_rule_test_fails_when_a_rule_is_wrong(tmp_path, broken):
    # The promtool test above can fail: break one rule and it must.
    (tmp_path / "rules").mkdir()
    rules = (DEPLOY / "rules" / "gpuledger-dcgm.rules.yml").read_text()
    expr = {"hpc_job:gpu_busy:avg": "avg by (hpc_job)", "cluster:gpus_idle:count": "sum(gpu:idle"}
    replacement = {
        "hpc_job:gpu_busy:avg": "max by (hpc_job)",
        "cluster:gpus_idle:count": "count(gpu:idle",
    }
    (tmp_path / "rules" / "gpuledger-dcgm.rules.yml").write_text(
        rules.replace(expr[broken], replacement[broken])
    )
    (tmp_path / "tests").mkdir()
    test_file = (DEPLOY / "tests" / "gpuledger-dcgm.test.yml").read_text()
    (tmp_path / "tests" / "t.yml").write_text(test_file)
    result = subprocess.run(
        ["promtool", "test", "rules", "tests/t.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode != 0
