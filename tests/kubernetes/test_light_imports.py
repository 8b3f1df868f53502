"""The Kubernetes collector stays light: importing it loads no client, engine, dataframe or UI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("kubernetes", "duckdb", "polars", "streamlit", "pandas")
MODULES = (
    "collector.sources.kubernetes.api",
    "collector.sources.kubernetes.collect",
    "collector.sources.kubernetes.pods",
    "collector.sources.kubernetes.queues",
    "collector.sources.kubernetes.resources",
    "collector.sources.kubernetes.state",
    "app.commands.kubernetes",
)


def test_kubernetes_collector_modules_import_no_heavy_library():
    code = (
        "import json, sys\n"
        f"import {', '.join(MODULES)}\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )

    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
