"""A user's mistake is one clear line and a non-zero exit (1, 2 for a usage error), never a
traceback, and nothing is written where the input is refused: cluster names, paths the system
refuses, configurations too deep or out of range, files that are not what an option names."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from app import cli as cli_module
from app.cli import cli
from tests.app.test_cli import _assert_one_line_error as one_line
from warehouse.layout import MAX_CLUSTER_NAME

REPO = Path(__file__).resolve().parents[2]
# a TOML value nested deeper than Python's recursion limit
DEEP_TOML = "a = " + "[" * 5000 + "]" * 5000 + "\n"


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    clean: dict[str, str | None] = {k: None for k in os.environ if k.startswith("GPULEDGER_")}
    return CliRunner(env={**clean, **(env or {})}).invoke(cli, list(args))


def run_main(*args: str) -> subprocess.CompletedProcess[str]:
    """`gpuledger ARGS` as the console script runs it (app.cli.main), in a fresh process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


# ---------------------------------------------------------------- --cluster


def _cluster_commands(tmp: Path) -> dict[tuple[str, ...], list[str]]:
    """Every command that takes --cluster, with what else it requires (nothing runs: the
    --cluster value is refused first)."""
    lake = ["--lake", str(tmp / "lake")]
    return {
        ("simulate",): [*lake, "--gpus", "8", "--days", "1", "--quiet"],
        ("job",): ["1", *lake],
        ("report", "weekly"): [*lake, "--out", str(tmp / "reports"), "--no-pdf"],
        ("whatif", "replay"): [*lake, "-q"],
        ("whatif", "compare"): [*lake, "-q", "--set", "bf_window=2880"],
        ("serve-exporters",): [
            "--openmetrics",
            str(tmp / "history.om"),
            "--days",
            "1",
            "--gpus",
            "8",
            "--interval",
            "3600",
        ],
        ("import", "philly"): [str(tmp), *lake],
        ("collect", "slurm"): lake,
        ("collect", "slurm-shares"): lake,
        ("collect", "slurm-config"): lake,
        ("collect", "kubernetes"): [*lake, "--kubeconfig", str(tmp / "kubeconfig")],
        ("collect", "prometheus"): [*lake, "--url", "http://127.0.0.1:1"],
        ("collect", "dcgm-exporter"): [*lake, "--url", "http://127.0.0.1:1/metrics", "--once"],
    }


COMMANDS = list(_cluster_commands(Path("/")))


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("", "a cluster name may not be empty"),
        ("  ", "a cluster name may not be empty"),
        ("c" * (MAX_CLUSTER_NAME + 1), f"is too long (at most {MAX_CLUSTER_NAME})"),
        ("c" * 300, "a cluster name of 300 characters is too long"),
    ],
    ids=["empty", "blank", "one-too-long", "300"],
)
def test_a_cluster_name_empty_or_too_long_is_a_usage_error(tmp_path, command, name, said):
    # `job --cluster ''` looked the job up on every cluster ("No job '1' in the lake"); a name
    # of 300 characters ended in OSError "File name too long" half-way through a landing
    args = _cluster_commands(tmp_path)[command]
    result = invoke(*command, *args, "--cluster", name)

    one_line(result, 2, "'--cluster'", said)
    assert not (tmp_path / "lake").exists() and not (tmp_path / "history.om").exists()


def test_every_command_that_takes_a_cluster_is_in_that_test():
    import click

    found = set()

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        elif any("--cluster" in getattr(p, "opts", ()) for p in command.params):
            found.add(path)

    walk(cli, ())
    # mail: Slurm's MailProg, the name from $SLURM_CLUSTER_NAME (the mail goes out whatever);
    # collect nvml: its agent refuses an empty name itself ("cluster name is empty", exit 1)
    assert found - {("mail",), ("collect", "nvml")} == set(COMMANDS)


def test_a_cluster_name_of_the_longest_length_lands(tmp_path):
    name = "c" * MAX_CLUSTER_NAME
    result = invoke(
        "simulate", "--lake", str(tmp_path / "lake"), "--gpus", "8", "--days", "1", "-q",
        "--cluster", name,
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert (tmp_path / "lake" / "jobs" / f"cluster={name}").is_dir()


# ---------------------------------------------------------------- paths the system refuses


def test_a_lake_path_too_long_is_one_line_naming_it(tmp_path):
    # every command ended in OSError "File name too long", a traceback
    lake = tmp_path / ("d" * 300)
    for args in (["attribute"], ["detect"], ["job", "1"]):
        done = run_main(*args, "--lake", str(lake))

        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
        assert done.stderr.strip().splitlines() == [f"Error: {str(lake)!r}: File name too long"]


@pytest.mark.parametrize(
    "code",
    [
        errno.ENAMETOOLONG,
        errno.ENOENT,
        errno.EACCES,
        errno.ENOSPC,
        errno.EIO,
        errno.EROFS,
        errno.ENOTDIR,
        errno.EISDIR,
    ],
    ids=errno.errorcode.get,
)
def test_a_file_the_system_refuses_is_one_line_naming_it(monkeypatch, capsys, code):
    # main() let every OSError that names a file through as a traceback
    def refused() -> None:
        raise OSError(code, os.strerror(code), "/srv/lake/out.csv")

    monkeypatch.setattr(cli_module, "cli", refused)
    with pytest.raises(SystemExit) as exited:
        cli_module.main()

    assert exited.value.code == 1
    said = capsys.readouterr()
    assert said.err.splitlines() == [f"Error: '/srv/lake/out.csv': {os.strerror(code)}"]
    assert said.out == ""


def test_a_file_of_gpuledgers_own_missing_is_a_traceback(monkeypatch):
    # a broken install or a bug: the one line hid where it came from
    shipped = str(Path(cli_module.__file__).resolve().parents[1] / "sql" / "gone.sql")

    def missing() -> None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), shipped)

    monkeypatch.setattr(cli_module, "cli", missing)
    with pytest.raises(FileNotFoundError):
        cli_module.main()


def test_a_rename_the_system_refuses_names_both_paths(monkeypatch, capsys):
    def refused() -> None:
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), "/a/x", None, "/b/x")

    monkeypatch.setattr(cli_module, "cli", refused)
    with pytest.raises(SystemExit):
        cli_module.main()

    assert capsys.readouterr().err == f"Error: '/a/x' -> '/b/x': {os.strerror(errno.EXDEV)}\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_parquet_out_on_a_full_disk_is_one_line(tmp_path):
    # polars' writer raised ComputeError "Invalid thrift: transport error": a traceback
    lake = tmp_path / "lake"
    assert (
        invoke("simulate", "--lake", str(lake), "--gpus", "8", "--days", "1", "-q").exit_code == 0
    )
    result = invoke(
        "query", "jobs", "--lake", str(lake), "--format", "parquet", "--out", "/dev/full"
    )
    one_line(result, 1, "cannot write '/dev/full' (No space left on device)")

    result = invoke(
        "whatif", "replay", "--lake", str(lake), "--cluster", "sim", "-q", "--out", "/dev/full"
    )
    one_line(result, 1, "--out /dev/full: No space left on device")

    out = tmp_path / "replay.parquet"
    result = invoke(
        "whatif", "replay", "--lake", str(lake), "--cluster", "sim", "-q", "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    import polars as pl

    assert pl.read_parquet(out).height > 0


# ---------------------------------------------------------------- empty paths


def test_an_empty_out_or_lake_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    # `report weekly --out ''` wrote the reports into the current folder, `--lake ''` a lake
    monkeypatch.chdir(tmp_path)
    result = invoke("report", "weekly", "--lake", str(tmp_path / "lake"), "--out", "", "--no-pdf")
    one_line(result, 2, "'--out'", "'' is an empty path")

    result = invoke("simulate", "--lake", "", "--gpus", "8", "--days", "1", "-q")
    one_line(result, 2, "'--lake'", "'' is an empty path")
    assert list(tmp_path.iterdir()) == []


def test_config_check_refuses_the_empty_lake(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line(invoke("config", "check", "--lake", ""), 2, "'--lake'", "'' is an empty path")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (("run",), "--lake"),
        (("config", "check"), "--lake"),
        (("bench",), "--lake"),
        (("evaluate",), "--workdir"),
        (("collect", "nvml"), "--spool"),
    ],
)
def test_every_folder_a_command_writes_refuses_the_empty_path(command, option):
    # '' is the current folder: a lake, a spool or an evaluation's lakes landed there (these
    # commands run long or for good, so their option is checked, not run)
    found = cli
    for name in command:
        found = found.commands[name]  # type: ignore[attr-defined]
    [param] = [p for p in found.params if option in getattr(p, "opts", ())]
    with pytest.raises(click.BadParameter, match="'' is an empty path"):
        param.type.convert("", param, None)


# ---------------------------------------------------------------- configuration files


def test_a_config_nested_too_deeply_is_a_configuration_error(tmp_path):
    # tomllib's RecursionError was a traceback
    config = tmp_path / "gpuledger.toml"
    config.write_text(DEEP_TOML, encoding="utf-8")

    result = invoke("config", "check", "--config", str(config))
    one_line(result, 1, f"config file {str(config)!r} is not valid TOML", "nested too deeply")

    result = invoke("attribute", "--lake", str(tmp_path / "lake"), "--config", str(config))
    one_line(result, 1, "is not valid TOML", "nested too deeply")
    assert not (tmp_path / "lake").exists()


def test_an_alerts_directory_nested_too_deeply_is_a_routing_error(tmp_path):
    from app.alerts.directory import load_directory
    from app.alerts.errors import RoutingError

    directory = tmp_path / "people.toml"
    directory.write_text(DEEP_TOML, encoding="utf-8")

    with pytest.raises(RoutingError, match="is not valid TOML: .* nested too deeply"):
        load_directory(directory, "example.org")


@pytest.mark.parametrize(
    ("shares", "said"),
    [
        ("{ physics = -40, bio = 10 }", "expected non-negative numbers (physics = -40.0)"),
        ("{ physics = 40, bio = -0.5 }", "expected non-negative numbers (bio = -0.5)"),
    ],
)
def test_negative_fair_share_shares_are_a_configuration_error(tmp_path, shares, said):
    config = tmp_path / "gpuledger.toml"
    config.write_text(f"[recommend.fairshare_weight]\nshares = {shares}\n", encoding="utf-8")

    result = invoke("config", "check", "--config", str(config))

    one_line(result, 1, "recommend.fairshare_weight.shares: ", said)


def test_zero_and_positive_fair_share_shares_are_taken(tmp_path):
    config = tmp_path / "gpuledger.toml"
    config.write_text(
        "[recommend.fairshare_weight]\nshares = { physics = 0, bio = 40 }\n", encoding="utf-8"
    )

    result = invoke("config", "check", "--config", str(config))

    assert result.exit_code == 0, result.output
    assert "shares = { physics = 0, bio = 40 }" in result.output


# ---------------------------------------------------------------- serve-exporters


@pytest.mark.parametrize("value", ["0", "-5", "nan", "1.5", "3601"])
def test_a_scrape_interval_out_of_range_is_a_usage_error(tmp_path, value):
    # any number went into the printed Prometheus config (`scrape_interval: nans`)
    # (with --openmetrics: the command exits where it took the value, instead of serving)
    history = tmp_path / "history.om"
    result = invoke(
        "serve-exporters", "--scrape-interval", value, "--openmetrics", str(history),
        "--days", "1", "--gpus", "8", "--interval", "3600",
    )  # fmt: skip

    one_line(result, 2, "'--scrape-interval'")
    assert not history.exists()


@pytest.mark.parametrize("option", ["--targets-file", "--openmetrics"])
def test_a_file_in_a_missing_folder_is_refused_before_any_work(tmp_path, option):
    # a traceback (FileNotFoundError) once the fleet was simulated, or serving
    target = tmp_path / "missing" / "out"
    result = invoke("serve-exporters", "--port", "0", "--days", "1", option, str(target))

    one_line(result, 2, f"--{option[2:]}", f"cannot write {str(target)!r}: no folder")
    assert not target.parent.exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_openmetrics_on_a_full_disk_is_one_line():
    # said as "cannot write the output", as if stdout were full
    result = invoke("serve-exporters", "--gpus", "8", "--days", "1", "--openmetrics", "/dev/full")

    one_line(result, 1, "cannot write '/dev/full' (No space left on device)")


# ---------------------------------------------------------------- whatif --slurm-conf


@pytest.fixture(scope="module")
def sim_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lake = tmp_path_factory.mktemp("sim") / "lake"
    assert (
        invoke("simulate", "--lake", str(lake), "--gpus", "8", "--days", "1", "-q").exit_code == 0
    )
    return lake


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (bytes(range(256)) * 16, "not a slurm.conf: it is not text"),
        (b"hello, this is prose\nand no setting at all\n", "not a slurm.conf: no Key=Value line"),
        (b"", "not a slurm.conf: no Key=Value line"),
    ],
    ids=["binary", "prose", "empty"],
)
def test_a_slurm_conf_that_is_none_is_refused(sim_lake, tmp_path, content, said):
    # random bytes replayed Slurm's defaults and said they came from the file
    conf = tmp_path / "slurm.conf"
    conf.write_bytes(content)

    result = invoke(
        "whatif", "replay", "--lake", str(sim_lake), "--cluster", "sim", "-q",
        "--slurm-conf", str(conf),
    )  # fmt: skip

    one_line(result, 1, str(conf), said)


def test_the_test_slurms_own_slurm_conf_is_read(sim_lake):
    conf = REPO / "tests" / "infra" / "slurm" / "slurm.conf.in"
    result = invoke(
        "whatif", "replay", "--lake", str(sim_lake), "--cluster", "sim", "-q",
        "--slurm-conf", str(conf),
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert f"and {conf}" in result.output


# ---------------------------------------------------------------- mail


def test_mails_exit_status_for_a_usage_error_is_the_one_its_help_gives():
    # the help said "1 anything else" while a usage error exited 2 (the wrapper sends the
    # mail itself on both)
    result = invoke("mail", "alice")
    assert result.exit_code == 2, result.output

    helped = " ".join(invoke("mail", "--help").output.split())
    assert "2 a usage error" in helped


def test_a_config_that_is_not_toml_still_sends_a_began_mail_and_says_so(tmp_path):
    # the mail went silently to /usr/bin/mail (GPULEDGER_MAIL_MAILER not read), and where
    # there was none, it was lost
    mailer = tmp_path / "mailer"
    mailer.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/argv"\n', encoding="utf-8")
    mailer.chmod(0o755)
    config = tmp_path / "gpuledger.toml"
    config.write_text("this is [not toml\n", encoding="utf-8")
    subject = "Slurm Job_id=12 Name=x Began, Queued time 00:00:01"
    env = {"GPULEDGER_CONFIG": str(config), "GPULEDGER_MAIL_MAILER": str(mailer)}

    result = invoke("mail", "-s", subject, "alice", env=env)

    assert result.exit_code == 0, result.output
    assert (tmp_path / "argv").read_text(encoding="utf-8").splitlines() == ["-s", subject, "alice"]
    assert result.stderr.splitlines() == [
        f"gpuledger: the configuration is not valid: config file {str(config)!r} is not valid "
        "TOML: Expected '=' after a key in a key/value pair (at line 1, column 6); the mail "
        f"goes out through {str(mailer)!r}"
    ]
