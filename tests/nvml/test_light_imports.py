"""The node agent stays light: no query engine, dataframe library or UI on import or on a tick."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("duckdb", "polars", "streamlit", "pandas")
MODULES = (
    "collector.sources.nvml.cgroups",
    "collector.sources.spool",
    "collector.sources.nvml.device",
    "collector.sources.nvml.state",
    "collector.sources.nvml.rows",
    "collector.sources.nvml.agent",
    "collector.throughput",
    "app.commands.nvml",
)


def run_python(code: str, *args: str) -> list[object]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result: list[object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_agent_modules_import_no_heavy_library_and_not_pynvml():
    code = (
        "import json, sys\n"
        f"import {', '.join(MODULES)}\n"
        f"print(json.dumps([m for m in {HEAVY + ('pynvml',)!r} if m in sys.modules]))\n"
    )

    assert run_python(code) == []


def test_a_tick_runs_without_heavy_libraries(tmp_path):
    """A whole tick (sample, spool, land) in a fresh interpreter.

    pandas is left out of this check, as in the dcgm-exporter collector's test: pyarrow's
    Parquet writer imports it when it is installed; a GPU node without the dashboard extra has none.
    """
    code = (
        "import json, sys, datetime as dt\n"
        "from pathlib import Path\n"
        "from collector.sources.nvml.agent import AgentConfig, run_agent\n"
        "from tests.nvml.fake_nvml import FakeGpu, FakeNvml\n"
        "from warehouse.lake import Lake\n"
        "root = Path(sys.argv[1])\n"
        "config = AgentConfig('c', 'g1', root / 'spool', Lake.at(root / 'lake'))\n"
        "s = run_agent(config, once=True, nvml=FakeNvml([FakeGpu('GPU-1')]), proc_root=root,\n"
        "    clock=lambda: dt.datetime(2026, 1, 1, tzinfo=dt.UTC))\n"
        f"print(json.dumps([s.samples, [m for m in {HEAVY[:3]!r} if m in sys.modules]]))\n"
    )

    assert run_python(code, str(tmp_path)) == [1, []]
