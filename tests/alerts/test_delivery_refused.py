"""SMTP 5xx against a real aiosmtpd server: a channel that refuses every message (a broken
relay, a maildir that is not there) stops after two messages and is tried again by later runs;
a message refused alone (too large) waits on its own while the rest go out; a refused recipient
fails at once; `--retry-failed` requeues what failed."""

from __future__ import annotations

import datetime as dt

import pytest
from click.testing import CliRunner

from app.alerts.runner import Seams, run_cycle
from app.cli import cli
from warehouse.lake import Lake

from .factories import NOW, alerts_config, standard_lake
from .test_delivery import EXPECTED_EMAILS, FakeClock, ledger_rows, server_env

pytestmark = pytest.mark.slow

RELAY_DENIED = "554 5.7.1 Relay access denied"


def email_attempts(lake) -> list[tuple[str, str]]:
    return ledger_rows(
        lake,
        "SELECT a.key, a.outcome FROM attempts a JOIN messages m ON a.key = m.key "
        "WHERE m.channel = 'email' ORDER BY a.id",
    )


def test_a_relay_refusing_every_message_stops_email_after_one_and_a_later_run_sends_all(
    tmp_path, smtp_server, slack_server
):
    lake = tmp_path / "lake"
    standard_lake(lake)
    cfg = alerts_config(tmp_path, server_env(smtp_server, slack_server))
    smtp_server.handler.reject_data = RELAY_DENIED
    clock = FakeClock(NOW)
    first = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))

    # two emails met the 554 once (the second tells it is the relay, not the first message),
    # not once per queued email, and nothing is failed for good
    assert [o for _, o in email_attempts(lake)] == ["sending", "deferred"] * 2
    assert clock.sleeps == []  # a 5xx is not retried within the run
    assert first.delivery.failed == [] and len(first.delivery.refused) == 2
    assert "554" in first.delivery.refused[0][1]
    assert len(first.delivery.retrying) == 5 and len(first.delivery.delivered) == 3
    assert ledger_rows(lake, "SELECT count(*) FROM messages WHERE state = 'failed'") == [(0,)]

    smtp_server.handler.reject_data = None  # the operator fixes the relay
    clock.now += dt.timedelta(seconds=cfg.retry_later_s)
    second = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    assert second.notices == [] and len(second.delivery.delivered) == 5
    assert sorted(r.rcpt_tos[0] for r in smtp_server.received) == EXPECTED_EMAILS
    assert ledger_rows(lake, "SELECT state, count(*) FROM messages GROUP BY state") == [
        ("delivered", 8)
    ]


def test_a_message_refused_run_after_run_waits_longer_each_time_then_fails(
    tmp_path, smtp_server, slack_server
):
    lake = tmp_path / "lake"
    standard_lake(lake)
    env = server_env(smtp_server, slack_server)
    env |= {"GPULEDGER_ALERTS_GIVE_UP_AFTER_RUNS": "3", "GPULEDGER_ALERTS_RETRY_LATER_S": "600"}
    cfg = alerts_config(tmp_path, env)
    smtp_server.handler.reject_data = RELAY_DENIED
    clock = FakeClock(NOW)
    run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    probes = list(dict.fromkeys(k for k, _ in email_attempts(lake)))
    assert len(probes) == 2

    def next_try(key: str) -> dt.datetime:
        ((ts,),) = ledger_rows(lake, f"SELECT next_try_ts FROM messages WHERE key = '{key}'")
        return dt.datetime.fromisoformat(ts)

    assert [next_try(k) for k in probes] == [clock.now + dt.timedelta(seconds=600)] * 2
    clock.now += dt.timedelta(seconds=599)
    run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    assert len(email_attempts(lake)) == 4  # not due yet: nothing was tried

    clock.now += dt.timedelta(seconds=1)
    run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    # the same two probe the channel again, and the wait doubled
    assert [next_try(k) for k in probes] == [clock.now + dt.timedelta(seconds=1200)] * 2
    clock.now += dt.timedelta(seconds=1200)
    third = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))

    for key in probes:
        assert [o for k, o in email_attempts(lake) if k == key] == ["sending", "deferred"] * 2 + [
            "sending",
            "failed",
        ]
    assert [k for k, _ in third.delivery.failed] == probes
    states = dict(ledger_rows(lake, "SELECT state, count(*) FROM messages GROUP BY state"))
    assert states == {"delivered": 3, "failed": 2, "pending": 3}


def test_a_message_refused_alone_waits_on_its_own_while_the_others_go_out(
    tmp_path, smtp_server, slack_server
):
    lake = tmp_path / "lake"
    standard_lake(lake)
    cfg = alerts_config(tmp_path, server_env(smtp_server, slack_server))
    smtp_server.handler.too_big_for = {"bob@example.org"}
    clock = FakeClock(NOW)
    report = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))

    assert len(report.delivery.refused) == 1 and "552" in report.delivery.refused[0][1]
    assert report.delivery.failed == []
    others = [e for e in EXPECTED_EMAILS if e != "bob@example.org"]
    assert sorted(r.rcpt_tos[0] for r in smtp_server.received) == others
    states = dict(ledger_rows(lake, "SELECT state, count(*) FROM messages GROUP BY state"))
    assert states == {"delivered": 7, "pending": 1}


def test_a_refused_recipient_fails_at_once_and_retry_failed_sends_it_again(
    tmp_path, smtp_server, slack_server, monkeypatch
):
    lake = tmp_path / "lake"
    standard_lake(lake)
    env = server_env(smtp_server, slack_server)
    cfg = alerts_config(tmp_path, env)
    smtp_server.handler.refuse_rcpt = {"bob@example.org"}
    clock = FakeClock(NOW)
    report = run_cycle(Lake.at(lake), cfg, Seams(clock=clock, sleep=clock.sleep))
    # a 550 for one recipient concerns that message only: the other emails went out
    assert len(report.delivery.failed) == 1 and "550" in report.delivery.failed[0][1]
    assert len(report.delivery.delivered) == 7 and report.delivery.refused == []
    assert smtp_server.handler.rcpt_seen.count("bob@example.org") == 1

    smtp_server.handler.refuse_rcpt = set()  # bob's mailbox is created
    monkeypatch.setenv("GPULEDGER_ALERTS_DIRECTORY", str(cfg.directory))
    monkeypatch.setenv("GPULEDGER_ALERTS_SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("GPULEDGER_ALERTS_EMAIL_DOMAIN", "example.org")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli, ["alert", "--retry-failed", "--lake", str(lake)])
    assert result.exit_code == 0, result.output
    assert "Requeued 1 failed message(s)." in result.output
    assert sorted(r.rcpt_tos[0] for r in smtp_server.received) == EXPECTED_EMAILS
    assert ledger_rows(lake, "SELECT state, count(*) FROM messages GROUP BY state") == [
        ("delivered", 8)
    ]
