"""`gpuledger alert` at the command line: dry run, secrets, exit codes, --follow."""

from __future__ import annotations

import fcntl
import logging
import threading
import time

import pytest
from click.testing import CliRunner

from app.alerts.runner import Seams, follow
from app.cli import cli
from warehouse.lake import Lake

from .conftest import SLACK_TOKEN, SMTP_PASSWORD, SMTP_USER, free_port
from .factories import alerts_config, finding, land, standard_lake

pytestmark = pytest.mark.slow

WEBHOOK_SECRET = "XYZsecret"


def cli_env(tmp_path, smtp_port: int, slack_url: str, webhook_url: str) -> dict[str, str]:
    directory = tmp_path / "directory.toml"
    alerts_config(tmp_path)  # writes the directory file
    return {
        "GPULEDGER_ALERTS_DIRECTORY": str(directory),
        "GPULEDGER_ALERTS_EMAIL_DOMAIN": "example.org",
        "GPULEDGER_ALERTS_ADMIN_EMAILS": "admin@example.org",
        "GPULEDGER_ALERTS_SMTP_HOST": "127.0.0.1",
        "GPULEDGER_ALERTS_SMTP_PORT": str(smtp_port),
        "GPULEDGER_ALERTS_SLACK_TOKEN": SLACK_TOKEN,
        "GPULEDGER_ALERTS_SLACK_API_URL": slack_url,
        "GPULEDGER_ALERTS_SLACK_WEBHOOK_URL": webhook_url,
        # the real clock is used here: send at any hour, any day, findings of any age
        "GPULEDGER_ALERTS_LOOKBACK_HOURS": "1000000",
        "GPULEDGER_ALERTS_QUIET_HOURS": "",
        "GPULEDGER_ALERTS_WORKDAYS": "mon,tue,wed,thu,fri,sat,sun",
    }


def test_dry_run_prints_messages_without_secrets_and_sends_nothing(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    lake = tmp_path / "lake"
    standard_lake(lake)
    env = cli_env(
        tmp_path,
        free_port(),
        f"http://127.0.0.1:{free_port()}/api/",
        f"http://127.0.0.1:{free_port()}/webhook/{WEBHOOK_SECRET}",
    )
    env["GPULEDGER_ALERTS_SMTP_USER"] = SMTP_USER
    env["GPULEDGER_ALERTS_SMTP_PASSWORD"] = SMTP_PASSWORD
    env["GPULEDGER_ALERTS_SMTP_STARTTLS"] = "true"  # a password travels only over TLS
    result = CliRunner().invoke(cli, ["alert", "--dry-run", "--lake", str(lake)], env=env)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "--- email → alice@physics.example.org (notice, owner)" in out
    assert "--- slack → U0ALICE (notice, owner)" in out
    assert "--- webhook → webhook (digest, admin)" in out
    assert "Subject: [gpuledger] Final notice: 4 GPUs idle for 2 h 10 min (della)" in out
    assert "8 message(s) would be sent; nothing was sent or recorded" in out
    for secret in (SMTP_PASSWORD, SLACK_TOKEN, WEBHOOK_SECRET):
        assert secret not in out and secret not in caplog.text
    assert not (lake / "_state" / "alerts.sqlite").exists()


def test_a_real_run_logs_no_secret(tmp_path, caplog, smtp_server, slack_server):
    caplog.set_level(logging.DEBUG)
    lake = tmp_path / "lake"
    standard_lake(lake)
    env = cli_env(tmp_path, smtp_server.port, slack_server.api_url, slack_server.webhook_url)
    result = CliRunner().invoke(cli, ["alert", "--lake", str(lake)], env=env)
    assert result.exit_code == 0, result.output
    assert "3 new notice(s), 8 message(s) delivered" in result.output
    assert caplog.records  # something was logged at DEBUG, and none of it is a secret
    for secret in (SLACK_TOKEN, "XYZsecret"):
        assert secret not in result.output and secret not in caplog.text
    again = CliRunner().invoke(cli, ["alert", "--lake", str(lake)], env=env)
    assert "0 new notice(s), 0 message(s) delivered" in again.output


def test_undeliverable_messages_exit_1_with_one_line(tmp_path, smtp_server, slack_server):
    lake = tmp_path / "lake"
    standard_lake(lake)
    env = cli_env(tmp_path, smtp_server.port, slack_server.api_url, slack_server.webhook_url)
    env["GPULEDGER_ALERTS_SLACK_TOKEN"] = "xoxb-wrong"
    result = CliRunner().invoke(cli, ["alert", "--lake", str(lake)], env=env)
    assert result.exit_code == 1
    last = result.output.strip().splitlines()[-1]
    # a refused token concerns every Slack message: one tried, both wait for a later run
    assert last.startswith("Error: Slack chat.postMessage")
    assert "2 message(s) wait for a later run" in last
    assert "invalid_auth" in last and "xoxb-wrong" not in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--dry-run", "--follow"], 2, "--dry-run runs once"),
        (["--interval", "0"], 2, "--interval"),
        (["--lake", "/nonexistent/lake"], 1, "lake '/nonexistent/lake' does not exist"),
    ],
)
def test_bad_usage(tmp_path, args, code, message):
    result = CliRunner().invoke(cli, ["alert", *args])
    assert result.exit_code == code, result.output
    assert message in result.output


def test_the_config_file_names_the_lake(tmp_path):
    lake = tmp_path / "lake"
    land(lake, "findings", [finding(severity="critical", detector="xid_errors")])
    cfg = tmp_path / "g.toml"
    cfg.write_text(
        f'lake = "{lake}"\n[alerts]\nquiet_hours = ""\nlookback_hours = 1e6\n'
        'admin_emails = ["a@example.org"]\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli, ["alert", "--dry-run", "--config", str(cfg)])
    assert result.exit_code == 0, result.output
    assert "1 finding(s), 1 notice(s)" in result.output


def test_follow_reacts_within_one_interval(tmp_path, smtp_server, slack_server):
    lake = tmp_path / "lake"
    land(lake, "findings", [finding(finding_id="f-old", severity="info")])  # below the floor
    env = cli_env(tmp_path, smtp_server.port, slack_server.api_url, slack_server.webhook_url)
    env.pop("GPULEDGER_ALERTS_SLACK_TOKEN")
    cfg = alerts_config(tmp_path, env)
    stop = threading.Event()
    cycles: list[float] = []
    interval = 0.5
    loop = threading.Thread(
        target=follow,
        args=(Lake.at(lake), cfg, Seams(sleep=time.sleep), interval, stop.is_set),
        kwargs={"on_cycle": lambda r: cycles.append(time.monotonic())},
        daemon=True,
    )
    loop.start()
    try:
        deadline = time.monotonic() + 30
        while not cycles and time.monotonic() < deadline:
            time.sleep(0.05)
        assert smtp_server.received == []
        landed = time.monotonic()
        land(lake, "findings", [finding(severity="critical", finding_id="f-new")], batch="b2")
        while not smtp_server.received and time.monotonic() < deadline:
            time.sleep(0.05)
        reacted = time.monotonic() - landed
    finally:
        stop.set()
        loop.join(timeout=30)
    assert smtp_server.received, "no email within the deadline"
    print(f"--follow reacted {reacted:.2f} s after the finding landed (interval {interval} s)")
    # one interval plus the time of one cycle (a few hundred ms on this shared machine)
    cycle_s = max(b - a for a, b in zip(cycles, cycles[1:], strict=False)) if len(cycles) > 1 else 0
    assert reacted <= interval + cycle_s + 0.5, (reacted, cycle_s)


def test_an_empty_lake_has_nothing_to_say(tmp_path):
    lake = tmp_path / "lake"
    lake.mkdir()
    result = CliRunner().invoke(cli, ["alert", "--lake", str(lake)])
    assert result.exit_code == 0, result.output
    assert "Alerts: 0 finding(s), 0 new notice(s), 0 message(s) delivered" in result.output


def test_two_alerters_on_one_lake_take_turns(tmp_path):
    import fcntl

    from app.alerts.runner import run_cycle
    from app.errors import AppError

    lake = tmp_path / "lake"
    (lake / "_state").mkdir(parents=True)
    with (lake / "_state" / "alerts.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(AppError, match="another `gpuledger alert` is running"):
            run_cycle(Lake.at(lake), alerts_config(tmp_path))


def _one_critical_finding_by_email(tmp_path, smtp_server):
    """A lake with one critical finding, and a configuration that mails it (no Slack)."""
    lake = tmp_path / "lake"
    land(lake, "findings", [finding(severity="critical")])
    env = cli_env(tmp_path, smtp_server.port, "http://127.0.0.1:9/api/", "http://127.0.0.1:9/w")
    env.pop("GPULEDGER_ALERTS_SLACK_TOKEN")
    env.pop("GPULEDGER_ALERTS_SLACK_WEBHOOK_URL")
    return lake, alerts_config(tmp_path, env)


def test_follow_survives_a_findings_read_that_fails_once(tmp_path, smtp_server):
    from app.alerts.errors import FindingsUnavailable
    from app.alerts.runner import _read_findings

    lake, cfg = _one_critical_finding_by_email(tmp_path, smtp_server)
    calls = []

    def flaky(lake_dir, since, now):
        calls.append(since)
        if len(calls) == 1:
            raise FindingsUnavailable("a file was replaced during the read")
        return _read_findings(lake_dir, since, now)

    seams = Seams(sleep=lambda s: None, read_findings=flaky)
    follow(Lake.at(lake), cfg, seams, 0.1, lambda: len(calls) >= 2)
    assert len(calls) == 2 and smtp_server.received  # the second cycle delivered


def test_follow_waits_out_a_one_off_run_holding_the_lock(tmp_path, smtp_server):
    # an operator's `alert --retry-failed` beside the service: the service's cycle that meets
    # the lock tries again at the next one (it exited for good)
    from app.alerts.runner import LOCK_FILE

    lake, cfg = _one_critical_finding_by_email(tmp_path, smtp_server)
    cycles: list[int] = []
    with open(Lake.at(lake).state_dir() / LOCK_FILE, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)

        def release_after_the_first(seconds: float) -> None:
            cycles.append(1)
            fcntl.flock(held, fcntl.LOCK_UN)

        follow(
            Lake.at(lake), cfg, Seams(sleep=release_after_the_first), 0.1, lambda: len(cycles) >= 2
        )
    assert smtp_server.received  # the second cycle delivered


def test_dry_run_after_an_outage_shows_the_backlog(tmp_path):
    lake = tmp_path / "lake"
    standard_lake(lake)
    dead = f"http://127.0.0.1:{free_port()}/api/"
    env = cli_env(tmp_path, free_port(), dead, dead.replace("/api/", "/webhook/x"))
    env.update({"GPULEDGER_ALERTS_MAX_ATTEMPTS": "1", "GPULEDGER_ALERTS_SMTP_TIMEOUT_S": "2"})
    first = CliRunner().invoke(cli, ["alert", "--lake", str(lake)], env=env)
    assert first.exit_code == 0, first.output
    assert "8 waiting to retry" in first.output
    dry = CliRunner().invoke(cli, ["alert", "--dry-run", "--lake", str(lake)], env=env)
    assert "--- 8 earlier message(s) wait in the ledger to be retried" in dry.output
    assert "0 notice(s), 0 message(s) would be sent" in dry.output


def test_status_shows_what_waits_and_why(tmp_path):
    lake = tmp_path / "lake"
    standard_lake(lake)
    none_yet = CliRunner().invoke(cli, ["alert", "--status", "--lake", str(lake)])
    assert "No alert ledger yet" in none_yet.output
    dead = f"http://127.0.0.1:{free_port()}/api/"
    env = cli_env(tmp_path, free_port(), dead, dead.replace("/api/", "/webhook/x"))
    env.update({"GPULEDGER_ALERTS_MAX_ATTEMPTS": "1", "GPULEDGER_ALERTS_SMTP_TIMEOUT_S": "2"})
    CliRunner().invoke(cli, ["alert", "--lake", str(lake)], env=env)
    status = CliRunner().invoke(cli, ["alert", "--status", "--lake", str(lake)], env=env)
    assert status.exit_code == 0, status.output
    assert "Messages: 8 pending" in status.output
    assert "ConnectionRefusedError" in status.output
    assert "/webhook/" not in status.output  # the webhook URL is a credential


def test_a_hardware_finding_with_no_admins_is_flagged(tmp_path):
    lake = tmp_path / "lake"
    standard_lake(lake)
    env = cli_env(tmp_path, free_port(), "http://127.0.0.1:9/api/", "http://127.0.0.1:9/w")
    env["GPULEDGER_ALERTS_ADMIN_EMAILS"] = ""
    result = CliRunner().invoke(cli, ["alert", "--dry-run", "--lake", str(lake)], env=env)
    assert result.exit_code == 0, result.output
    assert "--- nobody to tell: f-xid (xid_errors)" in result.output


def test_a_lake_whose_lock_cannot_be_written_is_one_error(tmp_path, monkeypatch):
    # a read-only lake (mounted so): `alert` ended in a traceback where attribute and detect
    # say "cannot lock …"
    import errno

    from app.alerts import runner
    from warehouse import layout
    from warehouse.errors import NotWritable

    def read_only(path, flags):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(layout, "open_shared_file", read_only)
    with pytest.raises(NotWritable, match="cannot lock .*alerts.lock.*Read-only file system"):
        with runner._lake_lock(tmp_path):
            pass
