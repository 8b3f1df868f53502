"""`gpuledger job` is typed by users: its run loads only DuckDB over the job's files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.marts import rows as r

H = 3600.0


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lake")
    r.build_lake(
        root,
        samples=r.samples(range(0, int(H), 30), engine_active=0.5, sm_active=0.5),
        jobs=[r.job("j1", 0, H)],
        job_gpus=[r.job_gpu("j1", 0, H)],
    )
    return root


def test_the_report_loads_no_dataframe_library_parser_or_recommender(lake):
    """Neither polars, pandas, sqlglot nor the recommenders (each ~0.1-0.3 s of start-up)."""
    code = (
        "import json, sys\n"
        "from app.cli import main\n"
        f"sys.argv = ['gpuledger', 'job', 'j1', '--lake', {str(lake)!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "heavy = ('polars', 'pandas', 'sqlglot', 'streamlit', 'detectors.recommend')\n"
        "print(json.dumps([m for m in heavy if m in sys.modules]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )

    assert done.returncode == 0, done.stderr
    assert "Job ID: j1" in done.stdout
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_bench_times_the_report_in_process_and_as_a_process(lake):
    from app.bench.job_timing import time_job_reports

    timed = time_job_reports(lake, [("j1", 1)])

    assert timed["jobs"] == ["j1"] and timed["gpus"] == [1]
    assert 0 < timed["median_in_process_s"] < timed["median_process_s"]
