"""`gpuledger whatif compare|replay --set` on a Kubernetes cluster replay past the end of the data
(app/whatif_kueue.py), as on Slurm: a workload admitted only after it counts as admitted, with its
wait. The lake is tests/replay/kueue_lake.py's, cut at 01:00 by --until: b1 (submitted 00:10)
was admitted at 02:00 in the record and in the baseline, after that end."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import cli
from tests.replay.kueue_lake import CLUSTER, shared_kueue_lake

UNTIL = "2024-03-01T01:00:00"


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    return shared_kueue_lake(tmp_path_factory)


def whatif(lake: Path, *args: str) -> str:
    result = CliRunner().invoke(
        cli,
        ["whatif", *args, "--lake", str(lake), "--cluster", CLUSTER, "--until", UNTIL, "-q"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return result.output


def line(output: str, head: str) -> list[str]:
    return next(x for x in output.splitlines() if x.startswith(head)).split()


def test_compare_counts_the_workloads_either_run_admits_after_the_end(lake):
    out = whatif(lake, "compare", "--set", "clusterqueue.cq-a.borrowingLimit=0")

    assert "a what-if goes on past it" in out
    # baseline: b1 waits for a1 and a2 until 02:00; capped, a2 waits for a1 until 02:00
    assert line(out, "workloads admitted")[-2:] == ["3", "3"]
    assert line(out, "queue cq-b")[2:] == ["1", "h", "50", "min"] * 2 + ["0", "min"] * 2
    assert line(out, "queue cq-a")[2:] == ["0", "min"] * 2 + ["2", "h", "00", "min"] * 2
    # GPU-hours are counted to the end of the data: a1 and a2 hold 8 GPUs 00:00 – 01:00;
    # with the cap a1 and b1 (from 00:10) hold 4 each
    assert line(out, "GPU-hours held")[-2:] == ["8.0", "7.3"]
    # the calibration stops at the end: b1 was admitted after it in the record and replay
    assert "2 workloads admitted in both; 1 only in the record, 0 only in the replay" in out


def test_replay_with_a_change_admits_the_workload_it_delays_past_the_end(lake):
    out = whatif(lake, "replay", "--set", "clusterqueue.cq-a.borrowingLimit=0")

    assert "3 workloads admitted" in out


def test_draws_is_for_slurm_clusters_one_line(lake):
    result = CliRunner().invoke(
        cli, ["whatif", "replay", "--lake", str(lake), "--cluster", CLUSTER, "-q", "--draws", "3"]
    )
    assert result.exit_code == 2
    assert "--draws is for Slurm clusters" in result.output
    assert "Traceback" not in result.output
