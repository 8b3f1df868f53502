"""End to end against real local servers: aiosmtpd for email, an HTTP server for Slack."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.alerts.runner import Seams, run_cycle
from warehouse.lake import Lake

from .conftest import SLACK_TOKEN, SMTP_PASSWORD, SmtpServer
from .factories import NOW, alerts_config, finding, land, standard_lake

pytestmark = pytest.mark.slow

EXPECTED_EMAILS = sorted(
    [
        "alice@physics.example.org",  # f-idle owner (final notice)
        "carol@example.org",  # f-idle manager (directory entry without email: default)
        "pi@example.org",  # f-idle manager (bare address)
        "bob@example.org",  # f-over owner (no directory entry)
        "admin@example.org",  # the digest, carrying f-xid (hardware, critical): one email
    ]
)


class FakeClock:
    """A clock that only moves when the code under test sleeps (or the test says so)."""

    def __init__(self, now: dt.datetime) -> None:
        self.now = now
        self.sleeps: list[float] = []
        self.on_sleep = lambda: None

    def __call__(self) -> dt.datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += dt.timedelta(seconds=seconds)
        self.on_sleep()


def server_env(smtp: SmtpServer, slack) -> dict[str, str]:
    return {
        "GPULEDGER_ALERTS_EMAIL_REPLY_TO": "hpc-help@example.org",
        "GPULEDGER_ALERTS_SMTP_PORT": str(smtp.port),
        "GPULEDGER_ALERTS_SLACK_TOKEN": SLACK_TOKEN,
        "GPULEDGER_ALERTS_SLACK_API_URL": slack.api_url,
        "GPULEDGER_ALERTS_SLACK_WEBHOOK_URL": slack.webhook_url,
    }


def ledger_rows(lake: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(lake / "_state" / "alerts.sqlite")
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_findings_become_routed_messages_and_a_second_run_sends_nothing(
    tmp_path, smtp_server, slack_server
):
    lake = tmp_path / "lake"
    standard_lake(lake)
    cfg = alerts_config(tmp_path, server_env(smtp_server, slack_server))
    clock = FakeClock(NOW)
    report = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))

    assert len(report.delivery.delivered) == 8 and not report.delivery.retrying
    assert sorted(r.rcpt_tos[0] for r in smtp_server.received) == EXPECTED_EMAILS
    alice = next(r for r in smtp_server.received if r.rcpt_tos == ["alice@physics.example.org"])
    assert alice.message["Subject"] == (
        "[gpuledger] Final notice: 4 GPUs idle for 2 h 10 min (della)"
    )
    assert alice.message["From"] == "gpuledger@example.org"
    assert alice.message["Reply-To"] == "hpc-help@example.org"
    text, html = alice.part("plain"), alice.part("html")
    assert "Hello Alice," in text
    assert "Wasted:     8.7 GPU-hours so far" in text
    assert "Rank:       #2 of 2 users by GPU-hours at stake on della" in text  # bob has 20 h
    assert "Activity:   busy 0.2 % · GPU_UTIL 0.0 % · SM active 0.1 % · 4 of 4 GPUs" in text
    assert "`scancel 4242`" in text and "FINAL NOTICE" not in text  # action is off
    assert "<strong>What to do:</strong>" in html and "train-llm" in html
    bob = next(r for r in smtp_server.received if r.rcpt_tos == ["bob@example.org"])
    assert "`--gres=gpu:2`" in bob.part("plain")
    assert "Rank:       #1 of 2 users" in bob.part("plain")
    # Slack: DMs to the owner and the manager who have Slack IDs, the digest by webhook
    assert sorted(p["channel"] for p in slack_server.state.posts) == ["U0ALICE", "U0CAROL"]
    dm = next(p for p in slack_server.state.posts if p["channel"] == "U0ALICE")
    assert dm["blocks"][0]["text"]["text"] == "Final notice: job 4242"
    assert dm["metadata"]["event_type"] == "gpuledger_alert"
    [digest] = slack_server.state.webhooks
    assert "gpuledger digest: 3 alerts" in digest["blocks"][0]["text"]["text"]
    assert "For you" not in json.dumps(digest)  # the webhook's channel is no admin's own
    # the admin's one email: their own alert (the XID) first, then the digest of all three
    admin = next(r for r in smtp_server.received if r.rcpt_tos == ["admin@example.org"])
    assert admin.message["Subject"].startswith("[gpuledger] Digest: 3 alerts")
    text = admin.part("plain")
    assert text.index("For you:") < text.index("gpuledger digest,")
    assert "XID" in text[: text.index("gpuledger digest,")]
    assert "For you:" in admin.part("html")
    # and the ledger knows that the digest told the admin of the XID notice, as admin
    links = ledger_rows(
        lake,
        "SELECT n.finding_id, l.role, m.kind FROM message_notices l "
        "JOIN messages m ON m.key = l.key JOIN notices n ON n.id = l.notice_id "
        "WHERE m.recipient = 'admin@example.org'",
    )
    assert links == [("f-xid", "admin", "digest")]
    assert slack_server.state.bad_auth == 0 and slack_server.state.errors == []

    requests, emails = slack_server.state.requests, len(smtp_server.received)
    again = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    assert again.notices == [] and again.delivery.delivered == []
    assert slack_server.state.requests == requests and len(smtp_server.received) == emails
    assert smtp_server.handler.duplicates == 0 and slack_server.state.duplicates == 0


def test_slack_429_and_500_are_retried_after_retry_after_and_backoff(
    tmp_path, smtp_server, slack_server
):
    lake = tmp_path / "lake"
    standard_lake(lake)
    cfg = alerts_config(tmp_path, server_env(smtp_server, slack_server))
    slack_server.state.failures = [(429, {"Retry-After": "3"}), (500, {})]
    clock = FakeClock(NOW)
    report = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    assert clock.sleeps == [3.0, 1.0]  # Retry-After, then retry_base_s (0.5) doubled once
    assert len(report.delivery.delivered) == 8
    assert len(slack_server.state.posts) == 2 and len(slack_server.state.webhooks) == 1
    outcomes = ledger_rows(lake, "SELECT outcome, detail FROM attempts WHERE outcome = 'retry'")
    assert [o for o, _ in outcomes] == ["retry", "retry"]
    assert "HTTP 429" in outcomes[0][1] and "HTTP 500" in outcomes[1][1]


@pytest.mark.parametrize(
    "retry_after", ["nan", "1e12", "99999999999", "Wed, 21 Oct 2015 07:28:00 GMT"]
)
def test_an_odd_retry_after_waits_at_most_a_day(tmp_path, smtp_server, slack_server, retry_after):
    # a Retry-After that is no number of seconds (NaN, an HTTP date) is the run's own backoff;
    # a huge one waits for a later run, at most 24 h away (NaN and 1e12 were tracebacks at every
    # run; 99999999999 s put the channel's next try in the year 5195)
    lake = tmp_path / "lake"
    standard_lake(lake)
    cfg = alerts_config(tmp_path, server_env(smtp_server, slack_server))
    slack_server.state.failures = [(429, {"Retry-After": retry_after})] * 20
    clock = FakeClock(NOW)

    report = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))

    assert report.delivery.retrying  # Slack's messages wait; email went out
    assert smtp_server.received
    # those tried wait; the channel down, the rest were not tried this run (the service's
    # failed-deliveries counter added them all again at every round)
    d = report.delivery
    assert d.untried and set(d.untried) < set(d.retrying)
    [(latest,)] = ledger_rows(lake, "SELECT max(next_try_ts) FROM messages")
    assert dt.datetime.fromisoformat(str(latest)) <= NOW + dt.timedelta(hours=24)


def test_a_relay_slower_than_the_connect_timeout_gets_each_message_once(
    tmp_path, smtp_server, slack_server
):
    # the relay takes 1.5 s to store a message, smtp_timeout_s is 1: each message was sent again
    # at once, five times a run (the answer to a message's end may take 10 minutes: RFC 5321)
    lake = tmp_path / "lake"
    land(lake, "findings", [finding(severity="critical")])
    env = server_env(smtp_server, slack_server) | {"GPULEDGER_ALERTS_SMTP_TIMEOUT_S": "1"}
    cfg = alerts_config(tmp_path, env)
    smtp_server.handler.store_s = 1.5
    clock = FakeClock(NOW)

    report = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))

    assert smtp_server.received and smtp_server.handler.duplicates == 0
    assert not report.delivery.retrying and not report.delivery.failed


def test_smtp_down_for_a_while_then_everything_is_delivered(tmp_path, smtp_server, slack_server):
    lake = tmp_path / "lake"
    standard_lake(lake)
    cfg = alerts_config(tmp_path, server_env(smtp_server, slack_server))
    smtp_server.stop()
    clock = FakeClock(NOW)
    first = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    # one email tried max_attempts (5) times with backoff, the other four wait behind it
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0]
    assert len(first.delivery.retrying) == 5 and len(first.delivery.delivered) == 3
    assert smtp_server.received == []

    smtp_server.start()
    clock.now += dt.timedelta(minutes=5)
    second = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    assert second.notices == []  # nothing new was planned: the queued messages went out
    assert len(second.delivery.delivered) == 5
    assert sorted(r.rcpt_tos[0] for r in smtp_server.received) == EXPECTED_EMAILS
    states = ledger_rows(lake, "SELECT state, count(*) FROM messages GROUP BY state")
    assert states == [("delivered", 8)]


def test_smtp_returning_within_the_run_is_caught_by_the_backoff(
    tmp_path, smtp_server, slack_server
):
    lake = tmp_path / "lake"
    standard_lake(lake)
    cfg = alerts_config(tmp_path, server_env(smtp_server, slack_server))
    smtp_server.stop()
    clock = FakeClock(NOW)
    clock.on_sleep = lambda: smtp_server.controller is None and smtp_server.start()
    report = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    assert clock.sleeps == [0.5]
    assert len(report.delivery.delivered) == 8
    assert sorted(r.rcpt_tos[0] for r in smtp_server.received) == EXPECTED_EMAILS


class Crash(BaseException):
    """Stands for the process dying between the hand-over and the ledger's record."""


def test_crash_between_send_and_record_repeats_only_the_message_in_flight(
    tmp_path, smtp_server, slack_server
):
    lake = tmp_path / "lake"
    standard_lake(lake)
    cfg = alerts_config(tmp_path, server_env(smtp_server, slack_server))
    clock = FakeClock(NOW)
    sent: list[str] = []

    def crash_on_fourth(msg) -> None:
        sent.append(msg.key)
        if len(sent) == 4:
            raise Crash

    with pytest.raises(Crash):
        run_cycle(
            Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep, after_send=crash_on_fourth)
        )
    in_flight = ledger_rows(lake, "SELECT key FROM messages WHERE state = 'sending'")
    assert in_flight == [(sent[3],)]
    report = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    assert report.delivery.delivered[0] == sent[3]  # the in-flight one goes first, same key
    assert len(report.delivery.delivered) == 5
    assert sorted(r.rcpt_tos[0] for r in smtp_server.received) == EXPECTED_EMAILS
    assert len(slack_server.state.posts) == 2 and len(slack_server.state.webhooks) == 1
    repeats = smtp_server.handler.duplicates + slack_server.state.duplicates
    assert repeats == 1  # exactly the one in flight, dropped by the receiver by its key


CHILD = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from app.alerts.runner import Seams, run_cycle
from app.alerts.settings import AlertsConfig
from app.config import load_config
from factories import NOW
from warehouse.lake import Lake

handed_over = []

def die_after_second(msg):
    handed_over.append(msg.key)
    Path({log!r}).write_text("\\n".join(handed_over))
    if len(handed_over) == 2:
        os.kill(os.getpid(), signal.SIGKILL)

cfg = load_config().section(AlertsConfig)
run_cycle(Lake.at({lake!r}), cfg, Seams(clock=lambda: NOW, after_send=die_after_second))
"""


def test_sigkill_mid_run_loses_nothing_and_repeats_at_most_one(tmp_path, smtp_server, slack_server):
    lake = tmp_path / "lake"
    standard_lake(lake)
    env_cfg = server_env(smtp_server, slack_server)
    cfg = alerts_config(tmp_path, env_cfg)
    log = tmp_path / "handed_over.txt"
    script = tmp_path / "child.py"
    tests = str(Path(__file__).parent)
    script.write_text(
        textwrap.dedent(CHILD.format(tests=tests, log=str(log), lake=str(lake))), encoding="utf-8"
    )
    env = dict(os.environ)
    env.update(env_cfg)
    env.update(
        {
            "GPULEDGER_ALERTS_DIRECTORY": str(cfg.directory),
            "GPULEDGER_ALERTS_EMAIL_DOMAIN": "example.org",
            "GPULEDGER_ALERTS_EMAIL_FROM": "gpuledger@example.org",
            "GPULEDGER_ALERTS_ADMIN_EMAILS": "admin@example.org",
            "GPULEDGER_ALERTS_SMTP_HOST": "127.0.0.1",
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        }
    )
    child = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    killed_in_flight = log.read_text().splitlines()[1]
    assert ledger_rows(lake, "SELECT key FROM messages WHERE state = 'sending'") == [
        (killed_in_flight,)
    ]
    report = run_cycle(Lake.at(lake), cfg, Seams(clock=lambda: NOW))
    assert len(report.delivery.delivered) == 7  # 8 minus the one recorded before the kill
    assert sorted(r.rcpt_tos[0] for r in smtp_server.received) == EXPECTED_EMAILS
    assert len(slack_server.state.posts) == 2 and len(slack_server.state.webhooks) == 1
    assert smtp_server.handler.duplicates + slack_server.state.duplicates == 1


def test_a_changed_finding_is_sent_again_after_the_period(tmp_path, smtp_server, slack_server):
    lake = tmp_path / "lake"
    land(lake, "findings", [finding(finding_id="f-over", detector="overallocated")])
    cfg = alerts_config(tmp_path, server_env(smtp_server, slack_server))
    clock = FakeClock(NOW)
    run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))

    def owner_mails():
        return [r for r in smtp_server.received if r.rcpt_tos == ["alice@physics.example.org"]]

    assert len(owner_mails()) == 1
    # the detector lands the same finding grown: within the period it waits…
    land(
        lake,
        "findings",
        [
            finding(
                finding_id="f-over", detector="overallocated", gpu_h_at_stake=30.0, detected_ts=NOW
            )
        ],
        batch="b2",
    )
    clock.now += dt.timedelta(hours=2)
    waiting = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    assert waiting.notices == [] and "notified less than 24 h ago" in waiting.waiting[0][1]
    # …and goes out once the period has passed (a Thursday, 12:00: a workday)
    clock.now += dt.timedelta(hours=24)
    later = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    assert len(later.notices) == 1
    assert len(owner_mails()) == 2 and "30.0 GPU-hours" in owner_mails()[1].part("plain")


def test_the_admin_digest_batches_notices_per_period(tmp_path, smtp_server, slack_server):
    lake = tmp_path / "lake"
    standard_lake(lake)
    cfg = alerts_config(tmp_path, server_env(smtp_server, slack_server))
    clock = FakeClock(NOW)
    run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    assert len(slack_server.state.webhooks) == 1
    new = finding(
        finding_id="f-node",
        detector="thermal",
        severity="critical",
        subject_kind="node",
        subject_id="g009",
        job_id=None,
        user=None,
        node="g009",
        message="g009 throttles (thermal)",
        detected_ts=NOW + 10 * dt.timedelta(minutes=1),
    )
    land(lake, "findings", [new], batch="b2")
    clock.now = NOW + dt.timedelta(minutes=10)
    soon = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    assert [n.finding.finding_id for n in soon.notices] == ["f-node"]
    assert len(slack_server.state.webhooks) == 1  # the digest waits for its period
    # ... so the admins hear of the node at once, in its own email
    [node] = [r for r in smtp_server.received if "g009" in r.message["Subject"]]
    assert node.rcpt_tos == ["admin@example.org"] and "Digest" not in node.message["Subject"]
    clock.now = NOW + dt.timedelta(minutes=61)
    later = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    assert later.notices == []
    [_, digest] = slack_server.state.webhooks
    assert "gpuledger digest: 1 alert" in digest["blocks"][0]["text"]["text"]
    assert "g009 throttles" in json.dumps(digest["blocks"])
    assert sum(1 for r in smtp_server.received if "Digest" in r.message["Subject"]) == 2


def test_starttls_auth_and_a_password_file_from_the_configuration(
    tmp_path, smtp_tls_server, tls_dir, caplog
):
    import logging

    from .conftest import SMTP_USER

    caplog.set_level(logging.DEBUG)
    lake = tmp_path / "lake"
    standard_lake(lake)
    secret = tmp_path / "smtp-password"
    secret.write_text(SMTP_PASSWORD + "\n", encoding="utf-8")
    os.chmod(secret, 0o600)
    cfg = alerts_config(
        tmp_path,
        {
            "GPULEDGER_ALERTS_SMTP_PORT": str(smtp_tls_server.port),
            "GPULEDGER_ALERTS_SMTP_STARTTLS": "true",
            "GPULEDGER_ALERTS_SMTP_CA_FILE": str(tls_dir / "cert.pem"),
            "GPULEDGER_ALERTS_SMTP_USER": SMTP_USER,
            "GPULEDGER_ALERTS_SMTP_PASSWORD_FILE": str(secret),
        },
    )
    report = run_cycle(Lake.at(lake), cfg, Seams(clock=lambda: NOW))
    assert len(report.delivery.delivered) == 5  # email only: no Slack configured
    assert sorted(r.rcpt_tos[0] for r in smtp_tls_server.received) == EXPECTED_EMAILS
    # one connection (STARTTLS, one login) carries the run's five emails
    assert smtp_tls_server.handler.authenticated == [SMTP_USER]
    assert len(smtp_tls_server.handler.sessions) == 1
    assert SMTP_PASSWORD not in caplog.text


@pytest.mark.live
def test_hostile_user_names_from_the_lake_are_never_mailed(tmp_path, smtp_server):
    """A user name from a pod label (`eve@evil.example.com, …`) reaches no one outside
    alerts.email_domain through the real SMTP server; a plain name is still mailed."""
    lake = tmp_path / "lake"
    hostile = ["eve@evil.example.com", "x, eve@evil.example.com", "x\nBcc: eve@evil.example.com"]
    findings = [
        finding(finding_id=f"f-{i}", subject_id=str(5000 + i), job_id=str(5000 + i), user=u)
        for i, u in enumerate([*hostile, "zed"])
    ]
    land(lake, "findings", findings)
    env = {"GPULEDGER_ALERTS_SMTP_PORT": str(smtp_server.port)}
    cfg = alerts_config(tmp_path, env)
    run_cycle(Lake.at(lake), cfg, Seams(clock=lambda: NOW))
    rcpts = sorted(r for got in smtp_server.received for r in got.rcpt_tos)
    headers = " ".join(str(got.message["To"]) for got in smtp_server.received)
    assert "zed@example.org" in rcpts
    assert all(r.endswith("@example.org") for r in rcpts), rcpts
    assert "evil" not in " ".join(smtp_server.handler.rcpt_seen) and "evil" not in headers
