"""`gpuledger whatif replay|compare` on a simulated lake and with a slurm.conf
(app/commands/whatif.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from app.cli import cli
from collector.sim.runner import SimConfig, simulate
from warehouse.lake import Lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("whatif") / "lake"
    simulate(SimConfig(gpus=32, days=2, seed=5, interval_s=3600), Lake.at(root))
    return root


def invoke(*args: str):
    return CliRunner().invoke(cli, ["whatif", *args], catch_exceptions=False)


def test_replay_prints_its_calibration_and_writes_one_row_per_job(lake, tmp_path):
    out = tmp_path / "replay.parquet"
    result = invoke("replay", "--lake", str(lake), "--cluster", "sim", "-q", "--out", str(out))

    assert result.exit_code == 0, result.output
    assert "Calibration: the recorded policy replayed against what happened" in result.output
    assert "start-order rank correlation" in result.output
    # the simulator lands shares, no `collect slurm-config` snapshot: said as it is
    assert "Recorded policy: the lake's record: the fair-share shares" in result.output
    assert "slurm-config" not in result.output
    rows = pl.read_parquet(out)
    assert {"cluster", "job_id", "sim_start_e", "sim_end_e", "cut_by_limit"} <= set(rows.columns)
    jobs = pl.read_parquet(lake / "jobs", hive_partitioning=True)
    assert rows.height == jobs.filter(pl.col("gpus") > 0)["job_id"].n_unique()
    started = rows.filter(pl.col("sim_start_e").is_not_null())
    assert (started["sim_end_e"] >= started["sim_start_e"]).all()
    assert (started["sim_start_e"] >= started["submit_e"]).all()


def test_compare_prints_baseline_and_proposal_side_by_side(lake):
    result = invoke(
        "compare", "--lake", str(lake), "--cluster", "sim", "-q",
        "--set", "partition.gpu.MaxTime=02:00:00", "--set", "over_limit=cut",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    for heading in (
        "baseline",
        "proposal",
        "GPU occupancy",
        "Jain index",
        "queue wait",
        "Cut short",
    ):
        assert heading in result.output
    assert "Calibration:" in result.output
    assert "a what-if goes on past it until every job it can start has started" in result.output


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("partition.gpu.MaxTime=soon", "partition.gpu.MaxTime=soon: not a Slurm time"),
        ("colour=blue", "colour: unknown setting"),
        # a misspelt name changed nothing: the proposal's figures were the baseline's
        ("node.gpu-01.State=DRAIN", "node.gpu-01.State: the cluster has no node 'gpu-01'"),
        ("partition.gpus.MaxTime=01:00:00", "partition.gpus.MaxTime: the cluster has no partition"),
        ("assoc.vison.GrpTRES=gres/gpu=4", "the cluster's records have no account 'vison'"),
        ("assoc.vision.nobody.GrpTRES=gres/gpu=1", "no user in account 'vision' 'nobody'"),
        ("qos.hihg.GrpTRES=gres/gpu=4", "the cluster's records have no QOS 'hihg'"),
        # past the replay's int64 counts: an OverflowError's traceback
        ("assoc.vision.GrpTRES=gres/gpu=99999999999999999999999", "expected at most 2,147,483,647"),
        ("node.gpu-009.Gres=gpu:99999999999999999999", "expected at most 2,147,483,647"),
        # sacctmgr's raw shares on the recorded parts' scale (0-1) outweighed every account
        ("assoc.vision.Shares=15", "not sacctmgr's raw shares; vision is recorded at 0.15"),
    ],
)
def test_a_bad_set_is_one_line_naming_it(lake, setting, named):
    result = invoke("compare", "--lake", str(lake), "--cluster", "sim", "-q", "--set", setting)

    assert result.exit_code == 2
    assert named in result.output and "Traceback" not in result.output


def test_a_node_a_change_adds_can_be_changed_too(lake):
    added = ("--set", "node.new-01.Gres=gpu:8", "--set", "node.new-01.CPUs=64")
    result = invoke("compare", "--lake", str(lake), "--cluster", "sim", "-q", *added)

    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("period", "said"),
    [
        (("--since", "2026-11-03", "--until", "2026-11-02"), "the period is empty: its start"),
        (("--since", "2027-01-01"), "the period starts (2027-01-01 00:00 UTC) after the data of"),
    ],
)
def test_a_period_with_nothing_to_replay_is_one_clear_error(lake, period, said):
    result = invoke("replay", "--lake", str(lake), "--cluster", "sim", "-q", *period)

    assert result.exit_code == 1
    assert said in result.output and "Traceback" not in result.output


def test_an_unknown_cluster_is_one_clear_error(lake):
    result = invoke("replay", "--lake", str(lake), "--cluster", "nope", "-q")

    assert result.exit_code == 1
    assert "cluster 'nope' has no jobs in the lake" in result.output


def test_the_recorded_policy_can_come_from_a_slurm_conf(lake, tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text("PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\n")
    result = invoke(
        "replay", "--lake", str(lake), "--cluster", "sim", "-q", "--slurm-conf", str(conf)
    )
    assert result.exit_code == 0, result.output

    conf.write_text("PriorityWeightFairshare=lots\n")
    result = invoke(
        "replay", "--lake", str(lake), "--cluster", "sim", "-q", "--slurm-conf", str(conf)
    )
    assert result.exit_code == 1
    assert "PriorityWeightFairshare=lots: not a number" in result.output


def test_a_qos_change_replays_and_a_bad_one_is_one_line(lake, tmp_path):
    # the simulator's jobs are all in QOS normal: capping it at 8 GPUs holds some of them
    out = tmp_path / "qos.parquet"
    result = invoke(
        "replay", "--lake", str(lake), "--cluster", "sim", "-q", "--out", str(out),
        "--set", "qos.normal.GrpTRES=gres/gpu=8", "--set", "PreemptType=preempt/qos",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "With qos.normal.GrpTRES=gres/gpu=8, PreemptType=preempt/qos:" in result.output
    rows = pl.read_parquet(out)
    assert rows["preemptions"].sum() == 0  # no QOS lists another to preempt

    result = invoke(
        "compare", "--lake", str(lake), "--cluster", "sim", "-q",
        "--set", "qos.normal.PreemptMode=SUSPEND",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "qos.normal.PreemptMode=SUSPEND: expected" in result.output
    assert "Traceback" not in result.output


def test_draws_replays_n_times_and_reports_the_mean(lake, tmp_path):
    from detectors.replay.draws import replay_draws
    from detectors.replay.engine import replay
    from detectors.replay.policy import Policy, apply_settings
    from detectors.replay.workload import load_workload, recorded_settings
    from warehouse.connection import connect

    out = tmp_path / "draws.parquet"
    args = ("replay", "--lake", str(lake), "--cluster", "sim", "-q", "--out", str(out))
    result = invoke(*args, "--draws", "3")
    assert result.exit_code == 0, result.output
    assert "the mean of 3 replays with run times moved by -1/0/+1 s (--draws)" in result.output
    # the rows are replay_draws' mean outcome, not one replay's
    con = connect(lake)
    w = load_workload(con, "sim")
    policy = apply_settings(Policy(), recorded_settings(con, "sim"))
    mean = replay_draws(w, policy, 3)
    # (on this lake a second moves some starts: the mean is not draw 0's)
    assert not np.array_equal(mean.start_e, replay(w, policy).start_e, equal_nan=True)
    rows = pl.read_parquet(out)
    got = dict(zip(rows["job_id"], rows["sim_start_e"], strict=True))
    want = {j: (None if s != s else float(s)) for j, s in zip(w.job_id, mean.start_e, strict=True)}
    assert got == pytest.approx(want)

    result = invoke(
        "compare", "--lake", str(lake), "--cluster", "sim", "-q", "--draws", "2",
        "--set", "partition.gpu.MaxTime=02:00:00",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Each side: the mean of 2 replays" in result.output


@pytest.mark.parametrize("n", ["0", "51", "many"])
def test_a_bad_draws_is_one_line(lake, n):
    result = invoke("replay", "--lake", str(lake), "--cluster", "sim", "-q", "--draws", n)

    assert result.exit_code == 2
    assert "Invalid value for '--draws'" in result.output and "Traceback" not in result.output


def test_a_change_that_changes_nothing_calibrates_as_the_recorded_policy(lake):
    # bf_interval=30 is Slurm's default: the changed run is the recorded one, so its
    # calibration is too; both are cut at the end of the data (the changed run's was not, and
    # counted the jobs it started after the end as started only in the replay)
    result = invoke(
        "replay", "--lake", str(lake), "--cluster", "sim", "-q", "--set", "bf_interval=30"
    )

    assert result.exit_code == 0, result.output
    counts = [
        line.split("(", 1)[1]
        for line in result.output.splitlines()
        if line.startswith("Calibration:")
    ]
    assert len(counts) == 2 and counts[0] == counts[1], result.output


def test_a_replay_far_from_the_record_says_so():
    # the probe's replay put starts 4 h 26 min off at the median while every figure was printed
    # as exact; one close to it says nothing more
    from app.commands.whatif import _calibration_lines
    from detectors.replay.metrics import Calibration

    waits = pl.DataFrame(
        {"account": ["a"], "jobs": [10], "real_wait_s": [1800.0], "replay_wait_s": [0.0],
         "rel_diff": [-1.0]}
    )  # fmt: skip
    far = Calibration(10, 0, 0, 16_000.0, 20_000.0, 0.4, waits)
    near = Calibration(10, 0, 0, 120.0, 600.0, 0.95, waits)

    said = "\n".join(_calibration_lines(far))
    assert "Caution: starts replay 4 h 27 min off at the median, more than the jobs' mean" in said
    assert not any("Caution" in line for line in _calibration_lines(near))
