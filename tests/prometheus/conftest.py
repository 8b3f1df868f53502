"""Fixtures of the Prometheus puller tests: a real Prometheus 2.42 on 127.0.0.1 (temp config, data
dir and free port, always stopped), multi-day history backfilled with promtool, the simulated
exporter fleet scraped live, and an independent reader of what Prometheus holds.

Handed out as fixtures (not imported from a helper module) so the tests work under
`--import-mode=importlib` without a `tests/__init__.py`.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from collector.sim.exposition import FAMILIES
from tests.infra.live import live_service
from tests.infra.prometheus import (
    PrometheusServer,
    assert_lake_matches,
    http_get,
    read_lake,
    read_prometheus,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "prometheus"
LIVE_MODULE = "test_live_scrape"
LIVE_SCRAPE_S = 75.0  # how long Prometheus scrapes the fleet before the live test pulls
HISTORY_DAYS = 2
HISTORY_STEP_S = 15  # 2 days at 15 s = 11,520 points per series: past the 11,000-point cap
HISTORY_FAMILIES = (  # the 4.9 names backfilled (a subset keeps promtool quick)
    "DCGM_FI_DEV_GPU_UTIL_RATIO",
    "DCGM_FI_DEV_BOARD_POWER_WATTS",
    "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL",
    "DCGM_FI_DEV_FB_USED_BYTES",
    "DCGM_FI_PROF_SM_UTIL_RATIO",
    "DCGM_FI_DEV_XID_ERROR",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the live-scrape test after the others of this folder: Prometheus scrapes meanwhile."""
    here = [i for i, item in enumerate(items) if item.path.parent == Path(__file__).parent]
    ordered = sorted((items[i] for i in here), key=lambda item: item.path.stem == LIVE_MODULE)
    for i, item in zip(here, ordered, strict=True):
        items[i] = item


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[list[PrometheusServer]]:
    """Servers a test starts; every one is stopped at teardown."""
    started: list[PrometheusServer] = []
    yield started
    for server in started:
        server.stop()


@pytest.fixture
@live_service
def start_prometheus(tmp_path: Path, prometheus: list[PrometheusServer]) -> Any:
    """Start a Prometheus scraping `scrape` (static_configs) every second; stopped at teardown."""

    def start(scrape: list[dict[str, Any]], name: str = "prom") -> PrometheusServer:
        workdir = tmp_path / name
        server = PrometheusServer(workdir=workdir, data_dir=workdir / "data", scrape=scrape)
        prometheus.append(server)
        return server.start()

    return start


# ---------------------------------------------------------------- independent expected side


@pytest.fixture
def helpers() -> Any:
    """The module-level helpers, as a namespace (test modules cannot import conftest)."""

    class Helpers:
        read_prometheus = staticmethod(read_prometheus)
        read_lake = staticmethod(read_lake)
        assert_lake_matches = staticmethod(assert_lake_matches)
        http_get = staticmethod(http_get)
        families_48 = FAMILIES["4.8"]
        families_49 = FAMILIES["4.9"]
        history_families = tuple(f for f in FAMILIES["4.9"] if f.name in HISTORY_FAMILIES)

        @staticmethod
        def collector(*args: str) -> list[str]:
            """argv running `gpuledger collect prometheus` in a fresh interpreter."""
            return [sys.executable, "-m", "app.commands.prometheus", *args]

        @staticmethod
        def env() -> dict[str, str]:
            return {**os.environ, "PYTHONPATH": str(REPO)}

    return Helpers


# ---------------------------------------------------------------- backfilled history


@dataclass(frozen=True)
class History:
    """Blocks made by promtool from simulated 4.9-generation history (copy before serving)."""

    blocks: Path
    start: dt.datetime
    end: dt.datetime
    gpus: int
    samples: int


@pytest.fixture(scope="session")
@live_service
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """Two days at 15 s of one 8-GPU node, written as OpenMetrics and loaded with promtool."""
    from collector.sim.exporters import FleetConfig
    from collector.sim.exporters import history as simulate_history
    from collector.sim.exposition import render_openmetrics

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail(
            "promtool is not installed: run `make system-deps` (apt-get install prometheus)"
        )
    base = tmp_path_factory.mktemp("history")
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = today - dt.timedelta(days=HISTORY_DAYS + 1)  # ends a day before now: clear of the head
    samples = simulate_history(
        FleetConfig(cluster="hist", gpus=8, seed=7),
        start=start,
        days=HISTORY_DAYS,
        interval_s=HISTORY_STEP_S,
    )
    text = base / "history.om"
    with open(text, "w", encoding="utf-8") as out:
        for chunk in render_openmetrics(
            samples,
            version="4.9",
            families=HISTORY_FAMILIES,
            extra_labels=(("cluster", "hist"), ("instance", "gpu-001:9400"), ("job", "dcgm")),
        ):
            out.write(chunk)
    blocks = base / "blocks"
    done = subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--max-block-duration=72h",
            str(text),
            str(blocks),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text.unlink()
    return History(
        blocks=blocks,
        start=start,
        end=start + dt.timedelta(days=HISTORY_DAYS),
        gpus=8,
        samples=samples.num_rows,
    )


def serve_history(history: History, workdir: Path) -> PrometheusServer:
    """A Prometheus over a private copy of the history blocks (blocks in place before start)."""
    data = workdir / "data"
    shutil.copytree(history.blocks, data)
    return PrometheusServer(workdir=workdir, data_dir=data).start()


@pytest.fixture(scope="session")
@live_service
def history_server(
    history: History, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    """One Prometheus serving the history, shared by the tests that only read it."""
    server = serve_history(history, tmp_path_factory.mktemp("history-prom"))
    yield server
    server.stop()


@pytest.fixture
@live_service
def serve_history_copy(history: History, tmp_path: Path, prometheus: list[PrometheusServer]) -> Any:
    """Start a private Prometheus over the history (for tests that stop and restart it)."""

    def start(name: str = "prom") -> PrometheusServer:
        server = serve_history(history, tmp_path / name)
        prometheus.append(server)
        return server

    return start


# ---------------------------------------------------------------- live scraping


@dataclass
class LiveFleet:
    """Simulated exporters (4.8 generation) scraped every second by a real Prometheus."""

    server: PrometheusServer
    exporters: Any
    targets: dict[str, str]
    first_scrape: float  # wall time of the first scrape Prometheus stored

    def wait_scraping(self, seconds: float) -> None:
        remaining = self.first_scrape + seconds - time.time()
        if remaining > 0:
            time.sleep(remaining)


@pytest.fixture(scope="session")
def live_fleet(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveFleet | None]:
    """Started by the first test of this folder when the live test is selected (so Prometheus
    scrapes while the other tests run); None otherwise."""
    wanted = any(item.path.stem == LIVE_MODULE for item in request.session.items)
    if not wanted:
        yield None
        return
    from collector.sim.exporters import ExporterServers, FleetConfig, SimulatedFleet

    fleet = SimulatedFleet(FleetConfig(cluster="live", gpus=24, seed=11, collect_interval_s=2))
    exporters = ExporterServers(fleet, port=0).start()
    workdir = tmp_path_factory.mktemp("live-prom")
    server = PrometheusServer(
        workdir=workdir,
        data_dir=workdir / "data",
        scrape=[{"targets": sorted(exporters.targets.values()), "labels": {"cluster": "live"}}],
    )
    try:
        server.start()
        deadline = time.monotonic() + 60
        while True:  # the first scrape lands a few seconds after start
            result = server.api(
                "/api/v1/query", query='count(DCGM_FI_DEV_GPU_UTIL{cluster="live"})'
            )["result"]
            if result and int(result[0]["value"][1]) == 24:
                break
            assert time.monotonic() < deadline, "Prometheus never scraped the simulated exporters"
            time.sleep(0.2)
        yield LiveFleet(
            server=server, exporters=exporters, targets=exporters.targets, first_scrape=time.time()
        )
    finally:
        exporters.stop()
        server.stop()


@pytest.fixture(autouse=True)
def _start_live_fleet_early(live_fleet: LiveFleet | None) -> None:
    """Every test here requests the live fleet, so it starts with the first one."""
