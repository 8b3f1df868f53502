"""Each cluster is replayed over its own window: the lookback reaches back from the cluster's
own last job, not from the newest cluster's (a probe of the dashboard: a cluster whose data
ended a month before another's got no recommendation at all beside it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import cli
from detectors.recommend import RecommendConfig
from detectors.recommend.run import recommend
from warehouse.connection import connect

pytestmark = pytest.mark.slow  # three simulated lakes through attribute and the replays: ~15 s

OLDER = [
    "--cluster",
    "b",
    "--gpus",
    "16",
    "--days",
    "2",
    "--seed",
    "7",
    "--start",
    "2026-10-01T00:00",
]
NEWER = ["--cluster", "a", "--gpus", "8", "--days", "1"]


def _lake(root: Path, *clusters: list[str]) -> Path:
    runner = CliRunner()
    for args in clusters:
        done = runner.invoke(cli, ["simulate", "--lake", str(root), "-q", *args])
        assert done.exit_code == 0, done.output
    done = runner.invoke(cli, ["attribute", "--lake", str(root), "-q"])
    assert done.exit_code == 0, done.output
    return root


def _kinds(root: Path, cluster: str) -> list[tuple[str, str]]:
    table = recommend(connect(root), RecommendConfig())
    return sorted(
        (row["kind"], row["target"]) for row in table.to_pylist() if row["cluster"] == cluster
    )


def test_an_older_cluster_gets_the_recommendations_it_gets_alone(tmp_path):
    alone = _kinds(_lake(tmp_path / "alone", OLDER), "b")
    beside = _kinds(_lake(tmp_path / "both", NEWER, OLDER), "b")

    assert alone, "the older cluster alone gets recommendations"
    assert beside == alone
