"""The shipped files together, against a real Prometheus 2.42: deploy/prometheus/prometheus.yml
and its rules scrape the simulated dcgm-exporter fleet and gpuledger's own /metrics, while
`gpuledger run` runs with deploy/gpuledger.example.toml (only site values swapped: lake, URL,
port, cadence) and overrides from the environment, as gpuledger.service starts it.

Time is accelerated: values change and Prometheus scrapes every second.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from collector.sim.exporters import ExporterServers, FleetConfig, SimulatedFleet
from tests.infra.prometheus import free_port, http_get

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
GPUS = 8

pytestmark = [pytest.mark.live, pytest.mark.slow]


def wait_until(what: str, ready: Any, timeout: float, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = ready()
        if value:
            return value
        tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{tail}"
        time.sleep(0.5)


def shipped_prometheus_config(workdir: Path, exporters: list[str], gpuledger: str) -> Path:
    """deploy/prometheus as shipped, with this host's targets and a 1 s cadence."""
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {"dcgm", "gpuledger", "gpuledger-serve"}
    # (`gpuledger serve` and the dashboards over it: tests/serve/test_live_prometheus.py)
    config["scrape_configs"] = [jobs["dcgm"], jobs["gpuledger"]]
    jobs["dcgm"]["static_configs"] = [{"targets": exporters}]
    jobs["gpuledger"]["static_configs"] = [{"targets": [gpuledger]}]
    (workdir / "rules").mkdir(parents=True)
    for rule_file in config["rule_files"]:
        rules = (DEPLOY / "prometheus" / rule_file).read_text()
        (workdir / rule_file).write_text(re.sub(r"interval: 1m", "interval: 1s", rules))
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def query(url: str, promql: str) -> list[dict[str, Any]]:
    import json
    import urllib.parse

    status, body = http_get(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}")
    assert status == 200, body[:300]
    result: list[dict[str, Any]] = json.loads(body)["data"]["result"]
    return result


def example_configuration(tmp_path: Path, lake: Path, prometheus: str, port: int) -> Path:
    """deploy/gpuledger.example.toml with this host's values (no Slurm here: its source goes)."""
    text = (DEPLOY / "gpuledger.example.toml").read_text()
    text = text.replace('lake = "/var/lib/gpuledger/lake"', f'lake = "{lake}"')
    text = text.replace("http://prometheus.example.org:9090", prometheus)
    text = text.replace("metrics_port = 9746", f"metrics_port = {port}")
    text = re.sub(r"every_s = 60 ", "every_s = 1  ", text, count=1)  # the prometheus source
    text = re.sub(r'\[\[sources\]\]\nkind = "slurm".*?\n\n', "", text, flags=re.S)
    text = text.replace("/etc/gpuledger/", f"{tmp_path}/")
    for name in ("smtp-password", "directory.toml"):
        (tmp_path / name).write_text("")
        (tmp_path / name).chmod(0o600)
    path = tmp_path / "gpuledger.toml"
    path.write_text(text)
    return path


def test_shipped_prometheus_config_rules_and_example_configuration_work_together(tmp_path):
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed: run `make system-deps`"
    fleet = SimulatedFleet(FleetConfig(cluster="della", gpus=GPUS, seed=5, collect_interval_s=1))
    exporters = ExporterServers(fleet, port=0).start()
    port, prom_port = free_port(), free_port()
    prom_url = f"http://127.0.0.1:{prom_port}"
    lake = tmp_path / "lake"
    config = example_configuration(tmp_path, lake, prom_url, port)
    prom_config = shipped_prometheus_config(
        tmp_path / "prom", sorted(exporters.targets.values()), f"127.0.0.1:{port}"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    env.update(
        GPULEDGER_CONFIG=str(config),  # as gpuledger.service sets it
        GPULEDGER_SERVICE_PIPELINE_EVERY_S="2",  # documented overrides
        GPULEDGER_SERVICE_DETECT="false",
        GPULEDGER_SERVICE_ALERT="false",  # no mail to smtp.example.org from a test
    )
    procs: list[subprocess.Popen[bytes]] = []
    log = tmp_path / "run.log"
    try:
        with (tmp_path / "prom.log").open("ab") as out:
            procs.append(
                subprocess.Popen(
                    [
                        binary,
                        f"--config.file={prom_config}",
                        f"--storage.tsdb.path={tmp_path / 'prom' / 'data'}",
                        f"--web.listen-address=127.0.0.1:{prom_port}",
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        wait_until("Prometheus", lambda: http_get(f"{prom_url}/-/ready", 2)[0] == 200, 60)
        with log.open("ab") as out:
            service = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "run"],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        procs.append(service)

        # the shipped scrape job reads the service's /metrics: how far behind live data the
        # example's Prometheus source is (samples_landed counts complete hour windows only)
        lag = wait_until(
            "Prometheus to scrape gpuledger's lag behind live data",
            lambda: query(prom_url, 'gpuledger_lag_seconds{job="gpuledger",cluster="della"}'),
            90,
            log,
        )
        assert 0 <= float(lag[0]["value"][1]) < 60
        assert query(prom_url, 'up{job="gpuledger"} == 1')
        wait_until(
            "mart freshness through Prometheus",
            lambda: query(prom_url, "gpuledger_marts_current_timestamp_seconds > 0"),
            60,
            log,
        )

        # the shipped recording rules over the fleet's real series: one busy ratio per GPU
        # (as many GPUs as the exporters publish GPU_UTIL for, read from their own /metrics:
        # the simulated fleet has GPUs that are offline or never report)
        def reporting() -> int:
            uuids: set[str] = set()
            for target in exporters.targets.values():
                text = http_get(f"http://{target}/metrics")[1].decode()
                uuids |= set(re.findall(r'^DCGM_FI_DEV_GPU_UTIL\{[^}]*UUID="([^"]+)"', text, re.M))
            return len(uuids)

        def rules_agree() -> bool:
            count = query(prom_url, "cluster:gpus:count")
            return bool(count) and 0 < float(count[0]["value"][1]) == reporting() <= GPUS

        wait_until("the recording rules to count the GPUs reporting", rules_agree, 30, log)
        effective = query(prom_url, "cluster:gpus_effective:sum")
        assert 0 <= float(effective[0]["value"][1]) <= GPUS
        # `gpuledger status` with only GPULEDGER_CONFIG (no --lake) finds the service's lake
        status = subprocess.run(
            [sys.executable, "-m", "app.cli", "status", "--check"],
            cwd=tmp_path,
            env={**env, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0, status.stdout + status.stderr
        assert "prometheus:della" in status.stdout and "pipeline" in status.stdout
        assert any((lake / "gpu_samples" / "cluster=della").iterdir())

        service.send_signal(signal.SIGTERM)  # systemctl stop
        assert service.wait(timeout=60) == 0, log.read_text()[-3000:]
        assert "gpuledger run: stopped" in log.read_text()
    finally:
        exporters.stop()
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)


def test_dashboard_unit_serves_under_the_proxy_path_it_documents(tmp_path):
    # gpuledger-dashboard.service as shipped, with its commented base path turned on
    import configparser
    import shlex

    unit = (DEPLOY / "systemd" / "gpuledger-dashboard.service").read_text()
    base = re.search(r"^# Environment=STREAMLIT_SERVER_BASE_URL_PATH=(\S+)$", unit, re.M)
    assert base, "the unit no longer shows how to serve under a path"
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(unit)
    argv = shlex.split(parser["Service"]["ExecStart"])[1:]
    port = free_port()
    argv[argv.index("--port") + 1] = str(port)
    config = example_configuration(tmp_path, tmp_path / "lake", "http://127.0.0.1:9", port)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPULEDGER_", "STREAMLIT_"))}
    env.update(GPULEDGER_CONFIG=str(config), STREAMLIT_SERVER_BASE_URL_PATH=base.group(1))
    log = tmp_path / "dashboard.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", *argv],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(
            "the dashboard under its path",
            lambda: http_get(f"{url}/{base.group(1)}/_stcore/health", 2)[0] == 200,
            90,
            log,
        )
        assert http_get(f"{url}/_stcore/health", 2)[0] == 404  # only under the path
        assert f"Dashboard on http://127.0.0.1:{port}" in log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)  # systemctl stop: Streamlit stops with it
        assert proc.wait(timeout=60) is not None
