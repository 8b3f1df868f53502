"""`gpuledger dashboard` and `demo` refuse an address or port they cannot listen on in one
line, before any work: Streamlit said so in a log line (or a 53-line traceback for an unknown
address) after the banner had printed the URL, and the command exited 0."""

from __future__ import annotations

import socket

from click.testing import CliRunner

from app.cli import cli


def test_a_port_in_use_is_one_error_line_before_the_banner(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            cli, ["dashboard", "--lake", str(tmp_path), "--port", str(port)]
        )
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: cannot listen on 127.0.0.1:{port} (")
    assert result.output.count("\n") == 1  # no banner naming a URL another program serves


def test_an_address_this_machine_does_not_have_is_one_error_line(tmp_path):
    # (192.0.2.1 is TEST-NET-1, documentation only: an address literal, no name to resolve)
    result = CliRunner().invoke(
        cli, ["dashboard", "--lake", str(tmp_path), "--address", "192.0.2.1", "--port", "8599"]
    )
    assert result.exit_code == 1
    assert result.output.startswith("Error: cannot listen on 192.0.2.1:8599 (")
    assert result.output.count("\n") == 1


def test_demo_says_so_before_its_minute_of_work(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        lake = tmp_path / "lake"
        result = CliRunner().invoke(cli, ["demo", "--lake", str(lake), "--port", str(port)])
    assert result.exit_code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert not lake.exists()  # nothing simulated
