"""`gpuledger collect prometheus` at the command line: help, usage errors (2) and one-line
errors (1) (app/commands/prometheus.py)."""

from __future__ import annotations

import datetime as dt
import socket

import pytest
from click.testing import CliRunner

from app.commands.prometheus import Duration, When, command, command_prometheus
from app.commands.serve_exporters import command as serve_exporters


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_command_is_exported_under_both_names():
    assert command is command_prometheus and command.name == "prometheus"
    assert serve_exporters.name == "serve-exporters"


@pytest.mark.parametrize(
    ("cmd", "mentions"),
    [
        (
            command_prometheus,
            [
                "--url",
                "--cluster",
                "--since",
                "--until",
                "--window",
                "--parallel",
                "--retries",
                "follow",
            ],
        ),
        (serve_exporters, ["--exporter-version", "--port", "--collect-interval", "--openmetrics"]),
    ],
)
def test_help_exits_0_and_lists_the_options(cmd, mentions):
    result = CliRunner().invoke(cmd, ["--help"])

    assert result.exit_code == 0
    for mention in mentions:
        assert mention in result.output


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--window", "ten"], "is not a duration"),
        (["--since", "yesterday-ish"], "is not a time"),
        (["--since", "2026-11-02", "--until", "2026-11-01"], "must be after --since"),
        (["--parallel", "0"], "0 is not in the range"),
        (["--window", "90.5"], "not a whole number of seconds"),
        # a sample standing for more than an hour is no sampling step: the marts take it for none
        (["--interval", "2h"], "'2h' is more than 3600 s"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path, args, fragment):
    result = CliRunner().invoke(
        command_prometheus,
        ["--url", "http://127.0.0.1:1", "--cluster", "c", "--lake", str(tmp_path), *args],
    )

    assert result.exit_code == 2
    assert fragment in result.output


@pytest.mark.parametrize(
    "url", ["prometheus:9090", "ftp://prom", "http://", "http://127.0.0.1:99999"]
)
def test_a_url_that_is_not_http_is_a_usage_error_without_retries(tmp_path, url):
    result = CliRunner().invoke(
        command_prometheus,
        ["--url", url, "--cluster", "c", "--lake", str(tmp_path), "--backoff", "30"],
    )

    assert result.exit_code == 2, result.output
    assert f"{url!r}" in result.output
    assert "http://prometheus:9090" in result.output  # says what a URL looks like
    assert "retrying" not in result.output


def test_a_window_that_does_not_divide_a_day_is_one_clear_error(tmp_path):
    result = CliRunner().invoke(
        command_prometheus,
        [
            "--url",
            "http://127.0.0.1:1",
            "--cluster",
            "c",
            "--window",
            "7m",
            "--until",
            "now",
            "--lake",
            str(tmp_path),
        ],
    )

    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: window 420 s must divide a day and be 60 s to 1 day (e.g. 600, 3600, 21600)"
    ]


def test_an_unreachable_prometheus_is_one_line_after_the_retries(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}"

    result = CliRunner().invoke(
        command_prometheus,
        ["--url", url, "--cluster", "c", "--since", "2h", "--until", "now", "--retries", "1",
         "--backoff", "0s", "--lake", str(tmp_path)],
    )  # fmt: skip

    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1
    assert (
        f"Prometheus at {url} did not answer the metric-name lookup after 2 attempt(s)" in lines[0]
    )
    assert (
        ": Connection refused (0 window(s) landed this run; the next run resumes from 20"
        in lines[0]
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("10m", 600.0), ("1h", 3600.0), ("1d", 86400.0), ("250ms", 0.25), ("15", 15.0)],
)
def test_durations_read_common_units(text, seconds):
    assert Duration().convert(text, None, None) == seconds


def test_times_read_iso_epoch_and_durations_ago():
    when = When()
    assert when.convert("2026-11-02T08:00", None, None) == dt.datetime(
        2026, 11, 2, 8, tzinfo=dt.UTC
    )
    assert when.convert("@1767225600", None, None) == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    then = when.convert("2h", None, None)
    ago = dt.datetime.now(dt.UTC) - then
    assert dt.timedelta(hours=2) <= ago < dt.timedelta(hours=2, seconds=30)
