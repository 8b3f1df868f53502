"""Soak: `gpuledger run` against the simulated exporter fleet behind a real Prometheus and the
real Slurm, with Prometheus killed (SIGKILL) and restarted, and gpuledger itself stopped with
SIGTERM and restarted. The lake must end with exactly the samples Prometheus holds and exactly
the jobs sacct knows, with no duplicates, and the self-monitoring must say what happened.

Time is accelerated: dcgm-exporter values change and Prometheus scrapes every second, and each
source is collected every 1-3 s, so the ~2.5 minutes this runs are as many scrape rounds (about
150 per GPU) as 37 minutes at dcgm-exporter's default 15 s, and as many Slurm polls as 5 hours
at the default 60 s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pytest

from collector.sim.exporters import ExporterServers, FleetConfig, SimulatedFleet
from collector.sim.exposition import FAMILIES
from tests.infra.permissions import world_accessible
from tests.infra.prometheus import (
    PrometheusServer,
    assert_lake_matches,
    free_port,
    read_lake,
    read_prometheus,
)
from tests.slurm_live.cluster import CLUSTER, SlurmCluster
from warehouse.connection import connect

REPO = Path(__file__).resolve().parents[2]
SELECTOR = f'cluster="{CLUSTER}"'
GPUS = 16

pytestmark = [pytest.mark.live, pytest.mark.slow]


def start_gpuledger(config: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "app.cli", "run", "--config", str(config)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def stop_gpuledger(proc: subprocess.Popen[bytes], log: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]


def status(lake: Path) -> dict:
    return json.loads((lake / "_state" / "service.json").read_text())


def metric(state: dict, name: str, **labels: str) -> float:
    return sum(v for lab, v in state["metrics"].get(name, []) if labels.items() <= lab.items())


def wait_until(what: str, ready, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_soak_with_a_killed_source_and_a_restart(slurm_cluster: SlurmCluster, tmp_path):
    c = slurm_cluster
    c.start()  # idempotent: earlier tests in this session stop daemons on purpose
    c.jobs_dir.mkdir(mode=0o1777, exist_ok=True)
    fleet = SimulatedFleet(FleetConfig(cluster=CLUSTER, gpus=GPUS, seed=21, collect_interval_s=1))
    exporters = ExporterServers(fleet, port=0).start()
    prom = PrometheusServer(
        workdir=tmp_path / "prom",
        data_dir=tmp_path / "prom" / "data",
        scrape=[{"targets": sorted(exporters.targets.values()), "labels": {"cluster": CLUSTER}}],
    )
    lake = tmp_path / "lake"
    log = tmp_path / "run.log"
    port = free_port()
    config = tmp_path / "gpuledger.toml"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        prom.start()
        first_scrape = time.time()
        config.write_text(
            f'lake = "{lake}"\n'
            f"[service]\nmetrics_port = {port}\npipeline_every_s = 3\nstop_timeout_s = 60\n"
            f'[[sources]]\nkind = "prometheus"\ncluster = "{CLUSTER}"\nurl = "{prom.url}"\n'
            f"selector = '{SELECTOR}'\nwindow_s = 60\nsettle_s = 5\nevery_s = 1\n"
            # every family, as the comparison with Prometheus below reads them all (the
            # default pulls only the columns gpuledger reads)
            'columns = "all"\n'
            f'[[sources]]\nkind = "slurm"\ncluster = "{CLUSTER}"\nevery_s = 2\n'
        )
        procs.append(start_gpuledger(config, log))
        jobs = [
            c.submit("alice", "--job-name=soak-a", "--gres=gpu:1", wrap="sleep 5"),
            c.submit("bob", "--job-name=soak-b", "--gres=gpu:h100:2", wrap="sleep 15"),
        ]
        wait_until(
            "samples and jobs landing",
            lambda: (
                (lake / "_state" / "service.json").exists()
                and metric(status(lake), "gpuledger_samples_landed_total") > 0
                and metric(status(lake), "gpuledger_jobs_landed_total") > 0
            ),
            90,
        )

        # A source dies: Prometheus is killed, stays down past the puller's retries, comes back.
        assert prom.proc is not None
        prom.proc.kill()
        prom.proc.wait(timeout=20)
        wait_until(
            "the Prometheus task to fail",
            lambda: status(lake)["tasks"][f"prometheus:{CLUSTER}"]["failures"] > 0,
            90,
        )
        during = status(lake)
        assert during["tasks"][f"slurm:{CLUSTER}"]["consecutive_failures"] == 0  # others go on
        prom.start()
        wait_until(
            "the Prometheus task to recover",
            lambda: status(lake)["tasks"][f"prometheus:{CLUSTER}"]["consecutive_failures"] == 0,
            120,
        )
        before_restart = status(lake)
        assert (
            metric(before_restart, "gpuledger_source_errors_total", source=f"prometheus:{CLUSTER}")
            >= 1
        )
        assert "Prometheus" in (
            before_restart["tasks"][f"prometheus:{CLUSTER}"]["last_error"] or ""
        )

        # gpuledger itself: SIGTERM, then a fresh start that resumes from the checkpoints.
        stop_gpuledger(procs[-1], log)
        assert metric(status(lake), "gpuledger_up") == 0
        jobs.append(c.submit("carol", "--job-name=soak-c", "--gres=gpu:1", wrap="sleep 3"))
        procs.append(start_gpuledger(config, log))
        jobs.append(c.submit("alice", "--job-name=soak-d", "--gres=gpu:a100:1", wrap="sleep 4"))
        for job in jobs:
            c.wait_ended(job, "COMPLETED", timeout=90)
        time.sleep(max(0.0, first_scrape + 120 - time.time()))

        exporters.stop()  # the fleet goes quiet; let the last samples settle and be pulled
        end = time.time()
        wait_until(
            "the last window to be pulled and the last jobs to land",
            lambda: status(lake)["written_at"] > end + 12,
            60,
        )
        time.sleep(8)
        stop_gpuledger(procs[-1], log)
        final = status(lake)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        exporters.stop()
        prom.stop()

    output = log.read_text()
    assert "Traceback" not in output, output[-3000:]

    # Exactly what Prometheus holds, series by series (the outage is a gap on both sides).
    start_ms = int((first_scrape - 120) * 1000) // 60_000 * 60_000
    end_ms = (int(time.time() * 1000) // 60_000 + 1) * 60_000
    prom.start()
    try:
        expected = read_prometheus(prom, FAMILIES["4.8"], SELECTOR, start_ms, end_ms)
    finally:
        prom.stop()
    samples = read_lake(lake, "gpu_samples")
    compared = assert_lake_matches(samples, expected)
    scrapes = expected.filter(pc.equal(expected.column("column"), "gpu_util_pct")).num_rows
    assert compared["rows"] == scrapes >= GPUS * 90

    # Exactly the jobs sacct knows (every one of this session's cluster), one version each.
    con = duckdb.connect()
    lake_jobs = dict(
        con.execute(
            f"SELECT job_id, any_value(state) FROM read_parquet('{lake}/jobs/**/*.parquet', "
            "hive_partitioning=true) GROUP BY job_id"
        ).fetchall()
    )
    # sacct's own window starts at today's midnight: a run across midnight left out the jobs
    # before it, which the collector's first window (a day and an hour back) holds
    since = "--starttime=now-25hours"
    expected_jobs = {row["JobID"]: row["State"] for row in c.settled_sacct("--allusers", since)}
    assert set(lake_jobs) >= set(jobs)
    assert set(lake_jobs) == {j for j in expected_jobs if "." not in j}
    dup = con.execute(
        f"SELECT count(*) - count(DISTINCT (job_id, updated_ts)) FROM "
        f"read_parquet('{lake}/jobs/**/*.parquet')"
    ).fetchone()
    assert dup == (0,)
    landed = connect(lake).execute("SELECT job_id, state FROM jobs_latest").fetchall()
    assert len(landed) == len(lake_jobs)
    assert {job: "COMPLETED" for job in jobs}.items() <= dict(landed).items()

    # What the service says about the second run: up, then stopped; every task healthy.
    assert metric(final, "gpuledger_up") == 0
    assert all(t["consecutive_failures"] == 0 for t in final["tasks"].values())
    assert metric(final, "gpuledger_samples_landed_total") > 0
    assert world_accessible(lake) == []
    print(f"soak: {compared['rows']} rows, {compared['values']} values, {len(lake_jobs)} jobs")
