"""What a `gpuledger` process imports before it runs a command (issues #24 and #26: many
commands run as a new process, in Slurm's MailProg and epilog and in the tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.marts import rows as r

H = 3600.0
REPO = Path(__file__).resolve().parents[2]
HEAVY = (
    "pyarrow",
    "numpy",
    "pandas",
    "polars",
    "duckdb",
    "sklearn",
    "sqlglot",
    "streamlit",
    "app.bench.run",
    "app.pipeline",
    "detectors",
)


def _loaded(code: str, watched: tuple[str, ...]) -> list[str]:
    """Run `code` in a fresh interpreter; which of `watched` it left in sys.modules."""
    code += f"\nimport json, sys\nprint(json.dumps([m for m in {watched!r} if m in sys.modules]))\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_the_command_line_and_its_help_load_no_engine_dataframe_bench_or_detector():
    """`gpuledger --help` and every command's module: click and the app's own code only."""
    code = (
        "import sys\n"
        "from app.cli import cli\n"
        "try:\n"
        "    cli(['--help'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
    )

    assert _loaded(code, HEAVY) == []


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


@pytest.mark.parametrize(
    "args",
    [["query", "job_usage", "--limit", "1"], ["attribute", "--quiet"]],
    ids=["query", "attribute-up-to-date"],
)
def test_a_command_that_connects_to_the_lake_loads_no_pandas(lake, args):
    """The carbon intensity and the allocations are built without `pa.array` of Python lists,
    whose pandas check would import pandas (~0.25 CPU-s; warehouse/arrow_arrays.py)."""
    code = (
        "from app.cli import cli\n"
        "try:\n"
        f"    cli({[*args, '--lake', str(lake)]!r})\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
    )

    assert _loaded(code, ("pandas", "app.bench.run")) == []


def test_attributing_a_new_day_and_a_late_record_loads_no_pandas(tmp_path):
    """A whole build and an update in place (a new day of samples, a late scheduler record)
    land their partitions and group the summary state without `pa.array` of Python values
    and without Acero (`Table.group_by`, `Table.join`), either of which loads pandas
    (warehouse/arrow_groups.py)."""
    root = tmp_path / "lake"
    day = 86400.0
    r.build_lake(
        root,
        samples=r.samples(range(0, int(day), 600), interval_s=600.0, engine_active=0.5),
        jobs=[r.job("j1", 0, H)],
        job_gpus=[r.job_gpu("j1", 0, H)],
    )
    code = (
        "from app.cli import cli\n"
        "try:\n"
        f"    cli(['attribute', '--quiet', '--lake', {str(root)!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
    )
    for step in ("whole", "update"):
        if step == "update":
            times = range(int(day), int(2 * day), 600)
            r.land(
                root,
                "gpu_samples",
                r.samples(times, interval_s=600.0, engine_active=0.5),
                batch_id="day2",
            )
            r.land(root, "jobs", [r.job("j2", day, day + H)], batch_id="late")
            r.land(root, "job_gpus", [r.job_gpu("j2", day, day + H)], batch_id="late")
        assert _loaded(code, ("pandas", "pyarrow.acero")) == [], step
    usage = open_engine_rows(root)
    assert usage == [("j1", H), ("j2", H)]


def open_engine_rows(root: Path) -> list[tuple[str, float]]:
    """job_usage's (job_id, observed seconds) after the runs: the update was made."""
    from warehouse.connection import WarehouseConfig, open_engine, register_table

    con = open_engine(WarehouseConfig(root))
    register_table(con, root, "job_usage")
    found = con.execute(
        "SELECT job_id, observed_gpu_h * 3600 FROM job_usage ORDER BY job_id"
    ).fetchall()
    return [(j, float(s)) for j, s in found]


def test_a_job_report_loads_neither_arrow_nor_a_dataframe_library(lake):
    """`gpuledger job` runs as a new process per job end (Slurm's epilog, the job-end mail):
    the lake's contract is written in DuckDB's types, so reading it loads no pyarrow and
    numpy (~0.15-0.25 s of start-up), and the report's rows come as Python values."""
    code = (
        "from app.cli import cli\n"
        "try:\n"
        f"    cli(['job', 'j1', '--lake', {str(lake)!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
    )

    assert _loaded(code, ("pyarrow", "numpy", "pandas", "polars", "sklearn")) == []


def test_a_job_report_on_the_configured_lake_loads_no_detector_or_dataframe_library(lake, tmp_path):
    """With the lake named by the configuration file (no --lake), as a site sets it up,
    `gpuledger job` reads the file's [lake] alone: loading every section would import the
    pipeline's settings and with them the detectors and polars (~0.8 s of start-up)."""
    config = tmp_path / "gpuledger.toml"
    config.write_text(f"[lake]\nroot = {str(lake)!r}\n[alerts]\nsmtp_port = 25\n", encoding="utf-8")
    code = (
        "import os\n"
        f"os.environ['GPULEDGER_CONFIG'] = {str(config)!r}\n"
        "from app.cli import cli\n"
        "try:\n"
        "    cli(['job', 'j1'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
    )

    watched = ("pyarrow", "numpy", "pandas", "polars", "app.pipeline", "detectors.rules")
    assert _loaded(code, (*watched, "detectors.recommend")) == []


def test_checking_the_whole_configuration_loads_no_rule_recommender_or_dataframe_library(
    lake, tmp_path
):
    """`gpuledger config check` (and `attribute`, `collect`: every command that loads every
    section) checks `[attribute]`, `[detect.*]` and `[recommend.*]` against the thresholds'
    dataclasses, which live apart from the rules and the recommenders (polars): the check
    loads none of them (~0.9 s of start-up on a slow machine)."""
    config = tmp_path / "gpuledger.toml"
    config.write_text(
        f"lake = {str(lake)!r}\n"
        "[attribute]\nidle_below = 0.02\n"
        "[detect.idle_job]\nidle_minutes = 90\n"
        "[recommend.gpu_cap]\nenabled = false\n",
        encoding="utf-8",
    )
    code = (
        "from app.cli import cli\n"
        "try:\n"
        f"    cli(['config', 'check', '--config', {str(config)!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
    )

    heavy = ("pyarrow", "numpy", "pandas", "polars", "sklearn")
    code_of_rules = ("detectors.rules.base", "detectors.rules.idle", "detectors.rules.run")
    code_of_recommenders = ("detectors.recommend.gpu_cap", "detectors.recommend.run")
    assert _loaded(code, (*heavy, *code_of_rules, *code_of_recommenders)) == []


def test_attributing_loads_no_rule_or_recommender(lake):
    """`gpuledger attribute` loads the whole configuration but runs no detector."""
    code = (
        "from app.cli import cli\n"
        "try:\n"
        f"    cli(['attribute', '--quiet', '--force', '--lake', {str(lake)!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
    )

    watched = ("polars", "sklearn", "detectors.rules.run", "detectors.recommend.run")
    assert _loaded(code, watched) == []


def test_the_job_end_mail_loads_no_detector_or_dataframe_library(lake, tmp_path):
    """`gpuledger mail` runs at every job end (Slurm's MailProg): it reads `[mail]` and `[lake]`
    alone, and the report as `gpuledger job` makes it."""
    out = tmp_path / "mailed.txt"
    mailer = tmp_path / "mailer"
    mailer.write_text(f"#!/bin/sh\ncat > {out}\n", encoding="utf-8")
    mailer.chmod(0o755)
    config = tmp_path / "gpuledger.toml"
    config.write_text(f"lake = {str(lake)!r}\n[mail]\nmailer = {str(mailer)!r}\n", encoding="utf-8")
    subject = "Slurm Job_id=j1 Name=x Ended, Run time 01:00:00, COMPLETED, ExitCode 0"
    # handled a minute after j1's end (the lake's time, through the command's clock)
    handled = r.at(H + 60).isoformat()
    code = (
        "import datetime, io, os, sys\n"
        f"os.environ['GPULEDGER_CONFIG'] = {str(config)!r}\n"
        "sys.stdin = io.StringIO('')\n"
        "from app.cli import cli\n"
        "from app.commands.mail import mail_command\n"
        f"mail = mail_command(clock=lambda: datetime.datetime.fromisoformat({handled!r}))\n"
        "try:\n"
        f"    mail(['-s', {subject!r}, 'alice'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
    )

    watched = ("pyarrow", "numpy", "pandas", "polars", "app.pipeline", "detectors.rules")
    assert _loaded(code, (*watched, "detectors.recommend")) == []
    assert "Job ID: j1" in out.read_text(encoding="utf-8")
