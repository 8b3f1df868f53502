"""Light layers stay light: importing them loads no query engine, dataframe library or UI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("duckdb", "polars", "streamlit", "pandas")
LIGHT = ("collector", "warehouse", "warehouse.queries", "warehouse.writer", "warehouse.schema")


def test_light_modules_import_no_heavy_library():
    code = (
        "import json, sys\n"
        f"import {', '.join(LIGHT)}\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )

    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
