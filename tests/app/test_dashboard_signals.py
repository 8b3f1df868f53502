"""`kill -INT <gpuledger dashboard pid>` stops Streamlit too: a SIGINT sent to our process
alone (not a terminal's Ctrl-C to the whole group) must not leave the server running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_sigint_to_the_command_alone_stops_the_server(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "lake").mkdir()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "dashboard", "--lake", str(tmp_path / "lake"),
         "--port", str(port)],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # no terminal group: the signal reaches our pid only
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not listening(port):
            assert proc.poll() is None, "the dashboard command exited before serving"
            assert time.monotonic() < deadline, "Streamlit never listened"
            time.sleep(0.5)
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while listening(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not listening(port), "Streamlit kept running after the command stopped"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the session we started
        except ProcessLookupError:
            pass
        proc.wait()
