"""`gpuledger serve` at the command line: bad input is one line with exit 1, never a traceback."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from app.cli import cli


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./gpuledger.toml, no ./lake of the repository's
    for name in ("GPULEDGER_LAKE", "GPULEDGER_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def test_a_missing_lake_is_one_line(runner, tmp_path):
    result = runner.invoke(cli, ["serve", "--lake", str(tmp_path / "nowhere")])

    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: no lake at ") and result.output.count("\n") == 1


def test_a_port_in_use_is_one_line(runner, tmp_path):
    (tmp_path / "lake").mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(cli, ["serve", "--lake", "lake", "--port", str(port)])

    assert result.exit_code == 1, result.output
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert "Traceback" not in result.output


def test_help_names_the_endpoint_and_the_dashboards(runner):
    result = runner.invoke(cli, ["serve", "--help"])

    assert result.exit_code == 0
    assert "/metrics" in result.output and "deploy/grafana" in result.output
