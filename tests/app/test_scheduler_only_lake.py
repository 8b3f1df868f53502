"""A lake with the scheduler's records and no telemetry yet (`collect slurm` first, as the
README's pipeline starts): `attribute` builds the allocation figures, where it refused with
"no data for 'gpu_samples'" and `report weekly` sent the operator back to `attribute`."""

from __future__ import annotations

import os

from click.testing import CliRunner

from app.cli import cli
from tests.marts import rows as r
from warehouse.connection import connect


def gpuledger(*args: str):
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
    return runner.invoke(cli, list(args))


def test_the_scheduler_records_alone_give_the_allocation_marts(tmp_path):
    lake = tmp_path / "lake"
    r.land(lake, "jobs", [r.job("1", 0, 3600, gpus=2), r.job("2", 600, 1800)])
    r.land(lake, "job_gpus", [r.job_gpu("1", 0, 3600, gpu_index=i) for i in (0, 1)])

    done = gpuledger("attribute", "--lake", str(lake), "-q")
    assert done.exit_code == 0, done.output
    usage = (
        connect(lake).sql("SELECT job_id, alloc_gpu_h, observed_gpu_h FROM job_usage").fetchall()
    )
    assert sorted(usage) == [("1", 2.0, 0.0), ("2", 1 / 3, 0.0)]
    checked = gpuledger("check", "--lake", str(lake))
    assert checked.exit_code == 0, checked.output


def test_a_lake_with_neither_is_one_error_line(tmp_path):
    (tmp_path / "lake").mkdir()
    done = gpuledger("attribute", "--lake", str(tmp_path / "lake"))
    assert done.exit_code == 1
    assert "has no data for 'gpu_samples' or 'jobs'" in done.output
