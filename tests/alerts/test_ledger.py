"""The ledger's delivery guarantee as a property: whatever fails and whenever the process dies,
every message reaches the receiver, and only a message in flight at a crash is repeated."""

from __future__ import annotations

import datetime as dt
import os
import stat
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.alerts.deliver import Channels, deliver_due
from app.alerts.errors import DeliveryError
from app.alerts.ledger import LEDGER_FILE, Ledger
from tests.infra.examples import examples
from warehouse import layout

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


@settings(max_examples=examples(30), deadline=None)
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


# ---------------------------------------------------------------- the ledger's modes
# It is state updated in place like the lake's other SQLite files (warehouse.layout): an
# operator's `sudo gpuledger alert` must leave it writable by the service. The two-user run is
# in tests/deploy/test_lake_permissions.py.


def mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.lstat().st_mode))


@pytest.fixture(params=[0o000, 0o077], ids=["umask-000", "umask-077"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_the_ledger_and_its_wal_files_are_group_writable_whatever_the_umask(tmp_path, umask):
    path = layout.state_dir(tmp_path / "lake") / LEDGER_FILE
    ledger = Ledger.open(path)
    ledger.add_message(
        key="k1",
        notice_id=None,
        kind="notice",
        role="owner",
        channel="slack",
        recipient="U1",
        payload={},
        now=NOW,
    )
    made = sorted(p for p in path.parent.iterdir() if p.name.startswith(LEDGER_FILE))
    modes = {p.name: mode(p) for p in made}
    journal = ledger.con.execute("PRAGMA journal_mode").fetchone()[0]
    synchronous = ledger.con.execute("PRAGMA synchronous").fetchone()[0]
    ledger.close()
    assert modes == {LEDGER_FILE + suffix: "0o660" for suffix in ("", "-shm", "-wal")}
    assert (journal, synchronous) == ("wal", 2)  # 2: FULL


def test_an_owner_only_ledger_of_this_user_is_opened_to_the_group(tmp_path):
    """A ledger an earlier version made 0600: its owner's next run makes it the group's."""
    path = layout.state_dir(tmp_path / "lake") / LEDGER_FILE
    Ledger.open(path).close()
    os.chmod(path, 0o600)
    Ledger.open(path).close()
    assert mode(path) == "0o660"


@pytest.mark.parametrize("damage", ["empty", "cut short", "overwritten"])
def test_a_damaged_or_emptied_ledger_is_one_error_naming_it_never_a_new_ledger(tmp_path, damage):
    # The probe: a ledger emptied (0 bytes) was taken for a new one, and the next run sent all
    # 21 open findings again; one cut short or overwritten was a traceback (open, --status)
    from warehouse.errors import DamagedFile

    path = layout.state_dir(tmp_path / "lake") / LEDGER_FILE
    ledger = Ledger.open(path)
    for i in range(200):
        ledger.add_message(
            key=f"k{i}",
            notice_id=None,
            kind="notice",
            role="owner",
            channel="slack",
            recipient="U1",
            payload={"text": "x" * 200},
            now=NOW,
        )
    ledger.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    ledger.close()
    data = path.read_bytes()
    damaged = {
        "empty": b"",
        "cut short": data[:150],
        "overwritten": data[:4096] + b"\xff" * 8192 + data[4096 + 8192 :],
    }[damage]
    path.write_bytes(damaged)

    for read in (Ledger.open, Ledger.snapshot):
        with pytest.raises(DamagedFile, match="alert ledger|SQLite state") as info:
            read(path).con.execute("SELECT count(*) FROM messages").fetchall()
        assert str(path) in str(info.value)
    assert path.read_bytes() == damaged  # left as it was
