"""Files gpuledger creates under the lake (data and `_state/`) are not readable by other users."""

from __future__ import annotations

import os

from click.testing import CliRunner

from app.cli import cli
from tests.infra.permissions import world_accessible


def test_a_pipeline_run_leaves_nothing_world_readable(tmp_path):
    lake = tmp_path / "lake"
    old = os.umask(0o022)  # a permissive umask, as on most machines: the code must not rely on it
    try:
        runner = CliRunner()
        for args in (
            ["simulate", "--lake", str(lake), "--gpus", "8", "--days", "1", "--seed", "3"],
            ["attribute", "--lake", str(lake)],
        ):
            result = runner.invoke(cli, args, catch_exceptions=False)
            assert result.exit_code == 0, result.output
    finally:
        os.umask(old)
    assert (lake / "_state").is_dir()
    assert any(lake.rglob("*.parquet"))
    assert world_accessible(lake) == []
