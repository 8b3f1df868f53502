"""DESIGN §5: the stable command names and flags, `--lake DIR` on every command, and errors as
one line with exit 1 (2 for usage errors), never a traceback."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from app.cli import cli

# §5's listing: each command with the flags it names.
DESIGN_COMMANDS = {
    "demo": ["--lake", "--gpus", "--days", "--seed", "--no-dashboard"],
    "simulate": ["--lake", "--gpus", "--days", "--seed"],
    "collect prometheus": ["--url", "--cluster", "--since", "--until", "--lake"],
    "collect dcgm-exporter": ["--url", "--cluster", "--once", "--interval"],
    "collect nvml": ["--cluster", "--interval"],
    "collect slurm": ["--cluster", "--since"],
    "collect kubernetes": ["--cluster"],
    "collect slurm-shares": ["--cluster"],
    "collect slurm-config": ["--cluster"],
    "import philly": ["--cluster"],
    "attribute": ["--since"],
    "query": ["--param", "--format"],
    "detect": ["--since"],
    "job": ["--cluster", "--format"],
    "mail": ["-s", "--cluster", "--lake"],
    "evaluate": [],
    "alert": ["--dry-run"],
    "report weekly": ["--week", "--out", "--email"],
    "dashboard": ["--port"],
    "serve": ["--lake", "--port", "--address"],
    "bench": ["--gpus", "--days"],
    "whatif replay": ["--cluster", "--slurm-conf", "--since", "--until", "--set", "--out"],
    "whatif compare": ["--cluster", "--set", "--slurm-conf", "--since", "--until"],
}
# Commands outside §5 that take no --lake, each with why (the lead decides; see the report).
NO_LAKE = {
    "serve-exporters": "serves a simulated fleet's /metrics; it neither reads nor writes a lake",
}


def _commands(group: click.Group = cli, prefix: str = "") -> dict[str, click.Command]:
    out: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            out.update(_commands(command, f"{path} "))
        else:
            out[path] = command
    return out


def _flags(command: click.Command) -> set[str]:
    return {opt for p in command.params for opt in getattr(p, "opts", [])}


@pytest.mark.parametrize(("path", "flags"), sorted(DESIGN_COMMANDS.items()))
def test_each_command_of_the_listing_exists_with_its_flags(path, flags):
    command = _commands().get(path)

    assert command is not None, f"gpuledger {path} is missing"
    assert [f for f in flags if f not in _flags(command)] == []


def test_query_and_import_take_their_positional_arguments():
    commands = _commands()

    assert [p.name for p in commands["query"].params if isinstance(p, click.Argument)] == ["name"]
    assert [p.name for p in commands["job"].params if isinstance(p, click.Argument)] == ["job_id"]
    assert [p.name for p in commands["import philly"].params if isinstance(p, click.Argument)] == [
        "directory"
    ]


def test_query_formats_are_the_listed_four():
    [fmt] = [p for p in _commands()["query"].params if "--format" in p.opts]

    assert isinstance(fmt.type, click.Choice)
    assert list(fmt.type.choices) == ["table", "csv", "json", "parquet"]


def test_dcgm_exporter_takes_several_urls():
    [url] = [p for p in _commands()["collect dcgm-exporter"].params if "--url" in p.opts]

    assert url.multiple


@pytest.mark.parametrize("path", sorted(_commands()))
def test_every_command_takes_lake(path):
    if path in NO_LAKE:
        pytest.skip(NO_LAKE[path])
    assert "--lake" in _flags(_commands()[path])


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./gpuledger.toml, no ./lake of the repository's
    for name in ("GPULEDGER_LAKE", "GPULEDGER_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["query", "no_such_thing"], "'no_such_thing' is neither a table nor a shipped query"),
        (["query", "job_usage", "--format", "xml"], "'xml' is not one of 'table', 'csv'"),
        (["query", "job_usage", "--param", "x"], "'x' is not KEY=VALUE"),
        (["detect", "--since", "last tuesday"], "'last tuesday' is not an ISO date"),
        (["report", "weekly", "--week", "2026-W99"], "2026 has no week 99"),
        (["dashboard", "--port", "99999"], "99999 is not in the range"),
        (["serve", "--port", "99999"], "99999 is not in the range"),
        (
            ["collect", "dcgm-exporter", "--url", "http://a:9400/metrics", "--cluster", "c"]
            + ["--once", "--interval", "5"],
            "use either --once or --interval S, not both",
        ),
        (["import", "philly", "trace"], "Missing option '--cluster'"),
    ],
)
def test_usage_errors_exit_2_naming_the_bad_value(runner, tmp_path, args, message):
    result = runner.invoke(cli, [*args, "--lake", str(tmp_path / "lake")])

    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["import", "philly", "missing", "--cluster", "c"], "Philly trace folder 'missing'"),
        (["job", "42"], "has no data"),
        (["detect"], "has no data for 'job_usage'"),
        (["alert", "--config", "missing.toml"], "config file 'missing.toml' does not exist"),
    ],
)
def test_bad_values_exit_1_with_one_line(runner, tmp_path, args, message):
    Path("lake").mkdir()
    result = runner.invoke(cli, [*args, "--lake", "lake"])

    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1
    assert result.output.startswith("Error: ") and message in result.output
