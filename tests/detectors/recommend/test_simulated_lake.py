"""Every recommender over a small simulated lake: valid rows, stable ids, figures that add up."""

from __future__ import annotations

import json

import pytest

from detectors.recommend import RecommendConfig
from detectors.recommend.recommendation import GAIN_KINDS
from detectors.recommend.run import KINDS, recommend
from warehouse.schema import TABLES

GAIN_KINDS_BY_KIND = {
    "idle_cancel_policy": "saved",
    "mig_packing": "saved",
    "drain_node": "failures_avoided",
    "gpu_cap": "shifted",
    "time_limit": "backfill",
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    from click.testing import CliRunner

    from app.cli import cli

    root = tmp_path_factory.mktemp("sim") / "lake"
    runner = CliRunner()
    for args in (
        ["simulate", "--lake", str(root), "--gpus", "32", "--days", "2", "-q"],
        ["attribute", "--lake", str(root), "-q"],
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
    return root


def test_recommendations_over_a_simulated_lake(lake):
    from warehouse.connection import connect

    con = connect(lake)
    [(end,)] = con.sql("SELECT max(ts) FROM gpu_samples").fetchall()
    first = recommend(con, RecommendConfig(), end)
    again = recommend(con, RecommendConfig(), end)

    assert first.schema == TABLES["recommendations"].schema
    assert first.num_rows > 0
    assert first.to_pylist() == again.to_pylist()  # deterministic
    ids = first.column("rec_id").to_pylist()
    assert len(ids) == len(set(ids))  # one row per recommendation
    for row in first.to_pylist():
        assert row["kind"] in KINDS
        assert row["target"] == "slurm"
        assert row["config"] and row["risk"]
        evidence = json.loads(row["evidence"])
        assert isinstance(evidence, dict) and evidence
        if row["expected_gain_gpu_h"] is not None:
            assert row["expected_gain_gpu_h"] >= 0
            # what the gain counts, so GPU-hours saved are not ranked against others
            assert evidence["gain_kind"] == GAIN_KINDS_BY_KIND[row["kind"]]
            assert evidence["gain_kind"] in GAIN_KINDS
        else:
            assert "gain_kind" not in evidence
        if row["kind"] in ("time_limit", "gpu_cap") and not row["scope"].startswith("user="):
            # the Policy lab's replay of the change, beside its calibration
            replay = evidence["replay"]
            assert replay["settings"] and replay["calibration"]["jobs"] > 0, row["scope"]
            assert set(replay["wait_p95_s"]) == {"baseline", "proposal"}
        # each carries the replay's deltas, why it was skipped, or why the replay cannot
        # express its change (docs/policy-lab.md: kind, how it is replayed, its test)
        assert {"settings", "skipped", "not_replayed"} & set(evidence["replay"]), row["kind"]
    kinds = set(first.column("kind").to_pylist())
    # the simulator injects idle jobs, over-long limits, small jobs and failing GPUs
    assert {"idle_cancel_policy", "time_limit", "mig_packing"} <= kinds


def test_no_slurm_config_redefines_a_partition_or_node_the_cluster_has(lake):
    """slurm.conf may define a partition or node once: an appended second line for one that
    exists makes slurmctld exit on `scontrol reconfigure` (seen on the live 22.05 cluster).
    The commands each config runs are one shell line each that the shell splits cleanly."""
    import shlex

    from warehouse.connection import connect

    con = connect(lake)
    [(end,)] = con.sql("SELECT max(ts) FROM gpu_samples").fetchall()
    partitions = {p for (p,) in con.sql("SELECT DISTINCT partition FROM jobs").fetchall()}
    nodes = {n for (n,) in con.sql("SELECT DISTINCT node FROM gpus").fetchall()}
    existing = {f"PartitionName={p}" for p in partitions} | {f"NodeName={n}" for n in nodes}
    existing |= {"NodeName=<node>"}
    for row in recommend(con, RecommendConfig(), end).to_pylist():
        for line in row["config"].splitlines():
            if line.startswith("#") or not line.strip():
                continue
            assert line.split()[0] not in existing, (row["kind"], line)
            if line.startswith(("sacctmgr ", "scontrol ")):
                argv = shlex.split(line)
                assert "-i" in argv or argv[0] == "scontrol", line  # sacctmgr asks otherwise


def test_by_default_the_replay_ends_with_the_data_not_the_wall_clock(lake):
    # issue #21 point 3: "now" is the end of the data, so the same lake gives the same
    # recommendations today and in a year; only created_ts records the run's own time
    import datetime as dt

    from warehouse.connection import connect

    con = connect(lake)
    [(end,)] = con.sql("SELECT max(data_end) FROM data_extent").fetchall()
    default = recommend(con, RecommendConfig())
    years_later = recommend(con, RecommendConfig(), end + dt.timedelta(days=3 * 365))

    assert default.num_rows > 0
    assert set(default.column("created_ts").to_pylist()) == {end + dt.timedelta(seconds=1)}
    assert default.drop(["created_ts"]).to_pylist() == years_later.drop(["created_ts"]).to_pylist()
