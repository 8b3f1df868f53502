"""Files gpuledger creates under the lake (data and `_state/`) are not readable by other users."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from click.testing import CliRunner

from app.cli import cli


def world_accessible(root: Path) -> list[str]:
    found = []
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        if mode & (stat.S_IROTH | stat.S_IWOTH | stat.S_IXOTH):
            found.append(f"{oct(stat.S_IMODE(mode))} {path.relative_to(root)}")
    return found


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
