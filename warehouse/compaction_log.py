"""What compaction replaced: for a day partition it merged, the listing of the partition's files
(names, sizes, modification times: `layout.files_listing`) just before the merge and just after.

A merge keeps every row, so state derived from the files before holds for the files after: the
per-day pass (warehouse/partitions.py) carries its "built from these files" across, instead of
rebuilding a day whose rows did not change. An entry only ever states that fact:

- it is written under the table's lock, after the merge's renames: a crash before leaves no
  entry, and the pass rebuilds;
- it holds for the exact files after the merge: once a batch lands in the partition again (a
  new file, a compacted file rewritten to evict its rows) the listing differs and it no longer
  applies;
- it holds for the exact files before: state built from other files (a batch landed again
  between the build and the merge) does not match it.

Entries live in `<lake>/_state/compaction.sqlite`, one per partition (a later merge of the same
partition replaces it); the pass removes the ones it read once every day is up to date.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from warehouse import layout

__all__ = ["Merge", "forget", "merges", "record"]

_FILE = "compaction.sqlite"
DayKey = tuple[str, dt.date]  # (cluster folder, day), as warehouse.partitions keys them


@dataclass(frozen=True, slots=True)
class Merge:
    """One partition's file listings before and after a merge (`layout.files_listing`)."""

    before: str
    after: str


def _state(root: Path) -> sqlite3.Connection:
    db = layout.open_state_db(root, _FILE)
    db.execute(
        "CREATE TABLE IF NOT EXISTS merges ("
        " tbl TEXT, cluster TEXT, date TEXT, before BLOB, after TEXT,"
        " PRIMARY KEY (tbl, cluster, date))"
    )
    return db


def record(root: Path, table: str, key: DayKey, merge: Merge) -> None:
    """Record that the files of `table`'s partition `key` listed `merge.before` now list
    `merge.after`, with the same rows. Call it under the table's lock, after the renames."""
    db = _state(root)
    try:
        with db:
            db.execute(
                "INSERT OR REPLACE INTO merges VALUES (?, ?, ?, ?, ?)",
                (
                    table,
                    key[0],
                    key[1].isoformat(),
                    zlib.compress(merge.before.encode()),  # a line a file: thousands, alike
                    merge.after,  # a few files
                ),
            )
    finally:
        db.close()


def merges(root: Path, table: str) -> dict[DayKey, Merge]:
    """The recorded merges of `table`'s partitions (none when nothing was ever compacted)."""
    if not (root / "_state" / _FILE).exists():
        return {}
    db = _state(root)
    try:
        rows = db.execute(
            "SELECT cluster, date, before, after FROM merges WHERE tbl = ?", (table,)
        ).fetchall()
    finally:
        db.close()
    return {
        (cluster, dt.date.fromisoformat(date)): Merge(zlib.decompress(before).decode(), after)
        for cluster, date, before, after in rows
    }


def forget(root: Path, table: str, read: Mapping[DayKey, Merge]) -> None:
    """Remove the entries `read` (as `merges` returned them); one a merge since replaced stays."""
    if not read:
        return
    db = _state(root)
    try:
        with db:
            db.executemany(
                "DELETE FROM merges WHERE tbl = ? AND cluster = ? AND date = ? AND after = ?",
                [(table, key[0], key[1].isoformat(), merge.after) for key, merge in read.items()],
            )
    finally:
        db.close()
