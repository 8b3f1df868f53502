"""The shipped Prometheus scrape config and recording rules, checked by the real promtool."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

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
    # per-job and cluster sums, the idle-job, ECC and row-remap alerts) are in the test file, for
    # dcgm-exporter's names up to 4.8 and from 4.9 (and its `hostname` label), and for a MIG GPU
    # and a GPU two jobs share, whose values repeat on several series.
    result = promtool("test", "rules", "tests/gpuledger-dcgm.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


# Each break undoes one thing the rule test pins: a definition (mean, not max; idle GPUs summed,
# not all counted), dcgm-exporter >=4.9's names and units, one GPU once under MIG or sharing, and
# the node label of >=4.8.3 in the alerts' text.
BREAKS = {
    "hpc_job:gpu_busy:avg": ("avg by (hpc_job)", "max by (hpc_job)"),
    "cluster:gpus_idle:count": (
        "sum by (cluster) (max by (cluster, UUID) (gpu:busy:ratio) < bool",
        "count by (cluster) (max by (cluster, UUID) (gpu:busy:ratio) < bool",
    ),
    "4.9 GPU_UTIL ratio read as %": (
        "or DCGM_FI_DEV_GPU_UTIL_RATIO",
        "or DCGM_FI_DEV_GPU_UTIL_RATIO / 100",
    ),
    "4.9 power name dropped": (
        "DCGM_FI_DEV_POWER_USAGE or DCGM_FI_DEV_BOARD_POWER_WATTS\n",
        "DCGM_FI_DEV_POWER_USAGE\n",
    ),
    "4.9 row-remap name dropped": (
        "DCGM_FI_DEV_ROW_REMAP_FAILURE or DCGM_FI_DEV_ROW_REMAP_FAILED\n",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE\n",
    ),
    "a hardware alert per MIG instance and sharer": (
        "max by (cluster, instance, Hostname, hostname, gpu, UUID) (\n"
        "            DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "(\n            DCGM_FI_DEV_ROW_REMAP_FAILURE",
    ),
    "power summed over MIG instances and sharers": (
        "sum by (cluster) (max by (cluster, UUID) (\n            DCGM_FI_DEV_POWER_USAGE",
        "sum by (cluster) ((\n            DCGM_FI_DEV_POWER_USAGE",
    ),
    "GPUs counted per series": (
        "count by (cluster) (max by (cluster, UUID) (gpu:busy:ratio))",
        "count by (cluster) (gpu:busy:ratio)",
    ),
    "annotations name only Hostname": (
        "{{ or $labels.Hostname $labels.hostname $labels.instance }}",
        "{{ $labels.Hostname }}",
    ),
}


@pytest.mark.parametrize("broken", sorted(BREAKS))
def test_the_rule_test_fails_when_a_rule_is_wrong(tmp_path, broken):
    # The promtool test above can fail: break one rule and it must.
    (tmp_path / "rules").mkdir()
    rules = (DEPLOY / "rules" / "gpuledger-dcgm.rules.yml").read_text()
    expr, replacement = BREAKS[broken]
    assert expr in rules, broken
    (tmp_path / "rules" / "gpuledger-dcgm.rules.yml").write_text(rules.replace(expr, replacement))
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
    assert result.returncode != 0, broken


def test_the_rules_count_each_gpu_of_a_real_mig_scrape_once(tmp_path):
    # A real dcgm-exporter scrape of eight A800s, GPU 0 in MIG mode with three GPU instances
    # (tests/fixtures/dcgm-exporter/sample_a800_mig_excerpt.txt): ten engine-activity series, no
    # GPU_UTIL for the MIG GPU. Eight GPUs, all idle.
    fixture = DEPLOY.parents[1] / "tests" / "fixtures" / "dcgm-exporter"
    text = (fixture / "sample_a800_mig_excerpt.txt").read_text()
    sample = re.compile(r"^(DCGM_FI_(?:PROF_GR_ENGINE_ACTIVE|DEV_GPU_UTIL)\{.*\}) ([0-9.]+)$", re.M)
    series = [{"series": s, "values": f"{float(v)}x10"} for s, v in sample.findall(text)]
    assert len(series) == 17
    test = {
        "rule_files": [str(DEPLOY / "rules" / "gpuledger-dcgm.rules.yml")],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": name,
                        "eval_time": "5m",
                        "exp_samples": [{"labels": name, "value": value}],
                    }
                    for name, value in [("cluster:gpus:count", 8), ("cluster:gpus_idle:count", 8)]
                ],
            }
        ],
    }
    (tmp_path / "mig.test.yml").write_text(yaml.safe_dump(test))
    result = promtool("test", "rules", str(tmp_path / "mig.test.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
