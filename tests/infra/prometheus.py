"""A real Prometheus on 127.0.0.1 for tests (temp config and data dir, free port, always stopped),
and an independent reader of what it holds, compared with the lake.

Shared by tests/prometheus and the service soak test (tests/slurm_live/test_soak.py).
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pytest

from collector.sim.exposition import Family

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0


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
    # whole scrape_configs entries (job_name, static_configs, honor_labels …), after `scrape`'s
    jobs: list[dict[str, Any]] = field(default_factory=list)
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
            "scrape_configs": (
                [{"job_name": "dcgm", "static_configs": self.scrape}] if self.scrape else []
            )
            + self.jobs,
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
