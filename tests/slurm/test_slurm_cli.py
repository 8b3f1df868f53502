"""`gpuledger collect slurm` and the default runner, against fake `sacct`/`scontrol` programs.

The fakes are small shell scripts on PATH that print recorded outputs: the real subprocess
path runs, nothing is patched.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from collector.sources.slurm.collect import SlurmCommandError, run_command

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def write_program(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    """A folder first on PATH, with sacct and scontrol answering from recorded outputs."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")

    def install(sacct: str = "collect/sacct-early.txt", scontrol="collect/scontrol-early.txt"):
        (folder / "delimit.py").write_text(DELIMIT_SCRIPT, encoding="utf-8")
        help_file = shlex.quote(str(FIXTURES / "handmade/sacct-helpformat-22.05.txt"))
        sacct_file = shlex.quote(str(FIXTURES / sacct))
        write_program(
            folder,
            "sacct",
            # (as sacct prints with the collector's --delimiter: it replaces the separators,
            # the first 19 '|' of each line, and leaves a '|' in the name, the last field)
            'd="|"; for a in "$@"; do case "$a" in --delimiter=*) d="${a#--delimiter=}";; '
            f'esac; done; case "$*" in *--helpformat*) cat {help_file};; '
            f'*) {shlex.quote(sys.executable)} {DELIMIT} "$d" {sacct_file};; esac',
        )
        write_program(folder, "scontrol", f"cat {shlex.quote(str(FIXTURES / scontrol))}")
        return folder

    return install


# sacct's output with the delimiter given (argv 1): the first 19 '|' of each line of the file
# (argv 2) are its fields' separators, a '|' after them is in the job's name (the last field)
DELIMIT_SCRIPT = (
    "import sys\n"
    "d = sys.argv[1]\n"
    "for line in open(sys.argv[2], encoding='utf-8').read().splitlines(True):\n"
    "    sys.stdout.write(line.replace('|', d, 19))\n"
)
DELIMIT = '"$(dirname "$0")/delimit.py"'


def invoke(*args: str) -> Result:
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
    return runner.invoke(cli, ["collect", "slurm", *args])


def one_error_line(result: Result, code: int) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    [line] = [ln for ln in result.output.splitlines() if ln.startswith("Error:")]
    return line


def test_collect_slurm_lands_and_summarises(tmp_path, fake_bin):
    fake_bin()
    lake = str(tmp_path / "lake")

    first = invoke("--cluster", "two-node", "--lake", lake)
    again = invoke("--cluster", "two-node", "--lake", lake)

    assert first.exit_code == 0, first.output
    assert "7 job(s) seen, 7 landed (7 new, 0 updated)" in first.output
    assert "GPU allocations: 9 opened, 0 closed; 0 malformed line(s) skipped." in first.output
    assert again.exit_code == 0, again.output
    assert "7 job(s) seen, 0 landed (0 new, 0 updated)" in again.output


def test_malformed_lines_are_reported_with_their_reasons(tmp_path, fake_bin):
    fake_bin(sacct="collect/sacct-early-with-bad-line.txt")

    result = invoke("--cluster", "c", "--lake", str(tmp_path / "lake"))

    assert result.exit_code == 0, result.output
    assert "1 malformed line(s) skipped: sacct line 5: 10 fields, expected 20" in result.output


def test_slurmdbd_down_is_one_clear_error_line(tmp_path, fake_bin):
    folder = fake_bin()
    write_program(
        folder,
        "sacct",
        'case "$*" in *--helpformat*) echo JobID JobIDRaw State Submit;; *) '
        'echo "sacct: error: Problem talking to the database: Connection refused" >&2; '
        "exit 1;; esac",
    )

    result = invoke("--cluster", "c", "--lake", str(tmp_path / "lake"))

    line = one_error_line(result, 1)
    assert line == (
        "Error: sacct failed (exit 1): sacct: error: Problem talking to the database: "
        "Connection refused"
    )
    assert not (tmp_path / "lake" / "jobs").exists()


def test_missing_slurm_commands_are_one_clear_error_line(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))

    result = invoke("--cluster", "c", "--lake", str(tmp_path / "lake"))

    assert "'sacct' not found on PATH" in one_error_line(result, 1)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--lake", "x"], "Missing option '--cluster'"),
        (["--cluster", "c", "--since", "last tuesday"], "is not an ISO date"),
        (["--cluster", "c", "--timeout", "0"], "--timeout"),
    ],
)
def test_usage_errors_exit_2(args, fragment):
    result = invoke(*args)

    assert result.exit_code == 2, result.output
    assert fragment in result.output


def test_help_names_the_options():
    result = invoke("--help")

    assert result.exit_code == 0
    for option in ("--cluster", "--since", "--lake", "--timeout"):
        assert option in result.output
    assert "slurm" in CliRunner().invoke(cli, ["collect", "--help"]).output


def test_the_default_runner_runs_slurm_in_utc_with_standard_times(tmp_path, fake_bin):
    folder = fake_bin()
    write_program(folder, "sacct", 'echo "$TZ $SLURM_TIME_FORMAT $#"')

    assert run_command(["sacct", "--parsable2", "a b"]) == "UTC standard 2\n"


def test_the_default_runner_gives_up_after_its_timeout(tmp_path, fake_bin):
    folder = fake_bin()
    write_program(folder, "scontrol", "exec sleep 5")

    with pytest.raises(SlurmCommandError, match="scontrol did not answer within 0.2 s"):
        run_command(["scontrol", "show", "job", "-d"], timeout_s=0.2)


def test_a_slurm_command_still_running_ends_with_the_process(tmp_path, fake_bin):
    # the service stopped while sacct hung: the hung sacct ran on, reparented to init
    folder = fake_bin()
    pid_file = tmp_path / "sacct.pid"
    write_program(folder, "sacct", f'echo $$ > "{pid_file}"; exec sleep 60')
    code = (
        "import threading, time\n"
        "from collector.sources.slurm.collect import run_command\n"
        "threading.Thread(target=run_command, args=(['sacct'],), daemon=True).start()\n"
        "time.sleep(1.0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    pid = int(pid_file.read_text())
    for _ in range(50):  # (killed; reaped by init a moment later)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        raise AssertionError(f"sacct (pid {pid}) outlived the process that ran it")


def test_the_slurm_modules_import_no_heavy_library():
    code = (
        "import json, sys\n"
        "import collector.sources.slurm.sacct, collector.sources.slurm.collect\n"
        "import app.commands.collect\n"
        "heavy = ('duckdb', 'polars', 'streamlit', 'pandas')\n"
        "print(json.dumps([m for m in heavy if m in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
