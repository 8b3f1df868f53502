"""Fixtures of the Prometheus puller tests: a real Prometheus 2.42 on 127.0.0.1 (temp config, data
dir and free port, always stopped), multi-day history backfilled with promtool, the simulated
exporter fleet scraped live, and an independent reader of what Prometheus holds.

Handed out as fixtures (not imported from a helper module) so the tests work under
`--import-mode=importlib` without a `tests/__init__.py`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pytest

from collector.sim.exposition import FAMILIES, Family

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "prometheus"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 30.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, exc.read()
        finally:
            exc.close()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b""


@dataclass
class PrometheusServer:
    """One Prometheus process on 127.0.0.1 with its own config and data dir."""

    workdir: Path
    data_dir: Path
    scrape: list[dict[str, Any]] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> PrometheusServer:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail(
                "prometheus is not installed: run `make system-deps` (apt-get install prometheus)"
            )
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "dcgm", "static_configs": self.scrape}]
            if self.scrape
            else [],
        }
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "prometheus.yml").write_text(json.dumps(config), encoding="utf-8")
        log = open(self.workdir / "prometheus.log", "ab")  # noqa: SIM115 (closed with the process)
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={self.workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.data_dir}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=100y",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while http_get(f"{self.url}/-/ready", timeout=2)[0] != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.workdir / "prometheus.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"Prometheus did not become ready:\n{tail}")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)

    def api(self, path: str, **params: str) -> Any:
        status, body = http_get(f"{self.url}{path}?{urllib.parse.urlencode(params)}")
        assert status == 200, body[:500]
        return json.loads(body)["data"]


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[list[PrometheusServer]]:
    """Servers a test starts; every one is stopped at teardown."""
    started: list[PrometheusServer] = []
    yield started
    for server in started:
        server.stop()


@pytest.fixture
def start_prometheus(tmp_path: Path, prometheus: list[PrometheusServer]) -> Any:
    """Start a Prometheus scraping `scrape` (static_configs) every second; stopped at teardown."""

    def start(scrape: list[dict[str, Any]], name: str = "prom") -> PrometheusServer:
        workdir = tmp_path / name
        server = PrometheusServer(workdir=workdir, data_dir=workdir / "data", scrape=scrape)
        prometheus.append(server)
        return server.start()

    return start


# ---------------------------------------------------------------- independent expected side


def read_prometheus(
    server: PrometheusServer,
    families: tuple[Family, ...],
    selector: str,
    start_ms: int,
    end_ms: int,
) -> pa.Table:
    """Every sample Prometheus holds in [start, end) for `families`, in contract units:
    one row per (family, series, ts) with `gpu_uuid`, `ts` (ms), `column`, `value`, `hpc_job`.

    Read with the HTTP API and json only (not the collector's code), converting units with the
    renderer's own table.
    """
    out: dict[str, list[Any]] = {"gpu_uuid": [], "ts": [], "column": [], "value": [], "hpc_job": []}
    for family in families:
        query = f"{family.name}{{{selector}}}[{end_ms - 1 - start_ms}ms]"
        data = server.api("/api/v1/query", query=query, time=f"{(end_ms - 1) / 1000:.3f}")
        for series in data["result"]:
            labels = series["metric"]
            for ts, raw in series["values"]:
                value = float(raw) / family.factor
                if family.column == "mem_temp_c" and value == 0:
                    value = float("nan")  # 0 on GDDR boards means "not supported"
                out["gpu_uuid"].append(labels["UUID"])
                out["ts"].append(round(ts * 1000))
                out["column"].append(family.column)
                out["value"].append(value)
                out["hpc_job"].append(labels.get("hpc_job"))
    return pa.table(
        {
            "gpu_uuid": pa.array(out["gpu_uuid"], pa.string()),
            "ts": pa.array(out["ts"], pa.int64()),
            "column": pa.array(out["column"], pa.string()),
            "value": pa.array(out["value"], pa.float64()),
            "hpc_job": pa.array(out["hpc_job"], pa.string()),
        }
    )


def read_lake(lake: Path, table: str) -> pa.Table:
    """Every row of `table` in the lake (Hive partitions read as columns)."""
    folder = lake / table
    if not folder.is_dir():
        return pa.table({})
    return pads.dataset(folder, format="parquet", partitioning="hive").to_table()


def assert_lake_matches(lake_rows: pa.Table, expected: pa.Table) -> dict[str, int]:
    """Row count, keys and every value of `lake_rows` (gpu_samples) against `expected`.

    Returns the numbers compared, for the report.
    """
    ts = pc.cast(pc.cast(lake_rows.column("ts"), pa.timestamp("ms")), pa.int64()).to_numpy()
    uuid = lake_rows.column("gpu_uuid").to_pylist()
    keys = list(zip(uuid, ts.tolist(), strict=True))
    assert len(set(keys)) == len(keys), "duplicate (gpu_uuid, ts) rows in the lake"
    exp_keys = set(
        zip(expected.column("gpu_uuid").to_pylist(), expected.column("ts").to_pylist(), strict=True)
    )
    assert len(keys) == len(exp_keys), (
        f"lake has {len(keys)} rows, Prometheus {len(exp_keys)} scrapes"
    )
    assert set(keys) == exp_keys
    position = {key: i for i, key in enumerate(keys)}
    compared = 0
    for column in sorted(set(expected.column("column").to_pylist())):
        part = expected.filter(pc.equal(expected.column("column"), column))
        rows = np.array(
            [
                position[k]
                for k in zip(
                    part.column("gpu_uuid").to_pylist(), part.column("ts").to_pylist(), strict=True
                )
            ]
        )
        want = part.column("value").to_numpy()
        lake_col = lake_rows.column(column).to_numpy(zero_copy_only=False)[rows]
        got = np.array([np.nan if v is None else float(v) for v in lake_col])
        null_want = np.isnan(want)
        assert np.array_equal(np.isnan(got), null_want), f"{column}: nulls differ"
        close = np.isclose(got[~null_want], want[~null_want], rtol=2e-7, atol=0)
        assert close.all(), f"{column}: {int((~close).sum())} values differ, e.g. " + str(
            list(zip(got[~null_want][~close][:3], want[~null_want][~close][:3], strict=True))
        )
        compared += len(want)
    return {"rows": len(keys), "values": compared}


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
def history_server(
    history: History, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    """One Prometheus serving the history, shared by the tests that only read it."""
    server = serve_history(history, tmp_path_factory.mktemp("history-prom"))
    yield server
    server.stop()


@pytest.fixture
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
