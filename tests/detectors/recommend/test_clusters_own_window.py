"""Each cluster is judged over its own window: the recommenders' lookback and the windowed
rules' "last N days" reach back from the cluster's own last job, not from the newest
cluster's (a probe of the dashboard: a cluster whose data ended a month before another's got
no recommendation and no low-efficiency user beside it)."""

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


@pytest.fixture(scope="module")
def lakes(tmp_path_factory) -> tuple[Path, Path]:
    """The older cluster alone, and beside a newer one."""
    root = tmp_path_factory.mktemp("windows")
    return _lake(root / "alone", OLDER), _lake(root / "both", NEWER, OLDER)


def test_an_older_cluster_gets_the_recommendations_it_gets_alone(lakes):
    alone, both = lakes

    assert _kinds(alone, "b"), "the older cluster alone gets recommendations"
    assert _kinds(both, "b") == _kinds(alone, "b")


def _windowed(root: Path) -> list[tuple[object, ...]]:
    """Cluster b's findings of the rules over the last days (a user's, an account's)."""
    done = CliRunner().invoke(cli, ["detect", "--lake", str(root), "-q"])
    assert done.exit_code == 0, done.output
    con = connect(root)
    return sorted(
        con.sql(
            "SELECT detector, subject_id, round(gpu_h_at_stake, 6), start_ts, end_ts "
            "FROM findings WHERE cluster = 'b' "
            "AND detector IN ('low_efficiency_user', 'lost_gpu_hours')"
        ).fetchall()
    )


def test_an_older_cluster_gets_the_windowed_findings_it_gets_alone(lakes):
    alone, both = lakes

    assert _windowed(alone), "the older cluster alone has a low-efficiency user"
    assert _windowed(both) == _windowed(alone)
