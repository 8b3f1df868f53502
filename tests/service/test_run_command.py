"""`gpuledger run` end to end against simulated dcgm-exporters, and its configuration checks."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from app.cli import cli
from collector.sim.exporters import ExporterServers, FleetConfig, SimulatedFleet
from tests.infra.permissions import world_accessible


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check(tmp_path: Path, text: str) -> tuple[int, str]:
    path = tmp_path / "gpuledger.toml"
    path.write_text(text)
    result = CliRunner().invoke(cli, ["config", "check", "--config", str(path)], env={})
    return result.exit_code, result.output


def test_config_check_prints_every_source_entry(tmp_path):
    code, output = check(
        tmp_path,
        '[[sources]]\nkind = "slurm"\ncluster = "della"\n'
        '[[sources]]\nkind = "kubernetes"\ncluster = "k8s"\nnamespaces = ["ml"]\n',
    )
    assert code == 0, output
    entries = output.split("[[sources]]")[1:]
    assert len(entries) == 2, output
    slurm, kube = entries
    assert "kind = 'slurm'" in slurm and "cluster = 'della'" in slurm
    assert "every_s = 60.0" in slurm  # defaults too: every effective key
    assert "kind = 'kubernetes'" in kube and "namespaces = ['ml']" in kube
    assert "# kubeconfig is unset" in kube


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[[sources]]\nkind = "prom"\ncluster = "a"', "sources[0].kind"),
        ('[[sources]]\nkind = "prometheus"\ncluster = "a"', "sources[0].url"),
        ('[[sources]]\nkind = "slurm"\ncluster = "a"\nevery = 5', "sources[0].every"),
        ('[[sources]]\nkind = "slurm"\ncluster = "a"\nevery_s = "often"', "sources[0].every_s"),
        ('[[sources]]\nkind = "slurm"\ncluster = "a"\nevery_s = 0', "sources[0].every_s"),
        (
            '[[sources]]\nkind = "slurm"\ncluster = "a"\n[[sources]]\nkind = "prometheus"\n'
            'cluster = "a"\nurl = "prometheus:9090"',
            "sources[1].url",
        ),
        ('[[sources]]\nkind = "dcgm-exporter"\ncluster = "a"\nurls = []', "sources[0].urls"),
        (
            '[[sources]]\nkind = "kubernetes"\ncluster = "a"\nnamespace_accounts = ["ml, x"]',
            "sources[0].namespace_accounts",
        ),
        ("[service]\nmetrics_port = 70000", "service.metrics_port"),
        ("[service]\npipeline_every_s = -1", "service.pipeline_every_s"),
        # waits no timer takes (the pipeline's thread died of an OverflowError), and windows
        # the puller refuses at every round
        ("[service]\npipeline_every_s = 1e12", "service.pipeline_every_s"),
        ("[service]\npipeline_every_s = inf", "service.pipeline_every_s"),
        ('[[sources]]\nkind = "slurm"\ncluster = "a"\nevery_s = inf', "sources[0].every_s"),
        (
            '[[sources]]\nkind = "dcgm-exporter"\ncluster = "a"\nurls = ["http://n:9400/m"]\n'
            "timeout_s = -1",
            "sources[0].timeout_s",
        ),
        (
            '[[sources]]\nkind = "prometheus"\ncluster = "a"\nurl = "http://p:9090"\nwindow_s = 0',
            "sources[0].window_s",
        ),
        # each row stands for every_s: above an hour the marts take every row for none
        (
            '[[sources]]\nkind = "dcgm-exporter"\ncluster = "a"\nurls = ["http://n:9400/m"]\n'
            "every_s = 7200",
            "sources[0].every_s: expected at most 3600 s",
        ),
        ("[sources]\nkind = 'slurm'", "sources"),
        # a name that long cannot go into the lake's file names
        (f'[[sources]]\nkind = "slurm"\ncluster = "{"c" * 101}"', "sources[0].cluster: longer"),
    ],
)
def test_config_check_names_the_bad_source_key(tmp_path, text, named):
    code, output = check(tmp_path, text)
    assert code == 1, output
    assert named in output
    assert "Traceback" not in output


def test_a_valid_service_config_passes(tmp_path):
    code, output = check(
        tmp_path,
        '[service]\nmetrics_port = 0\n[[sources]]\nkind = "slurm"\ncluster = "a"\n'
        '[[sources]]\nkind = "dcgm-exporter"\ncluster = "a"\nurls = ["http://n1:9400/metrics"]',
    )
    assert code == 0, output
    assert "metrics_port = 0" in output


def test_a_metrics_port_in_use_is_one_line(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    (tmp_path / "g.toml").write_text(
        f'lake = "{tmp_path / "lake"}"\n[service]\nmetrics_port = {port}\n'
        '[[sources]]\nkind = "dcgm-exporter"\ncluster = "a"\nurls = ["http://127.0.0.1:9/m"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "run", "--config", str(tmp_path / "g.toml")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        taken.close()
    assert done.returncode == 1, done.stderr
    assert f"service.metrics_port: cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_without_sources_says_so(tmp_path):
    (tmp_path / "g.toml").write_text("[service]\nmetrics_port = 0\n")
    result = CliRunner().invoke(cli, ["run", "--config", str(tmp_path / "g.toml")], env={})
    assert result.exit_code == 1
    assert "no [[sources]]" in result.output


def test_a_second_run_on_one_lake_is_refused_naming_the_first(tmp_path):
    # two services on one lake overwrote each other's service.json and collected twice
    from app.service.service_lock import service_lock
    from warehouse.lake import Lake

    lake = Lake.at(tmp_path / "lake")
    config = tmp_path / "g.toml"
    config.write_text(
        "[service]\nmetrics_port = 0\n[[sources]]\n"
        'kind = "dcgm-exporter"\ncluster = "a"\nurls = ["http://127.0.0.1:9/metrics"]\n'
    )
    args = ["run", "--once", "--config", str(config), "--lake", str(lake.root)]
    with service_lock(lake):
        result = CliRunner().invoke(cli, args, env={})
        assert result.exit_code == 1
        assert result.output.startswith(
            f"Error: another gpuledger run serves the lake {str(lake.root)!r}: pid {os.getpid()} "
        )
        assert result.output.count("\n") == 1
        assert not (lake.root / "_state" / "service.json").exists()
    # the first stopped: its record is gone and the next takes the lock
    assert (lake.root / "_state" / "locks" / "service.lock").read_text() == ""
    with service_lock(lake):
        pass


@pytest.mark.slow
def test_run_collects_attributes_and_stops_cleanly_on_sigterm(tmp_path):
    fleet = SimulatedFleet(FleetConfig(cluster="svc", gpus=8, seed=5, collect_interval_s=1))
    exporters = ExporterServers(fleet, port=0).start()
    port = free_port()
    lake = tmp_path / "lake"
    urls = [f"http://{t}/metrics" for t in sorted(exporters.targets.values())]
    (tmp_path / "g.toml").write_text(
        f'lake = "{lake}"\n[service]\nmetrics_port = {port}\npipeline_every_s = 2\n'
        f'detect = false\nalert = false\n[[sources]]\nkind = "dcgm-exporter"\n'
        f'cluster = "svc"\nevery_s = 1\nurls = {json.dumps(urls)}\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    log = tmp_path / "run.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "run", "--config", str(tmp_path / "g.toml")],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 90
        metrics = ""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    metrics = r.read().decode()
            except OSError:
                metrics = ""
            ok = 'gpuledger_task_runs_total{outcome="ok",task="pipeline"} '
            if ok in metrics and int(metrics.split(ok)[1].split()[0]) >= 2:
                break
            time.sleep(0.5)
        assert 'gpuledger_samples_landed_total{source="dcgm-exporter:svc"}' in metrics
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
            assert json.loads(r.read())["status"] == "ok"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        exporters.stop()
    output = log.read_text()
    assert proc.returncode == 0, output
    assert "Traceback" not in output
    con = duckdb.connect()
    rows, distinct = con.execute(
        f"SELECT count(*), count(DISTINCT (gpu_uuid, ts)) FROM '{lake}/gpu_samples/**/*.parquet'"
    ).fetchone()
    assert rows == distinct > 0  # no duplicates
    status = CliRunner().invoke(cli, ["status", "--lake", str(lake)], env={})
    assert "service: stopped" in status.output
    assert "dcgm-exporter:svc" in status.output
    landed = int(status.output.split("samples landed")[1].split()[0].replace(",", ""))
    assert landed == rows
    assert world_accessible(lake) == []  # lake and _state (checkpoints, status) private
