"""The Prometheus puller stays light: no query engine, dataframe library or UI on import, and
prometheus-api-client (with requests) only once a transport is made."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("duckdb", "polars", "streamlit", "pandas")
MODULES = (
    "collector.sources.prometheus.pull",
    "collector.sources.prometheus.blocks",
    "collector.sources.prometheus.pivot",
    "collector.sources.prometheus.spans",
    "collector.sources.prometheus.state",
    "collector.sources.prometheus.throughput",
    "collector.sources.prometheus.transport",
    "collector.sim.exposition",
    "collector.sim.exporters",
    "app.commands.prometheus",
    "app.commands.serve_exporters",
    "app.bench.prometheus",
)


def _run(code: str, *args: str) -> list:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_puller_modules_import_no_heavy_library_nor_the_client():
    watched = (*HEAVY, "prometheus_api_client", "requests")
    loaded = _run(
        "import json, sys\n"
        f"import {', '.join(MODULES)}\n"
        f"print(json.dumps([m for m in {watched!r} if m in sys.modules]))\n"
    )

    assert loaded == []


def test_a_transport_loads_the_client_but_never_pandas():
    watched = (*HEAVY, "prometheus_api_client")
    loaded = _run(
        "import json, sys\n"
        "from collector.sources.prometheus.transport import ApiClientTransport\n"
        "ApiClientTransport('http://127.0.0.1:1').close()\n"
        f"print(json.dumps([m for m in {watched!r} if m in sys.modules]))\n"
    )

    assert loaded == ["prometheus_api_client"]


def test_a_pull_runs_without_query_engines(tmp_path):
    """Pivot and land a recorded body in a fresh interpreter (pandas left out of this check:
    pyarrow's Parquet writer imports it where it is installed)."""
    body = REPO / "tests" / "fixtures" / "prometheus" / "scripted" / "DCGM_FI_DEV_GPU_UTIL.json"
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from collector.sources.prometheus.blocks import block_from_body\n"
        "from collector.sources.prometheus.pivot import pivot_window\n"
        "from warehouse.writer import write_batch\n"
        f"block = block_from_body('DCGM_FI_DEV_GPU_UTIL', Path({str(body)!r}).read_bytes())\n"
        "rows = pivot_window([block], cluster='c', start_ms=0, end_ms=2**62)\n"
        "write_batch(Path(sys.argv[1]), 'gpu_samples', rows.samples, 'b')\n"
        f"heavy = [m for m in {HEAVY[:3]!r} if m in sys.modules]\n"
        "print(json.dumps([rows.samples.num_rows, heavy]))\n"
    )

    assert _run(code, str(tmp_path)) == [22, []]
