"""`settings_from_slurm_conf` on a text that is no slurm.conf (random bytes, prose, nothing):
a ConfigError naming it, where it was read as a slurm.conf with nothing in it and the replay
said the recorded policy came from it. Real slurm.conf files are read as before."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from collector.errors import ConfigError
from collector.sources.slurm.conf import settings_from_slurm_conf

REPO = Path(__file__).resolve().parents[2]
# the test Slurm's own slurm.conf (tests/infra/slurm), as start_slurm.sh fills it in but for
# its @…@ placeholders, which slurm.conf reading does not look at
TEST_SLURM_CONF = REPO / "tests" / "infra" / "slurm" / "slurm.conf.in"


def _read(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")  # as `whatif --slurm-conf` reads a file


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes_are_no_slurm_conf(seed):
    data = random.Random(seed).randbytes(4096)

    with pytest.raises(ConfigError, match=r"^noise\.bin: not a slurm\.conf: it is not text"):
        settings_from_slurm_conf(_read(data), "noise.bin")


@pytest.mark.parametrize(
    "text",
    ["", "# only a comment\n\n", "hello, this is prose\nno setting in it\n", "Include x.conf\n"],
    ids=["empty", "comments", "prose", "include-only"],
)
def test_a_text_without_one_setting_is_no_slurm_conf(text):
    with pytest.raises(ConfigError, match=r"^slurm\.conf: not a slurm\.conf: no Key=Value line"):
        settings_from_slurm_conf(text)


def test_the_test_slurms_slurm_conf_is_read_as_before():
    settings = dict(settings_from_slurm_conf(TEST_SLURM_CONF.read_text(encoding="utf-8")))

    assert settings["priority.PriorityType"] == "priority/multifactor"
    assert settings["priority.PriorityWeightFairshare"] == "10000"
    assert settings["partition.gpu.Nodes"] == "gpu-node01,gpu-node02"
    assert settings["partition.gpu.MaxTime"] == "1-00:00:00"
    assert settings["node.gpu-node01.Gres"] == "gpu:h100:8"


@pytest.mark.parametrize(
    "text",
    [
        "ClusterName=della\n",  # nothing the replay models: no settings, and no error
        "  PartitionName=gpu Nodes=g[1-2] MaxTime=1:00:00 # a comment\n",
        "NodeName=d1 Gres=gpu:8\n",
    ],
)
def test_a_slurm_conf_with_any_setting_is_read(text):
    settings_from_slurm_conf(text)
