"""The alert ledger's retention: settled messages go after `alert_ledger_days`, with their
attempts; a notice goes only once no message names it and its finding is no longer stored."""

from __future__ import annotations

import datetime as dt

from app.alerts.ledger import Ledger

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
OLD = NOW - dt.timedelta(days=400)


def notice(ledger: Ledger, finding_id: str, when: dt.datetime) -> int:
    made = ledger.add_notice(
        cluster="c",
        finding_id=finding_id,
        subject_key=f"job:{finding_id}",
        detector="idle_job",
        stage=1,
        fingerprint="f",
        severity="warn",
        test_mode=False,
        now=when,
    )
    assert made is not None
    return made


def message(ledger: Ledger, key: str, notice_id: int, when: dt.datetime, state: str) -> None:
    ledger.add_message(
        key=key,
        notice_id=notice_id,
        kind="notice",
        role="owner",
        channel="email",
        recipient="a@example.org",
        payload={"subject": key},
        now=when,
    )
    ledger.mark_sending(key, when)
    if state == "delivered":
        ledger.mark_delivered(key, when)


def counts(ledger: Ledger) -> tuple[int, ...]:
    return tuple(
        ledger.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("notices", "messages", "attempts")
    )


def test_settled_old_messages_and_orphaned_notices_go_and_nothing_else(tmp_path):
    ledger = Ledger.open(tmp_path / "alerts.sqlite")
    gone = notice(ledger, "f-gone", OLD)  # its finding was deleted: the notice can go
    message(ledger, "m-old", gone, OLD, "delivered")
    kept = notice(ledger, "f-stored", OLD)  # its finding is still stored: it must stay
    message(ledger, "m-old-2", kept, OLD, "delivered")
    pending = notice(ledger, "f-pending", OLD)  # never settled: still to deliver
    message(ledger, "m-pending", pending, OLD, "sending")
    recent = notice(ledger, "f-recent", NOW)
    message(ledger, "m-new", recent, NOW, "delivered")
    before = counts(ledger)
    cutoff = NOW - dt.timedelta(days=365)
    live = {("c", "f-stored")}

    assert ledger.forget_before(cutoff, live, dry_run=True) == (2, 1)
    assert counts(ledger) == before  # a dry run counts, then undoes

    assert ledger.forget_before(cutoff, live) == (2, 1)
    left = {k for (k,) in ledger.con.execute("SELECT key FROM messages")}
    assert left == {"m-pending", "m-new"}
    notices = {f for (f,) in ledger.con.execute("SELECT finding_id FROM notices")}
    assert notices == {"f-stored", "f-pending", "f-recent"}
    keys = {k for (k,) in ledger.con.execute("SELECT DISTINCT key FROM attempts")}
    assert keys <= left
    assert ledger.last_notice("c", "f-stored", False) is not None  # so it is not told again
    assert ledger.forget_before(cutoff, live) == (0, 0)
    ledger.close()
