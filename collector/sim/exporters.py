"""Serve each simulated node's dcgm-exporter /metrics on 127.0.0.1, advancing in real time.

`SimulatedFleet` simulates one steady-state day of a fleet (day 2 of a two-day world: jobs
running, a GPU failing, a hot node) at the exporter's collect interval, and maps the wall clock
onto it: a scrape at wall time t sees each GPU's latest simulated sample at
`day start + (t - start + offset) mod 1 day`, as a real exporter serves its last collection.
GPUs whose telemetry stops (an exporter gap, a GPU fallen off the bus) leave the scrape.
`ExporterServers` gives every node its own port (`port`, `port + 1`, …), the layout a Prometheus
`static_configs` target list scrapes directly. `history` gives days of samples to backfill.
"""

from __future__ import annotations

import datetime as dt
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from collector.errors import ConfigError
from collector.sim.exposition import EXPORTER_VERSIONS, ExporterVersion, render_exposition
from collector.sim.runner import SimConfig, build_world, initial_energy
from collector.sim.telemetry import make_samples
from collector.sim.workload import DAY_S

__all__ = [
    "ExporterServers",
    "FleetConfig",
    "SimulatedFleet",
    "history",
    "scrape_config",
]

DAY_MS: Final = int(DAY_S) * 1000
STALE_INTERVALS: Final = 3  # a GPU with no sample for this many intervals is not exported
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

WallClock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """The simulated fleet behind the exporters.

    `collect_interval_s` is dcgm-exporter's `-c`: how often values change. `offset_s`: how far
    into the simulated day the wall clock starts (mid-morning: the cluster is busy).
    """

    cluster: str = "sim"
    gpus: int = 16
    seed: int = 42
    collect_interval_s: int = 5
    version: ExporterVersion = "4.8"
    offset_s: float = 10 * 3600.0

    def validate(self) -> None:
        if self.version not in EXPORTER_VERSIONS:
            raise ConfigError(
                f"exporter version {self.version!r}: expected one of {', '.join(EXPORTER_VERSIONS)}"
            )
        self.sim_config(days=2).validate()

    def sim_config(self, *, days: int, start: dt.datetime | None = None) -> SimConfig:
        extra = {} if start is None else {"start": start}
        return SimConfig(
            cluster=self.cluster,
            gpus=self.gpus,
            days=days,
            seed=self.seed,
            interval_s=self.collect_interval_s,
            **extra,  # type: ignore[arg-type]
        )


def _simulate_days(cfg: SimConfig, days: range, gpus: np.ndarray | None) -> tuple[pa.Table, Any]:
    world = build_world(cfg, np.random.default_rng([cfg.seed, 1]))
    chosen = np.arange(world.fleet.n_gpus) if gpus is None else gpus
    energy = initial_energy(cfg, world.fleet.n_gpus)
    t0_ms = int(cfg.start.timestamp() * 1000)
    parts = [
        make_samples(
            fleet=world.fleet,
            jobs=world.jobs,
            allocs=world.allocs,
            health=world.health,
            xids=world.xids,
            energy=energy,
            gpus=chosen,
            day=day,
            t0_ms=t0_ms,
            interval_s=cfg.interval_s,
            horizon_s=cfg.days * DAY_S,
            rng=np.random.default_rng([cfg.seed, 100, day, 0]),
        )
        for day in days
    ]
    return pa.concat_tables(parts), world


def history(
    cfg: FleetConfig, *, start: dt.datetime, days: int, interval_s: int, gpus: int | None = None
) -> pa.Table:
    """`days` of simulated samples from `start` at `interval_s` (the first `gpus` GPUs only)."""
    sim = SimConfig(
        cluster=cfg.cluster,
        gpus=cfg.gpus,
        days=days,
        seed=cfg.seed,
        interval_s=interval_s,
        start=start,
    )
    sim.validate()
    chosen = None if gpus is None else np.arange(min(gpus, cfg.gpus))
    table, _ = _simulate_days(sim, range(days), chosen)
    return table


class SimulatedFleet:
    """The fleet's current telemetry at any wall-clock time (see the module docstring)."""

    def __init__(self, cfg: FleetConfig, *, clock: WallClock = time.time) -> None:
        cfg.validate()
        self.cfg = cfg
        self.clock = clock
        sim = cfg.sim_config(days=2)
        table, world = _simulate_days(sim, range(1, 2), None)
        self.nodes: tuple[str, ...] = world.fleet.nodes
        self.day_start_ms = int(sim.start.timestamp() * 1000) + DAY_MS
        gpu_of_row = pc.index_in(table.column("gpu_uuid"), value_set=pa.array(world.fleet.uuids))
        order = np.lexsort((table.column("ts").cast(pa.int64()).to_numpy(), gpu_of_row.to_numpy()))
        self.table = table.take(pa.array(order))
        self.ts_ms = self.table.column("ts").cast(pa.int64()).to_numpy()
        gpu = np.asarray(gpu_of_row.to_numpy())[order]
        self.bounds = np.searchsorted(gpu, np.arange(world.fleet.n_gpus + 1))
        self.gpus_of_node = {
            node: np.flatnonzero(world.fleet.node_of == i) for i, node in enumerate(self.nodes)
        }
        self.started = clock()

    def sim_ms(self, wall_s: float | None = None) -> int:
        """The simulated time a scrape at `wall_s` (default: now) sees."""
        elapsed = (self.clock() if wall_s is None else wall_s) - self.started + self.cfg.offset_s
        return self.day_start_ms + int(elapsed * 1000) % DAY_MS

    def current(self, node: str, wall_s: float | None = None) -> pa.Table:
        """The latest sample of each of `node`'s GPUs at the simulated time (stale ones omitted)."""
        now = self.sim_ms(wall_s)
        rows = []
        for g in self.gpus_of_node[node]:
            lo, hi = self.bounds[g], self.bounds[g + 1]
            i = lo + int(np.searchsorted(self.ts_ms[lo:hi], now, side="right")) - 1
            if (
                i >= lo
                and now - self.ts_ms[i] <= STALE_INTERVALS * self.cfg.collect_interval_s * 1000
            ):
                rows.append(i)
        return self.table.take(pa.array(rows, pa.int64()))

    def render(self, node: str, wall_s: float | None = None) -> str:
        """`node`'s /metrics text now."""
        return render_exposition(self.current(node, wall_s), version=self.cfg.version)


class _Server(http.server.ThreadingHTTPServer):
    """Keeps its open (keep-alive) connections, so that stopping it really cuts Prometheus off."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[http.server.BaseHTTPRequestHandler]):
        super().__init__(address, handler)
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()

    def close_connections(self) -> None:
        with self.lock:
            for connection in self.open:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed by the client
            self.open.clear()


def _handler(fleet: SimulatedFleet, node: str) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server: _Server

        def setup(self) -> None:
            super().setup()
            with self.server.lock:
                self.server.open.add(self.connection)

        def finish(self) -> None:
            with self.server.lock:
                self.server.open.discard(self.connection)
            super().finish()

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.split("?")[0] not in ("/metrics", "/metrics/"):
                self._send(404, "text/plain", b"not found: try /metrics\n")
                return
            self._send(200, CONTENT_TYPE, fleet.render(node).encode())

        def _send(self, status: int, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # scrapes every second would flood the terminal

    return Handler


class ExporterServers:
    """One HTTP server per simulated node, on consecutive ports from `port` (0: any free ports)."""

    def __init__(self, fleet: SimulatedFleet, *, host: str = "127.0.0.1", port: int = 9400) -> None:
        self.fleet, self.host, self.port = fleet, host, port
        self._servers: list[_Server] = []
        self._threads: list[threading.Thread] = []

    @property
    def targets(self) -> dict[str, str]:
        """Node name → `host:port` of its exporter."""
        return {
            node: f"{self.host}:{server.server_address[1]}"
            for node, server in zip(self.fleet.nodes, self._servers, strict=True)
        }

    def start(self) -> ExporterServers:
        try:
            for i, node in enumerate(self.fleet.nodes):
                port = self.port + i if self.port else 0
                server = _Server((self.host, port), _handler(self.fleet, node))
                thread = threading.Thread(
                    target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
                )
                thread.start()
                self._servers.append(server)
                self._threads.append(thread)
        except OSError as exc:
            self.stop()
            raise ConfigError(f"cannot listen on {self.host}:{port}: {exc.strerror}") from exc
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
            server.close_connections()
        for thread in self._threads:
            thread.join(timeout=5)
        self._servers, self._threads = [], []

    def __enter__(self) -> ExporterServers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def scrape_config(targets: dict[str, str], *, cluster: str, interval_s: float = 15.0) -> str:
    """A Prometheus `scrape_configs` entry for the exporters (YAML, ready to paste)."""
    listed = json.dumps(sorted(targets.values()))
    return (
        "scrape_configs:\n"
        "  - job_name: dcgm\n"
        f"    scrape_interval: {interval_s:g}s\n"
        "    static_configs:\n"
        f"      - targets: {listed}\n"
        f"        labels: {{cluster: {json.dumps(cluster)}}}\n"
    )
