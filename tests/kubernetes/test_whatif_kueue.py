"""`gpuledger whatif replay|compare` on a Kubernetes cluster: the Kueue replay on a lake that
`collect kubernetes` built from the recorded API snapshots (tests/fixtures/kubernetes, `t1` to
`t3`) (app/commands/whatif.py, app/whatif_kueue.py, detectors/replay/kueue/).

The recorded cluster: ClusterQueues cq-research (12 H100s, cohort `org`, borrowing and lending
limit 4, fair-sharing weight 2) and cq-eval (8 A100s, 6 H100s, cohort `org`); three GPU
workloads were queued in them: team-a's Job `finetune` (4 GPUs, 05:58), JobSet `llm-sft`
(8 GPUs, 08:40) and team-c's gated pod `gated-eval` (2 GPUs, 11:50, never admitted: its pod
had a scheduling gate). The other GPU pods bypassed Kueue.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from app.cli import cli
from collector.sources.kubernetes.collect import collect_kubernetes
from detectors.replay.kueue.policy import KueuePolicy, apply_kueue_settings
from detectors.replay.kueue.workload import recorded_kueue_settings
from warehouse.connection import connect
from warehouse.lake import Lake

CLUSTER = "k8s-demo"
T1 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    from tests.kubernetes.conftest import FakeKubernetes

    root = tmp_path_factory.mktemp("kueue") / "lake"
    for i, snapshot in enumerate(("t1", "t2", "t3")):
        now = T1 + dt.timedelta(minutes=10 * i)
        collect_kubernetes(Lake.at(root), CLUSTER, FakeKubernetes(snapshot), now=now)
    return root


def invoke(*args: str):
    return CliRunner().invoke(cli, ["whatif", *args], catch_exceptions=False)


def test_the_recorded_policy_is_the_latest_clusterqueues(lake):
    with connect(lake) as con:
        policy = apply_kueue_settings(KueuePolicy(), recorded_kueue_settings(con, CLUSTER))
    research = policy.queues["cq-research"]
    assert research.cohort == "org" and research.weight == 2.0
    h100 = research.flavors["h100"]
    assert (h100.nominal, h100.borrowing_limit, h100.lending_limit) == (12, 4, 4)
    assert research.queueing_strategy == "BestEffortFIFO"
    assert research.within_cluster_queue == "LowerPriority"
    assert research.reclaim_within_cohort == "Any"
    # cq-eval's H100 quota changed at t3 (the latest version wins); cq-cpu has no GPU quota
    assert policy.queues["cq-eval"].flavors["h100"].nominal == 6
    assert policy.queues["cq-cpu"].flavors == {}
    assert policy.fair_sharing  # a ClusterQueue sets a fair-sharing weight


def test_replay_prints_the_calibration_and_writes_one_row_per_workload(lake, tmp_path):
    out = tmp_path / "replay.parquet"
    result = invoke("replay", "--lake", str(lake), "--cluster", CLUSTER, "-q", "--out", str(out))

    assert result.exit_code == 0, result.output
    assert "Kueue: 4 ClusterQueues" in result.output
    assert "Calibration: the recorded ClusterQueues replayed" in result.output
    assert "cq-research" in result.output
    rows = pl.read_parquet(out)
    assert {"cluster", "job_id", "sim_start_e", "sim_end_e", "cut_by_limit", "preemptions"} <= set(
        rows.columns
    )
    assert sorted(rows["job_id"]) == [
        "team-a/Job/finetune",
        "team-a/JobSet/llm-sft",
        "team-c/Pod/gated-eval",
    ]
    # nothing contends for the quota: each workload is admitted when it is submitted
    assert (rows["sim_start_e"] == rows["submit_e"]).all()
    # finetune ran 06:01:15 – 07:43:57 in the record: the replay keeps its run time
    finetune = rows.filter(pl.col("job_id") == "team-a/Job/finetune").row(0, named=True)
    assert finetune["sim_end_e"] - finetune["sim_start_e"] == 102 * 60 + 42


def test_compare_shows_a_quota_too_small_for_a_workload(lake):
    # cq-research out of its cohort with 6 GPUs: llm-sft (8 GPUs) can never be admitted
    result = invoke(
        "compare",
        "--lake",
        str(lake),
        "--cluster",
        CLUSTER,
        "-q",
        "--set",
        "clusterqueue.cq-research.cohort=none",
        "--set",
        "clusterqueue.cq-research.nominalQuota.nvidia.com/gpu=6",
    )
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("workloads admitted"))
    assert line.split()[-2:] == ["3", "2"]
    assert "share of GPU-hours" in result.output


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (("--set", "clusterqueue.cq-eval.nominalQuota=4"), "a100, h100"),
        (("--set", "clusterqueue.cq-research.queueingStrategy=LIFO"), "queueingStrategy=LIFO"),
        (("--set", "partition.gpu.MaxTime=10"), "partition.gpu.MaxTime"),
        (
            ("--slurm-conf", "slurm.conf", "--set", "fairSharing.enable=false"),
            "--slurm-conf is for Slurm clusters",
        ),
    ],
)
def test_bad_input_is_one_line_naming_it(lake, args, names):
    result = invoke("compare", "--lake", str(lake), "--cluster", CLUSTER, "-q", *args)
    assert result.exit_code != 0
    assert names in result.output
    assert "Traceback" not in result.output
