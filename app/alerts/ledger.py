"""The alert ledger, `<lake>/_state/alerts.sqlite`: notices, messages, attempts and actions.

Every message has an idempotency key. Its life: `pending` (planned, committed together with its
notice) → `sending` (committed before the hand-over) → `delivered` (committed after), or back to
`pending` with a later `next_try_ts` on a transient error or one about the whole channel (a
`deferred` attempt when the run gives up on it), or `failed` on a permanent error about this
message, or after `give_up_after_runs` deferrals; `requeue_failed` puts failed ones back. A run
that dies between hand-over and record leaves `sending`: the next run sends it again with the
same key (the receiver dedupes), so nothing delivered is sent twice by us and nothing is lost.
Each statement commits on its own (autocommit), so a crash loses at most the step in progress.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.alerts.findings import fingerprint_end
from app.alerts.plan import Prior, Stage
from warehouse import state_files
from warehouse.errors import DamagedFile
from warehouse.layout import SHARED_FILE_MODE

__all__ = ["LEDGER_FILE", "Ledger", "StoredMessage"]

LEDGER_FILE = state_files.ALERTS.name
_OWNER_ONLY = 0o600  # the mode earlier versions created the ledger with


def _refuse_empty(path: Path) -> None:
    """DamagedFile where the ledger exists and is empty: SQLite would take it for a new ledger,
    and every open finding was alerted again (a ledger is never empty once made: its schema is
    written as it is created)."""
    if path.is_file() and path.stat().st_size == 0:
        raise DamagedFile(
            path,
            "it is empty: cut short, or the first `gpuledger alert` stopped before it wrote "
            "anything. Without it, every open finding is alerted again",
            "alert ledger",
        )


def _check_pages(con: sqlite3.Connection) -> None:
    """sqlite3.DatabaseError where a page of the ledger is damaged (`PRAGMA quick_check`: every
    page read once, milliseconds for a ledger of megabytes): found before a run plans on it,
    not part way through, in a traceback."""
    found = [row[0] for row in con.execute("PRAGMA quick_check").fetchall()]
    if found != ["ok"]:
        raise sqlite3.DatabaseError("; ".join(map(str, found[:3])))


@contextmanager
def _damage_named(path: Path, con: sqlite3.Connection) -> Iterator[None]:
    """A damaged ledger (its pages overwritten or cut short: sqlite3.DatabaseError) raised as
    DamagedFile naming it, `con` closed; a busy or locked one (OperationalError) as it is."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError):
            raise
        con.close()
        raise DamagedFile(path, str(exc), "alert ledger") from exc


def _ts(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat(timespec="milliseconds")


def _of_episode(fingerprint: str, since: dt.datetime | None) -> bool:
    """Whether a notice is about the finding as it was at or after `since`: its recorded end
    (the data's time when it was planned) is not before it. The time the notice was planned
    is the wall clock's, later than the data's: a notice about the last idle episode planned
    after the next one began counted as the next one's (its final notice, and a cancellation
    with no warning)."""
    if since is None:
        return True
    end = fingerprint_end(fingerprint)
    return end is None or end >= since


def _parse(value: str | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromisoformat(value)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as the ledger holds it."""

    key: str
    kind: str
    role: str
    channel: str
    recipient: str
    payload: dict[str, Any]
    state: str
    attempts: int


class Ledger:
    """The SQLite ledger; also the planner's `History`."""

    def __init__(self, con: sqlite3.Connection, path: Path) -> None:
        self.con = con
        self.path = path
        state_files.ensure_schema(con, state_files.ALERTS, path)  # a no-op once opened

    @classmethod
    def open(cls, path: Path) -> Ledger:
        """Open (or create) the ledger file, the lake's shared state: SHARED_FILE_MODE (0660),
        so an operator's `sudo gpuledger alert` leaves it writable by the service, and other
        users get nothing (recipients, message bodies: the lake's folders keep them out too).
        SQLite gives its -wal and -shm files the database's mode and owner.

        A ledger an earlier version made owner-only (0600) is opened to the group when this
        user owns it; one owned by another user stays as it is (chmod would fail)."""
        _refuse_empty(path)
        con = state_files.open_state(path, state_files.ALERTS, 30.0, autocommit=True)
        info = os.stat(path)
        if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == _OWNER_ONLY:
            os.chmod(path, SHARED_FILE_MODE)
        with _damage_named(path, con):
            _check_pages(con)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")  # an acknowledged "delivered" survives a crash
        return cls(con, path)

    @classmethod
    def snapshot(cls, path: Path) -> Ledger:
        """An in-memory copy of the ledger (for --dry-run: plan as usual, write nothing)."""
        con = sqlite3.connect(":memory:", isolation_level=None)
        if path.exists():
            _refuse_empty(path)
            source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                with _damage_named(path, con):
                    source.backup(con)
                    _check_pages(con)
            finally:
                source.close()
        return cls(con, path)

    def close(self) -> None:
        """Close the database."""
        self.con.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction (a notice and all its messages land together or not at all)."""
        self.con.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def forget_before(
        self, cutoff: dt.datetime, live: set[tuple[str, str]], *, dry_run: bool = False
    ) -> tuple[int, int]:
        """Delete the messages settled (delivered or failed) before `cutoff`, with their
        attempts, and the notices before it that no message names any more and whose finding
        (cluster, finding_id) is not in `live`: a notice of a finding still stored is what keeps
        it from being told again. Actions run stay (the record of what was done to a cluster).
        Returns (messages, notices) deleted (with `dry_run`, that would be)."""
        when = _ts(cutoff)
        old_messages = (
            "SELECT key FROM messages WHERE state IN ('delivered', 'failed') AND updated_ts < ?"
        )
        self.con.execute("BEGIN IMMEDIATE")
        try:
            (messages,) = self.con.execute(
                f"SELECT count(*) FROM ({old_messages})", (when,)
            ).fetchone()
            for table in ("attempts", "message_notices"):
                self.con.execute(f"DELETE FROM {table} WHERE key IN ({old_messages})", (when,))
            self.con.execute(f"DELETE FROM messages WHERE key IN ({old_messages})", (when,))
            orphans = [
                (notice_id,)
                for notice_id, cluster, finding_id in self.con.execute(
                    "SELECT id, cluster, finding_id FROM notices AS n WHERE created_ts < ?"
                    " AND NOT EXISTS (SELECT 1 FROM messages AS m WHERE m.notice_id = n.id)"
                    " AND NOT EXISTS (SELECT 1 FROM message_notices AS x WHERE x.notice_id = n.id)",
                    (when,),
                ).fetchall()
                if (cluster, finding_id) not in live
            ]
            self.con.executemany("DELETE FROM notices WHERE id = ?", orphans)
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("ROLLBACK" if dry_run else "COMMIT")  # a dry run counts, then undoes
        return int(messages), len(orphans)

    # ------------------------------------------------------------ History (for the planner)

    def last_notice(
        self, cluster: str, finding_id: str, test_mode: bool, since: dt.datetime | None = None
    ) -> Prior | None:
        """The highest stage reached, and what the latest notice said (fingerprint, severity),
        of the notices about the finding as it was at or after `since` (the data's time: the
        finding's end when each was planned); None where there is none."""
        rows = [
            row
            for row in self.con.execute(
                "SELECT stage, fingerprint, severity, created_ts FROM notices "
                "WHERE cluster = ? AND finding_id = ? AND test_mode = ? ORDER BY id",
                (cluster, finding_id, int(test_mode)),
            )
            if _of_episode(row[1], since)
        ]
        if not rows:
            return None
        _, fingerprint, severity, created_ts = rows[-1]
        created = _parse(created_ts)
        assert created is not None
        return Prior(Stage(max(row[0] for row in rows)), fingerprint, severity, created)

    def last_subject_notice(
        self, subject_key: str, detector: str, test_mode: bool
    ) -> dt.datetime | None:
        row = self.con.execute(
            "SELECT max(created_ts) FROM notices "
            "WHERE subject_key = ? AND detector = ? AND test_mode = ?",
            (subject_key, detector, int(test_mode)),
        ).fetchone()
        return _parse(row[0])

    def final_delivered_at(
        self, cluster: str, finding_id: str, since: dt.datetime | None = None
    ) -> dt.datetime | None:
        # a message tells of its notices through message_notices (with the role of each);
        # messages of earlier versions, of one notice, only through messages.notice_id
        rows = self.con.execute(
            "SELECT m.delivered_ts, n.fingerprint FROM messages m "
            "JOIN message_notices l ON l.key = m.key JOIN notices n ON n.id = l.notice_id "
            "WHERE n.cluster = ?1 AND n.finding_id = ?2 AND n.stage = ?3 AND n.test_mode = 0 "
            "AND l.role = 'owner' AND m.state = 'delivered' "
            "UNION ALL "
            "SELECT m.delivered_ts, n.fingerprint FROM messages m "
            "JOIN notices n ON m.notice_id = n.id "
            "WHERE n.cluster = ?1 AND n.finding_id = ?2 AND n.stage = ?3 AND n.test_mode = 0 "
            "AND m.role = 'owner' AND m.state = 'delivered' "
            "AND NOT EXISTS (SELECT 1 FROM message_notices l WHERE l.key = m.key)",
            (cluster, finding_id, int(Stage.FINAL)),
        ).fetchall()
        delivered = [ts for ts, fingerprint in rows if ts and _of_episode(fingerprint, since)]
        return _parse(min(delivered)) if delivered else None

    def action_taken(self, cluster: str, job_id: str) -> bool:
        row = self.con.execute(
            "SELECT 1 FROM actions WHERE cluster = ? AND job_id = ?", (cluster, job_id)
        ).fetchone()
        return row is not None

    def action_exit(self, cluster: str, job_id: str) -> int | None:
        row = self.con.execute(
            "SELECT returncode FROM actions WHERE cluster = ? AND job_id = ?", (cluster, job_id)
        ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    # ------------------------------------------------------------ writing

    def add_notice(
        self,
        *,
        cluster: str,
        finding_id: str,
        subject_key: str,
        detector: str,
        stage: int,
        fingerprint: str,
        severity: str,
        test_mode: bool,
        now: dt.datetime,
        summary: dict[str, Any] | None = None,
    ) -> int | None:
        """Record a notice; None when the same notice exists already (nothing to do)."""
        cur = self.con.execute(
            "INSERT OR IGNORE INTO notices (cluster, finding_id, subject_key, detector, stage, "
            "fingerprint, severity, test_mode, created_ts, summary) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                cluster,
                finding_id,
                subject_key,
                detector,
                stage,
                fingerprint,
                severity,
                int(test_mode),
                _ts(now),
                json.dumps(summary or {}, sort_keys=True),
            ),
        )
        return cur.lastrowid if cur.rowcount == 1 else None

    def undigested(self) -> list[tuple[int, dict[str, Any]]]:
        """Notices no digest has listed yet: (id, digest line)."""
        rows = self.con.execute(
            "SELECT id, summary FROM notices WHERE digest_key IS NULL ORDER BY id"
        ).fetchall()
        return [(int(i), json.loads(summary)) for i, summary in rows]

    def last_digest_ts(self) -> dt.datetime | None:
        """When the latest digest was queued."""
        row = self.con.execute("SELECT max(created_ts) FROM messages WHERE kind = 'digest'")
        return _parse(row.fetchone()[0])

    def mark_digested(self, ids: list[int], digest_key: str) -> None:
        """Record that the digest `digest_key` lists the notices `ids`."""
        self.con.executemany(
            "UPDATE notices SET digest_key = ? WHERE id = ?", [(digest_key, i) for i in ids]
        )

    def add_message(
        self,
        *,
        key: str,
        notice_id: int | None,
        kind: str,
        role: str,
        channel: str,
        recipient: str,
        payload: dict[str, Any],
        now: dt.datetime,
    ) -> bool:
        """Queue a message as `pending`; False when its key is known already."""
        cur = self.con.execute(
            "INSERT OR IGNORE INTO messages (key, notice_id, kind, role, channel, recipient, "
            "payload, state, next_try_ts, created_ts, updated_ts) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
            (
                key,
                notice_id,
                kind,
                role,
                channel,
                recipient,
                json.dumps(payload, sort_keys=True),
                _ts(now),
                _ts(now),
                _ts(now),
            ),
        )
        return cur.rowcount == 1

    def link_notices(self, key: str, notices: list[tuple[int, str]]) -> None:
        """Record that the message `key` tells of these notices: (notice id, role)."""
        self.con.executemany(
            "INSERT OR IGNORE INTO message_notices (key, notice_id, role) VALUES (?, ?, ?)",
            [(key, i, role) for i, role in notices],
        )

    def messages_to(self, channel: str, recipient: str, since: dt.datetime) -> int:
        """How many notice messages were queued to `recipient` on `channel` since `since`
        (for the per-recipient daily cap; admins' digests do not count)."""
        row = self.con.execute(
            "SELECT count(*) FROM messages WHERE channel = ? AND recipient = ? "
            "AND kind = 'notice' AND created_ts >= ?",
            (channel, recipient, _ts(since)),
        ).fetchone()
        return int(row[0])

    def due(self, now: dt.datetime) -> list[StoredMessage]:
        """Messages to send now: `sending` ones first (a run died mid-send), then `pending`."""
        rows = self.con.execute(
            "SELECT key, kind, role, channel, recipient, payload, state, attempts FROM messages "
            "WHERE state IN ('sending', 'pending') AND next_try_ts <= ? "
            "ORDER BY state = 'pending', created_ts, key",
            (_ts(now),),
        ).fetchall()
        return [
            StoredMessage(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7]) for r in rows
        ]

    def mark_sending(self, key: str, now: dt.datetime) -> None:
        """Committed before the hand-over."""
        with self.transaction():
            self.con.execute(
                "UPDATE messages SET state = 'sending', attempts = attempts + 1, updated_ts = ? "
                "WHERE key = ?",
                (_ts(now), key),
            )
            self._attempt(key, now, "sending", None)

    def mark_delivered(self, key: str, now: dt.datetime) -> None:
        """Committed after the hand-over."""
        with self.transaction():
            self.con.execute(
                "UPDATE messages SET state = 'delivered', delivered_ts = ?, updated_ts = ?, "
                "last_error = NULL WHERE key = ?",
                (_ts(now), _ts(now), key),
            )
            self._attempt(key, now, "delivered", None)

    def mark_retry(self, key: str, now: dt.datetime, next_try: dt.datetime, error: str) -> None:
        """A transient failure: back to pending, not before `next_try`."""
        with self.transaction():
            self.con.execute(
                "UPDATE messages SET state = 'pending', next_try_ts = ?, updated_ts = ?, "
                "last_error = ? WHERE key = ?",
                (_ts(next_try), _ts(now), error, key),
            )
            self._attempt(key, now, "retry", error)

    def mark_deferred(self, key: str, now: dt.datetime, next_try: dt.datetime, error: str) -> None:
        """This run gives up on the message: back to pending, for a run after `next_try`."""
        with self.transaction():
            self.con.execute(
                "UPDATE messages SET state = 'pending', next_try_ts = ?, updated_ts = ?, "
                "last_error = ? WHERE key = ?",
                (_ts(next_try), _ts(now), error, key),
            )
            self._attempt(key, now, "deferred", error)

    def postpone_channel(self, channel: str, until: dt.datetime) -> None:
        """The channel is down or refusing: its other pending messages wait until `until` too
        (not counted as attempts: they were not tried)."""
        self.con.execute(
            "UPDATE messages SET next_try_ts = ? "
            "WHERE channel = ? AND state = 'pending' AND next_try_ts < ?",
            (_ts(until), channel, _ts(until)),
        )

    def deferrals(self, key: str) -> int:
        """Runs that gave up on the message since it was queued or last requeued."""
        row = self.con.execute(
            "SELECT count(*) FROM attempts WHERE key = ? AND outcome = 'deferred' AND id > "
            "coalesce((SELECT max(id) FROM attempts WHERE key = ? AND outcome = 'requeued'), 0)",
            (key, key),
        ).fetchone()
        return int(row[0])

    def requeue_failed(self, now: dt.datetime) -> int:
        """Put every `failed` message back to `pending`, due now; returns how many."""
        with self.transaction():
            keys = [
                str(r[0])
                for r in self.con.execute("SELECT key FROM messages WHERE state = 'failed'")
            ]
            for key in keys:
                self.con.execute(
                    "UPDATE messages SET state = 'pending', next_try_ts = ?, updated_ts = ? "
                    "WHERE key = ?",
                    (_ts(now), _ts(now), key),
                )
                self._attempt(key, now, "requeued", None)
        return len(keys)

    def mark_failed(self, key: str, now: dt.datetime, error: str) -> None:
        """A permanent failure (refused recipient, or given up on): kept, not retried."""
        with self.transaction():
            self.con.execute(
                "UPDATE messages SET state = 'failed', updated_ts = ?, last_error = ? "
                "WHERE key = ?",
                (_ts(now), error, key),
            )
            self._attempt(key, now, "failed", error)

    def _attempt(self, key: str, now: dt.datetime, outcome: str, detail: str | None) -> None:
        self.con.execute(
            "INSERT INTO attempts (key, ts, outcome, detail) VALUES (?, ?, ?, ?)",
            (key, _ts(now), outcome, detail),
        )

    def start_action(
        self, cluster: str, job_id: str, finding_id: str, argv: tuple[str, ...], now: dt.datetime
    ) -> bool:
        """Record the action before running it (the audit record); False if it ran before."""
        cur = self.con.execute(
            "INSERT OR IGNORE INTO actions (cluster, job_id, finding_id, argv, started_ts) "
            "VALUES (?, ?, ?, ?, ?)",
            (cluster, job_id, finding_id, json.dumps(list(argv)), _ts(now)),
        )
        return cur.rowcount == 1

    def finish_action(
        self, cluster: str, job_id: str, returncode: int, output: str, now: dt.datetime
    ) -> None:
        """Record how the action went."""
        self.con.execute(
            "UPDATE actions SET finished_ts = ?, returncode = ?, output = ? "
            "WHERE cluster = ? AND job_id = ?",
            (_ts(now), returncode, output[-4000:], cluster, job_id),
        )

    def counts(self) -> dict[str, int]:
        """Messages by state."""
        rows = self.con.execute("SELECT state, count(*) FROM messages GROUP BY state").fetchall()
        return {str(state): int(n) for state, n in rows}

    def undelivered(self, limit: int = 20) -> list[tuple[str, str, str, str, int, str | None]]:
        """(key, state, channel, recipient, attempts, last error) of messages not delivered."""
        rows = self.con.execute(
            "SELECT key, state, channel, recipient, attempts, last_error FROM messages "
            "WHERE state != 'delivered' ORDER BY updated_ts DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [(r[0], r[1], r[2], r[3], int(r[4]), r[5]) for r in rows]

    def actions(self) -> list[dict[str, Any]]:
        """The action audit records, oldest first."""
        cur = self.con.execute("SELECT * FROM actions ORDER BY id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
