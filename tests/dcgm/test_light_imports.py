"""The dcgm-exporter collector stays light: no query engine, dataframe library or UI on import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("duckdb", "polars", "streamlit", "pandas")
MODULES = (
    "collector.sources.dcgm_exporter.fields",
    "collector.sources.dcgm_exporter.rows",
    "collector.sources.dcgm_exporter.exposition",
    "collector.sources.dcgm_exporter.scrape",
    "app.commands.dcgm_exporter",
)


def test_dcgm_collector_modules_import_no_heavy_library():
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


def test_a_scrape_runs_without_heavy_libraries(tmp_path):
    """Parse and land a recorded scrape in a fresh interpreter; no query engine or UI loaded.

    pandas is left out of this check: pyarrow's own ParquetWriter imports it when it is
    installed (the dashboard extra brings it); a node without that extra has no pandas at all.
    """
    fixture = REPO / "tests" / "fixtures" / "dcgm-exporter" / "sample_l4_gpu_operator.txt"
    code = (
        "import json, sys, datetime as dt\n"
        "from pathlib import Path\n"
        "from collector.sources.dcgm_exporter.scrape import scrape_exporters\n"
        f"text = Path({str(fixture)!r}).read_text()\n"
        "from warehouse.lake import Lake\n"
        "s = scrape_exporters(['http://g1:9400/metrics'], 'c', Lake.at(sys.argv[1]),\n"
        "    fetch=lambda url, t: text, clock=lambda: dt.datetime(2026, 1, 1, tzinfo=dt.UTC))\n"
        f"print(json.dumps([s.samples, [m for m in {HEAVY[:3]!r} if m in sys.modules]]))\n"
    )

    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [1, []]
