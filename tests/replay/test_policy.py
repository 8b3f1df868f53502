"""Replay settings: Slurm's names and values, and one clear line for a bad one
(detectors/replay/policy.py, collector/sources/slurm/conf.py)."""

from __future__ import annotations

import pytest

from collector.errors import ConfigError
from collector.sources.slurm.conf import settings_from_slurm_conf
from detectors.replay.policy import Policy, PolicyError, apply_settings, parse_slurm_time


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 5400),
        ("08:00:00", 28800),
        ("30:00", 1800),
        ("2-00:00:00", 172800),
        ("1-12", 129600),
        ("1-00:30", 88200),
        ("UNLIMITED", None),
    ],
)
def test_slurm_times(text, seconds):
    assert parse_slurm_time(text) == seconds


def test_settings_change_what_they_name():
    p = apply_settings(
        Policy(),
        [
            "partition.gpu.MaxTime=08:00:00",
            "assoc.vision.GrpTRES=gres/gpu=16",
            "assoc.vision.MaxTRESPerUser=gres/gpu=4",
            "priority.PriorityWeightFairshare=20000",
            "priority.PriorityType=priority/multifactor",
            "bf_window=2880",
            "node.gpu-07.State=DRAIN",
        ],
    )
    assert p.max_time("gpu") == 28800 and p.max_time("cpu") is None
    assert p.account_gpu_cap == {"vision": 16} and p.user_gpu_cap == {"vision": 4}
    assert p.weight_fairshare == 20000 and p.priority_type == "priority/multifactor"
    assert p.bf_window_s == 2880 * 60 and p.drained == {"gpu-07"}
    assert apply_settings(p, ["assoc.vision.GrpTRES=-1"]).account_gpu_cap == {}
    q = apply_settings(p, ["boot_time=2026-12-04T20:33:09", "sched_latency=2.5"])
    assert q.boot_e == 1796416389 and q.sched_latency_s == 2.5


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        (
            "partition.gpu.MaxTime=eight hours",
            "partition.gpu.MaxTime=eight hours: not a Slurm time",
        ),
        ("partition.gpu.Colour=blue", "unknown partition setting 'Colour'"),
        ("assoc.vision.GrpTRES=cpu=4", "expected gres/gpu=N"),
        ("priority.PriorityWeightFairshare=-3", "expected a number ≥ 0"),
        ("bf_window=0", "bf_window=0: expected a number ≥ 1"),
        ("bf_max_job_test=2.5", "expected an integer"),
        ("frobnicate=1", "frobnicate: unknown setting; the replay takes"),
        ("MaxTime", "MaxTime: expected KEY=VALUE"),
        ("node.n1.State=SLEEPY", "expected DRAIN or IDLE"),
        ("boot_time=yesterday", "boot_time=yesterday: expected epoch seconds or a time"),
        ("sched_latency=-1", "sched_latency=-1: expected a number ≥ 0"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(setting, named):
    with pytest.raises(PolicyError) as err:
        apply_settings(Policy(), [setting])
    assert named in str(err.value) and "\n" not in str(err.value)


SLURM_CONF = """
# a site's slurm.conf (the parts that decide scheduling)
ClusterName=della
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=15,bf_window=2880,bf_max_job_test=200,bf_continue
PriorityType=priority/multifactor
PriorityWeightFairshare=10000
PriorityWeightAge=1000
PriorityMaxAge=7-0
NodeName=gpu[01-03] CPUs=64 RealMemory=512000 Gres=gpu:a100:8 State=UNKNOWN
NodeName=DEFAULT CPUs=8
PartitionName=gpu Nodes=gpu[01-03] MaxTime=2-00:00:00 Default=YES PriorityTier=2
PartitionName=debug Nodes=gpu03 MaxTime=60
"""


def test_a_slurm_conf_becomes_the_recorded_policy():
    settings = settings_from_slurm_conf(SLURM_CONF)
    p = apply_settings(Policy(), settings)

    assert p.priority_type == "priority/multifactor" and p.weight_fairshare == 10000
    assert p.max_age_s == 7 * 86400 and p.bf_interval_s == 15 and p.bf_max_job_test == 200
    assert p.max_time("gpu") == 172800 and p.max_time("debug") == 3600
    assert p.partitions["gpu"].nodes == ("gpu01", "gpu02", "gpu03")
    assert p.partitions["gpu"].priority_tier == 2
    assert p.node_gres["gpu02"] == (8, "a100")


def test_a_slurm_conf_line_slurm_would_refuse_is_named():
    with pytest.raises(ConfigError, match=r"slurm.conf:2: 'Nodes' is not KEY=VALUE"):
        settings_from_slurm_conf("\nPartitionName=gpu Nodes MaxTime=1")


def test_a_default_partition_is_a_setting_the_last_one_said_wins():
    # slurmctld takes the last `Default=YES` partition line; NO undoes it for that partition
    p = apply_settings(Policy(), ["partition.gpu.Default=YES", "partition.long.Default=yes"])
    assert p.default_partition == "long" and set(p.partitions) == {"gpu", "long"}
    assert apply_settings(p, ["partition.gpu.Default=NO"]).default_partition == "long"
    assert apply_settings(p, ["partition.long.Default=NO"]).default_partition is None
    with pytest.raises(PolicyError, match=r"partition.gpu.Default=maybe: expected YES or NO"):
        apply_settings(Policy(), ["partition.gpu.Default=maybe"])
    # a slurm.conf's `Default=YES` is read as that setting
    conf = "PartitionName=gpu Nodes=ALL Default=YES MaxTime=UNLIMITED\nPartitionName=x Nodes=ALL\n"
    assert apply_settings(Policy(), settings_from_slurm_conf(conf)).default_partition == "gpu"
