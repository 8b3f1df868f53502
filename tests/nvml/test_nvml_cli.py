"""`gpuledger collect nvml`: help, one-line errors (no NVML, no GPU), a --once run.

The command imports `pynvml` itself, so these tests put the fake module (or None, for "not
installed") in `sys.modules` under that name: the import is the seam at the CLI edge.
"""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from tests.nvml.fake_nvml import FakeGpu, FakeNvml

UUID = "GPU-0f1e2d3c-0000-4000-8000-000000000000"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["collect", "nvml", *args])


@pytest.fixture
def paths(tmp_path):
    return ["--spool", str(tmp_path / "spool"), "--lake", str(tmp_path / "lake")]


def test_help_says_what_the_agent_collects_and_needs():
    result = run("--help")

    assert result.exit_code == 0
    for words in ("--cluster", "--interval", "--once", "--spool", "--lake", "nvml-cgroup",
                  "gpuledger[nvml]", "/var/spool/gpuledger"):  # fmt: skip
        assert words in result.output


def test_without_the_nvml_bindings_it_says_how_to_install_them(monkeypatch, paths):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml → ImportError

    result = run("--cluster", "della", "--once", *paths)

    assert result.exit_code == 1
    assert result.output == (
        "Error: the NVML Python bindings are missing; install it with: "
        "pip install 'gpuledger[nvml]' (the nvidia-ml-py package)\n"
    )


def test_without_the_driver_library_it_says_so(monkeypatch, paths):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([], init_error=12))

    result = run("--cluster", "della", "--once", *paths)

    assert result.exit_code == 1
    assert result.output == (
        "Error: NVML is not usable on this node: the NVIDIA driver library libnvidia-ml.so.1 "
        "is not installed\n"
    )


def test_without_a_gpu_it_says_so(monkeypatch, paths):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([]))

    result = run("--cluster", "della", "--node", "g001", "--once", *paths)

    assert result.exit_code == 1
    assert result.output == "Error: no NVIDIA GPU found on 'g001' (NVML lists 0 devices)\n"


def test_a_missing_cluster_is_a_usage_error():
    assert run("--once").exit_code == 2


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--cluster", " "], "cluster name is empty"),
        (["--cluster", "della", "--node", ""], "node name is empty"),  # (was this host's name)
    ],
)
def test_an_empty_cluster_or_node_name_is_one_clear_error(monkeypatch, paths, args, said):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([FakeGpu(UUID)]))

    result = run(*args, "--once", *paths)

    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and said in result.output


def test_once_samples_lands_and_summarises(monkeypatch, paths, tmp_path, read_lake):
    gpu = FakeGpu(UUID, unsupported={"nvmlDeviceGetPowerUsage"})
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([gpu]))

    result = run("--cluster", "della", "--node", "g001", "--once", "--interval", "60", *paths)

    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "Sampled 1 gpu_samples row(s), 0 gpu_events row(s) and 0 job_gpus interval update(s) "
        f"in 1 tick(s); landed 2 spooled file(s) from {tmp_path / 'spool'} into "
        f"{tmp_path / 'lake'}",
        "Fields nulled or PIDs unattributed, by reason: power_w: NOT_SUPPORTED 1",
    ]
    samples = read_lake(tmp_path / "lake", "gpu_samples").to_pylist()
    assert [(r["node"], r["interval_s"], r["power_w"]) for r in samples] == [("g001", 60.0, None)]


def test_an_unreachable_lake_is_reported_and_the_files_wait(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([FakeGpu(UUID)]))
    (tmp_path / "mnt").write_text("the shared file system is not mounted")
    spool, lake = tmp_path / "spool", tmp_path / "mnt" / "lake"

    result = run(
        "--cluster", "c", "--node", "g1", "--once", "--spool", str(spool), "--lake", str(lake)
    )

    assert result.exit_code == 0, result.output
    assert "Not landed yet: 2 file(s) stay in" in result.output


def test_show_processes_prints_each_pid_and_its_job(monkeypatch, paths, proc):
    proc.add(4242, "0::/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0")
    gpu = FakeGpu(UUID, processes=[(4242, 1 << 30), (999_999_999, 1 << 30)])
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([gpu]))
    result = run(
        "--cluster", "della", "--node", "g001", "--once", "--show-processes",
        "--proc-root", str(proc.root), *paths,
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[:2] == [
        f"pid 4242 on GPU 0 ({UUID}): Slurm job 1234, step 0",
        f"pid 999999999 on GPU 0 ({UUID}): no job (process_gone)",
    ]
