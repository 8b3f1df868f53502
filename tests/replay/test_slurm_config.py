"""`collect slurm-config` on real scontrol/sacctmgr output, and the replay's recorded policy
read back from the snapshot it lands (collector/sources/slurm/config.py,
detectors/replay/workload.py recorded_settings)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from collector.sources.slurm.config import (
    collect_slurm_config,
    parse_oneliners,
    parse_show_config,
)
from detectors.replay.policy import Policy, apply_settings
from detectors.replay.workload import recorded_settings
from warehouse.connection import connect
from warehouse.lake import Lake

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "config"
NOW = dt.datetime(2026, 12, 4, 20, 50, tzinfo=dt.UTC)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def runner(argv: list[str]) -> str:
    """The recorded answers of the test cluster, per question the collector asks."""
    if argv[:3] == ["scontrol", "show", "config"]:
        return fixture("scontrol-show-config.txt")
    if argv[:3] == ["scontrol", "show", "partition"]:
        return fixture("scontrol-show-partition-o.txt")
    if argv[:3] == ["scontrol", "show", "node"]:
        return fixture("scontrol-show-node-o.txt")
    if "qos" in argv:
        return fixture("sacctmgr-show-qos.txt")
    fields = next(a for a in argv if a.startswith("format=")).removeprefix("format=").split(",")
    recorded = [
        "Cluster",
        "Account",
        "User",
        "ParentName",
        "Fairshare",
        "GrpTRES",
        "MaxTRESPU",
        "QOS",
    ]
    keep = [recorded.index(f) for f in fields]
    lines = [line.split("|") for line in fixture("sacctmgr-show-assoc.txt").splitlines()]
    return "\n".join("|".join(parts[i] for i in keep) for parts in lines) + "\n"


def test_show_config_keeps_what_decides_scheduling():
    rows = {
        key: value for _, _, key, value in parse_show_config(fixture("scontrol-show-config.txt"))
    }

    assert rows["PriorityType"] == "priority/multifactor"
    assert rows["PriorityWeightFairShare"] == "10000"
    assert rows["SchedulerType"] == "sched/backfill"
    assert rows["SchedulerParameters"] is None  # (null)
    assert rows["BOOT_TIME"] == "2026-12-04T20:33:09"  # its fair-share ticks count from it
    assert "AccountingStorageHost" not in rows


def test_partitions_and_nodes_with_host_lists_expanded():
    parts, bad = parse_oneliners(fixture("scontrol-show-partition-o.txt"), "partition")
    nodes, bad_nodes = parse_oneliners(fixture("scontrol-show-node-o.txt"), "node")

    assert bad == bad_nodes == []
    got = {(name, key): value for _, name, key, value in parts}
    assert got[("gpu", "Nodes")] == "gpu-node01,gpu-node02"
    assert got[("gpu", "MaxTime")] == "1-00:00:00"
    gres = {name: value for _, name, key, value in nodes if key == "Gres"}
    assert gres == {"gpu-node01": "gpu:h100:8", "gpu-node02": "gpu:a100:4"}


def test_a_line_without_its_name_is_counted_not_fatal():
    rows, bad = parse_oneliners("MaxTime=1\nPartitionName=x MaxTime=2\n", "partition")
    assert [r[1] for r in rows] == ["x"] and len(bad) == 1


def test_the_landed_snapshot_is_the_replays_recorded_policy(tmp_path):
    lake = tmp_path / "lake"
    rows, shares, bad = collect_slurm_config(Lake.at(lake), "testcluster", runner, NOW)
    assert rows > 0 and shares == 9 and bad == []

    policy = apply_settings(Policy(), recorded_settings(connect(lake), "testcluster"))

    assert policy.priority_type == "priority/multifactor"
    assert (policy.weight_fairshare, policy.weight_age) == (10000, 1000)
    assert policy.max_age_s == policy.decay_half_life_s == 7 * 86400
    assert policy.max_time("gpu") == 86400
    assert policy.partitions["gpu"].nodes == ("gpu-node01", "gpu-node02")
    assert policy.node_gres == {"gpu-node01": (8, "h100"), "gpu-node02": (4, "a100")}
    assert policy.shares == pytest.approx({"ml": 0.4, "research": 0.6})
    assert policy.boot_e == dt.datetime(2026, 12, 4, 20, 33, 9, tzinfo=dt.UTC).timestamp()


def test_a_gpu_limit_set_with_sacctmgr_reaches_the_replay(tmp_path):
    lake = tmp_path / "lake"

    def limited(argv: list[str]) -> str:
        text = runner(argv)
        if "associations" in argv and "GrpTRES" in ",".join(argv):
            text = text.replace("testcluster|ml|||", "testcluster|ml||gres/gpu=4,cpu=8|gres/gpu=2")
        return text

    collect_slurm_config(Lake.at(lake), "testcluster", limited, NOW)
    policy = apply_settings(Policy(), recorded_settings(connect(lake), "testcluster"))

    assert policy.account_gpu_cap == {"ml": 4} and policy.user_gpu_cap == {"ml": 2}


def test_jobs_submitted_in_one_second_queue_in_slurms_order():
    # Slurm breaks a tie in priority by submit time, then job number (an array's tasks by
    # their array job's): the engine breaks it by position, so the loader puts them so, not
    # in the ids' text order (which puts 10 before 9)
    from detectors.replay.workload import _in_slurm_order

    jobs = pl.DataFrame(
        {"job_id": ["10", "9", "8_2", "8_10", "7", "11"], "submit_e": [5.0, 5, 5, 5, 5, 4]}
    )
    assert _in_slurm_order(jobs)["job_id"].to_list() == ["11", "7", "8_2", "8_10", "9", "10"]
