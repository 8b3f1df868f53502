"""The ledger's delivery guarantee as a property: whatever fails and whenever the process dies,
every message reaches the receiver, and only a message in flight at a crash is repeated."""

from __future__ import annotations

import datetime as dt
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from app.alerts.deliver import Channels, deliver_due
from app.alerts.errors import DeliveryError
from app.alerts.ledger import Ledger

from .factories import NOW
from .test_plan import cfg


class Crash(BaseException):
    pass


class ScriptedChannel:
    """Takes messages; each hand-over follows the next step of a script."""

    def __init__(self, script: list[str]) -> None:
        self.script = iter(script)
        self.received: Counter[str] = Counter()
        self.crash_next = False

    def send(self, channel: str, text: str, blocks: list, key: str) -> None:
        step = next(self.script, "ok")
        if step == "transient":
            raise DeliveryError("503 try later")
        if step == "permanent":
            raise DeliveryError("channel_not_found", permanent=True)
        self.received[key] += 1  # handed over
        self.crash_next = step == "crash"


@settings(max_examples=40, deadline=None)
@given(
    script=st.lists(st.sampled_from(["ok", "ok", "transient", "crash", "permanent"]), max_size=40)
)
def test_nothing_lost_nothing_repeated_but_the_message_in_flight(tmp_path_factory, script):
    path = tmp_path_factory.mktemp("ledger") / "alerts.sqlite"
    ledger = Ledger.open(path)
    keys = [f"k{i}" for i in range(6)]
    for key in keys:
        ledger.add_message(
            key=key,
            notice_id=None,
            kind="notice",
            role="owner",
            channel="slack",
            recipient="U1",
            payload={"slack_text": "t", "blocks": []},
            now=NOW,
        )
    channel = ScriptedChannel(script)
    config = cfg(max_attempts="3", retry_base_s="1")
    now = [NOW]

    def after_send(msg) -> None:
        if channel.crash_next:
            channel.crash_next = False
            raise Crash

    crashes = 0
    for _restart in range(60):
        if not ledger.due(now[0] + dt.timedelta(days=1)):
            break
        now[0] += dt.timedelta(hours=1)  # the next run, after any backoff
        ledger.close()
        ledger = Ledger.open(path)  # a restart reopens the file
        try:
            deliver_due(
                ledger,
                Channels(slack=channel),
                config,
                lambda: now[0],
                lambda s: None,
                after_send,
            )
        except Crash:
            crashes += 1
    states = dict(ledger.con.execute("SELECT key, state FROM messages").fetchall())
    failed = {k for k, s in states.items() if s == "failed"}
    assert all(s in ("delivered", "failed") for s in states.values())
    # every message not marked failed reached the receiver; failed ones stay in the ledger
    # (a message resent after a crash may still fail then: the receiver has it anyway)
    assert set(keys) - failed <= set(channel.received) <= set(keys)
    assert failed <= {k for k, _ in ledger.con.execute("SELECT key, 1 FROM messages")}
    assert sum(channel.received.values()) - len(set(channel.received)) <= crashes
    attempts = ledger.con.execute("SELECT count(*) FROM attempts WHERE outcome = 'sending'")
    assert attempts.fetchone()[0] >= len(keys)
    ledger.close()


def test_a_message_that_cannot_be_built_fails_without_blocking_the_queue(tmp_path):
    from app.alerts.smtp import SmtpSender, SmtpSettings

    ledger = Ledger.open(tmp_path / "alerts.sqlite")
    for key, to in (("bad", "a@x\nBcc: evil@x"), ("good", "b@x")):
        ledger.add_message(
            key=key,
            notice_id=None,
            kind="notice",
            role="owner",
            channel="email",
            recipient=to,
            payload={"subject": "s", "text": "t", "html": "<p>t</p>"},
            now=NOW,
        )
    sent = []

    class Recorder(SmtpSender):
        def send(self, message) -> None:
            sent.append(message["To"])

    channels = Channels(email=Recorder(SmtpSettings("127.0.0.1", 1, "g@x")))
    report = deliver_due(ledger, channels, cfg(), lambda: NOW, lambda s: None)
    assert [k for k, _ in report.failed] == ["bad"] and report.delivered == ["good"]
    assert sent == ["b@x"]
    ledger.close()
