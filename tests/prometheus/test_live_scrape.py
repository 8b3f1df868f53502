"""Acceptance (a): Prometheus scrapes the simulated exporter fleet every second; a follower pulls
while it scrapes, stops cleanly on SIGTERM, and a bounded rerun leaves in the lake exactly the
samples Prometheus holds, series by series (≤4.8 names, `Hostname`, `hpc_job` labels).

The fleet starts with the first test of this folder (conftest `live_fleet`) and this module runs
last, so the scraping overlaps the other tests."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

from app.commands.prometheus import command_prometheus

pytestmark = [pytest.mark.live, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SCRAPE_S = 75.0
SELECTOR = 'cluster="live"'


def _all_targets_down(server) -> bool:
    result = server.api("/api/v1/query", query=f"max(up{{{SELECTOR}}})")["result"]
    return bool(result) and float(result[0]["value"][1]) == 0.0


def test_the_lake_holds_exactly_what_prometheus_scraped(live_fleet, helpers, tmp_path):
    server = live_fleet.server
    since = f"@{live_fleet.first_scrape - 120:.3f}"
    lake = tmp_path / "lake"
    follow = [
        "--url", server.url, "--cluster", "live", "--selector", SELECTOR, "--since", since,
        "--columns", "all", "--window", "1m", "--poll", "2s", "--settle", "5s",
        "--lake", str(lake),
    ]  # fmt: skip
    follower = subprocess.Popen(
        helpers.collector(*follow), cwd=REPO, env=helpers.env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        live_fleet.wait_scraping(SCRAPE_S)
        # the follower lands each window once it is complete and settled: on a loaded machine
        # its start alone can take longer than the scraping, so wait for its first landing
        deadline = time.monotonic() + 120
        while not any(lake.glob("gpu_samples/**/*.parquet")):
            assert follower.poll() is None, follower.communicate()
            assert time.monotonic() < deadline, "the follower landed nothing in 120 s"
            time.sleep(1)
        time.sleep(3)  # at least one more poll of the follower
        live_fleet.exporters.stop()  # the fleet goes quiet: Prometheus' data stops changing
        deadline = time.monotonic() + 30
        while not _all_targets_down(server):
            assert time.monotonic() < deadline, "Prometheus never saw the exporters stop"
            time.sleep(0.2)
        follower.send_signal(signal.SIGTERM)
        out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    assert "stopped by signal" in out and "Traceback" not in err
    followed = helpers.read_lake(lake, "gpu_samples").num_rows
    assert followed > 0

    end = time.time()
    result = CliRunner().invoke(
        command_prometheus,
        [
            *follow[:-8],
            "--until",
            f"@{end:.3f}",
            "--window",
            "1m",
            "--settle",
            "0s",
            "--lake",
            str(lake),
            "--quiet",
        ],
    )

    assert result.exit_code == 0, result.output
    start_ms = int((live_fleet.first_scrape - 120) * 1000) // 60_000 * 60_000
    end_ms = (int(end * 1000) // 60_000 + 1) * 60_000
    expected = helpers.read_prometheus(server, helpers.families_48, SELECTOR, start_ms, end_ms)
    samples = helpers.read_lake(lake, "gpu_samples")
    compared = helpers.assert_lake_matches(samples, expected)
    scrapes = expected.filter(pc.equal(expected.column("column"), "gpu_util_pct")).num_rows
    assert compared["rows"] == scrapes  # every family of one scrape is on that scrape's row
    assert compared["rows"] >= 24 * (SCRAPE_S - 5)
    print(f"live: followed {followed} rows, then {compared}; {scrapes} GPU scrapes")
    assert set(pc.unique(samples.column("interval_s")).to_pylist()) == {1.0}
    assert set(samples.column("node").to_pylist()) == set(live_fleet.targets)
    jobs = helpers.read_lake(lake, "job_gpus")
    labelled = set(
        zip(
            *(
                samples.filter(pc.is_valid(samples.column("hpc_job"))).column(c).to_pylist()
                for c in ("hpc_job", "gpu_uuid")
            ),
            strict=True,
        )
    )
    assert (
        set(
            zip(jobs.column("job_id").to_pylist(), jobs.column("gpu_uuid").to_pylist(), strict=True)
        )
        == labelled
    )
