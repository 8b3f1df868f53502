"""A lake file damaged in a data page (footer intact) is one clear error line naming it from
`gpuledger query`, `attribute`, `detect` and `job`: exit 1, no traceback, no DuckDB message
alone."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from tests.damage import flip_data_page
from warehouse import layout

pytestmark = pytest.mark.slow


def invoke(*args: str) -> Result:
    env = {k: None for k in os.environ if k.startswith("GPULEDGER_")}
    return CliRunner(env=env).invoke(cli, list(args))


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated day of 8 GPUs, attributed."""
    root = tmp_path_factory.mktemp("healthy") / "lake"
    for args in (["simulate", "--gpus", "8", "--days", "1", "-q"], ["attribute", "-q"]):
        result = invoke(*args, "--lake", str(root))
        assert result.exit_code == 0, result.output
    return root


def damaged(healthy: Path, tmp_path: Path, table: str, column: str) -> tuple[Path, Path]:
    """A copy of the lake whose largest file of `table` has `column`'s data pages damaged."""
    lake = tmp_path / "lake"
    shutil.copytree(healthy, lake)
    bad = max(layout.table_files(lake, table), key=lambda p: p.stat().st_size)
    flip_data_page(bad, column)
    return lake, bad


def assert_names_the_file(result: Result, bad: Path) -> None:
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    assert f"The lake file {str(bad)!r} is not a readable Parquet file" in errors[0]


@pytest.mark.parametrize(
    ("args", "table", "column"),
    [
        (["query", "gpu_samples", "--format", "csv"], "gpu_samples", "power_w"),  # a table whole
        (["query", "marts/job_usage"], "job_gpu_daily", "device"),  # a shipped query
        (["attribute", "--force", "-q"], "gpu_samples", "power_w"),
        (["detect"], "job_gpu_daily", "device"),
        (["job", "JOB"], "job_gpu_daily", "device"),
    ],
    ids=["query-table", "query-shipped", "attribute", "detect", "job"],
)
def test_a_damaged_data_page_is_one_line_naming_the_file(healthy, tmp_path, args, table, column):
    lake, bad = damaged(healthy, tmp_path, table, column)
    if "JOB" in args:
        listed = invoke(
            "query", "job_usage", "--lake", str(healthy), "-c", "job_id", "--format", "csv"
        )
        job_id = listed.output.splitlines()[1]  # a job of the one day: it reads the damaged file
        args = [job_id if a == "JOB" else a for a in args]
    result = invoke(*args, "--lake", str(lake))
    assert_names_the_file(result, bad)
