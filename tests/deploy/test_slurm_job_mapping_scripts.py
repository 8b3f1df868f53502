"""The Slurm prolog/epilog that write dcgm-exporter's --hpc-job-mapping-dir files."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.docs.pages import all_text

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "slurm"
PROLOG = DEPLOY / "prolog-dcgm-job-mapping.sh"
EPILOG = DEPLOY / "epilog-dcgm-job-mapping.sh"


def run(script: Path, folder: Path, job: str, gpus: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GPULEDGER_HPC_JOB_MAPPING_DIR=str(folder), SLURM_JOB_ID=job)
    env["SLURM_JOB_GPUS"] = gpus
    return subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, check=False
    )


def files(folder: Path) -> dict[str, list[str]]:
    return {
        p.name: p.read_text().splitlines()
        for p in sorted(folder.iterdir())
        if not p.name.startswith(".")
    }


def test_prolog_writes_one_file_per_gpu_and_epilog_removes_the_job(tmp_path):
    folder = tmp_path / "job-mapping"
    assert run(PROLOG, folder, "101", "0,2").returncode == 0
    assert run(PROLOG, folder, "102", "2,3").returncode == 0  # GPU 2 shared (MPS/time-slicing)
    assert run(PROLOG, folder, "101", "0,2").returncode == 0  # a rerun adds nothing
    assert files(folder) == {"0": ["101"], "2": ["101", "102"], "3": ["102"]}

    assert run(EPILOG, folder, "101", "0,2").returncode == 0
    assert files(folder) == {"2": ["102"], "3": ["102"]}
    assert run(EPILOG, folder, "102", "2,3").returncode == 0
    assert files(folder) == {}


def test_scripts_never_fail_the_job_on_odd_input(tmp_path):
    folder = tmp_path / "job-mapping"
    result = run(PROLOG, folder, "7", "0,gpu1,")  # a non-numeric index is skipped and logged
    assert result.returncode == 0
    assert "gpu1" in result.stderr
    assert files(folder) == {"0": ["7"]}
    assert run(PROLOG, folder, "", "0").returncode == 0  # not in a job: nothing to do
    assert run(EPILOG, tmp_path / "missing", "7", "0").returncode == 0


def test_the_docs_start_dcgm_exporter_on_the_folder_the_scripts_write():
    docs = all_text()
    folders = set(re.findall(r"--hpc-job-mapping-dir (/\S+?)`", docs))
    assert folders, "the docs no longer say how to start dcgm-exporter"
    for script in (PROLOG, EPILOG):
        (default,) = re.findall(r"GPULEDGER_HPC_JOB_MAPPING_DIR:-(/[^}]+)\}", script.read_text())
        assert folders == {default}, (script.name, folders, default)
