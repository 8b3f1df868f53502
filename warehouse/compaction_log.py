"""What compaction replaced: for a day partition it merged, the listing of the partition's files
(names, sizes, modification times: `layout.files_listing`) just before the merge and just after.

A merge keeps every row, so state derived from the files before holds for the files after: each
reader of a table's files carries its state across instead of redoing work for rows that did
not change. The readers (`READERS`) and the tables whose entries each one reads:

- `sample_days`, the per-day pass (warehouse/partitions.py): `gpu_samples`;
- `summary`, the summary marts' update (warehouse/summary/): every other raw table (the
  scheduler's batch files, and the digest of the rest).

An entry only ever states that fact:

- it is written under the table's lock, after the merge's renames: a crash before leaves no
  entry, and the reader redoes its work;
- it holds for the exact files after the merge: once a batch lands in the partition again (a
  new file, a compacted file rewritten to evict its rows) the listing differs and it no longer
  applies (`carry` leaves it out of `holds`);
- it holds for the exact files before: state built from other files (a batch landed again
  between the build and the merge) does not match it.

Entries live in `<lake>/_state/compaction.sqlite`, one per reader and partition (a later merge
of the same partition replaces it). Each reader removes the entries it read (`forget`) once its
state is carried or rebuilt, so none waits on another reader and none piles up (a reader that
does not run, the marts built with `--engine spark`, leaves at most one a compacted partition).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from warehouse import layout, state_files
from warehouse.schema import RAW_TABLES

__all__ = ["READERS", "Carry", "Merge", "carry", "forget", "logged", "merges", "record", "stamps"]

_FILE = state_files.COMPACTION.name
DayKey = tuple[str, dt.date]  # (cluster folder, day), as warehouse.partitions keys them

# Each reader of merge entries and the tables whose entries it reads.
READERS: dict[str, tuple[str, ...]] = {
    "sample_days": ("gpu_samples",),
    "summary": tuple(t for t in RAW_TABLES if t != "gpu_samples"),
}


@dataclass(frozen=True, slots=True)
class Merge:
    """One partition's file listings before and after a merge (`layout.files_listing`)."""

    before: str
    after: str


@dataclass(frozen=True, slots=True)
class Carry:
    """A table's files now, as a reader sees them against its unread merge entries.

    `now`: the `layout.files_listing` of the table's files; `holds`: the entries whose partition
    lists exactly the files after the merge now; `before`: `now` with those partitions' lines
    replaced by their listing before the merge (the same rows); `read`: every entry read, to
    `forget` once the reader's state is carried or rebuilt."""

    now: str
    before: str
    holds: dict[DayKey, Merge]
    read: dict[DayKey, Merge]


def _state(root: Path) -> sqlite3.Connection:
    return state_files.open_state(root, state_files.COMPACTION)


def logged(table: str) -> bool:
    """Whether a reader carries state derived from `table` across its merges."""
    return any(table in tables for tables in READERS.values())


def record(root: Path, table: str, key: DayKey, merge: Merge) -> None:
    """Record, for each reader of `table`, that the files of its partition `key` listed
    `merge.before` now list `merge.after`, with the same rows. Call it under the table's lock,
    after the renames."""
    readers = [reader for reader, tables in READERS.items() if table in tables]
    before = zlib.compress(merge.before.encode())  # a line a file: thousands, alike
    db = _state(root)
    try:
        with db:
            db.executemany(
                "INSERT OR REPLACE INTO reader_merges VALUES (?, ?, ?, ?, ?, ?)",
                [(r, table, key[0], key[1].isoformat(), before, merge.after) for r in readers],
            )
    finally:
        db.close()


def merges(root: Path, reader: str, table: str) -> dict[DayKey, Merge]:
    """`reader`'s unread merges of `table`'s partitions (none when nothing was compacted)."""
    if not (root / "_state" / _FILE).exists():
        return {}
    db = _state(root)
    try:
        rows = db.execute(
            "SELECT cluster, date, before, after FROM reader_merges WHERE reader = ? AND tbl = ?",
            (reader, table),
        ).fetchall()
    finally:
        db.close()
    return {
        (cluster, dt.date.fromisoformat(date)): Merge(zlib.decompress(before).decode(), after)
        for cluster, date, before, after in rows
    }


def forget(root: Path, reader: str, table: str, read: Mapping[DayKey, Merge]) -> None:
    """Remove `reader`'s entries `read` (as `merges` returned them); one a merge since replaced
    stays."""
    if not read:
        return
    db = _state(root)
    try:
        with db:
            db.executemany(
                "DELETE FROM reader_merges"
                " WHERE reader = ? AND tbl = ? AND cluster = ? AND date = ? AND after = ?",
                [
                    (reader, table, key[0], key[1].isoformat(), merge.after)
                    for key, merge in read.items()
                ],
            )
    finally:
        db.close()


def carry(root: Path, reader: str, table: str) -> Carry:
    """`reader`'s entries of `table`, then the table's files (listed after the entries are
    read: a merge in between is one the reader sees next time)."""
    read = merges(root, reader, table)
    now = layout.files_listing(layout.table_files(root, table))
    lines = [
        (layout.partition_key(Path(line.rsplit("|", 2)[0])), line)
        for line in now.splitlines(keepends=True)
    ]
    listed: dict[DayKey, list[str]] = {}
    for key, line in lines:
        if key is not None:
            listed.setdefault(key, []).append(line)
    holds = {key: m for key, m in read.items() if "".join(listed.get(key, ())) == m.after}
    parts = []
    for key, line in lines:  # a partition's lines are consecutive (the paths are sorted)
        if key not in holds:
            parts.append(line)
        elif line is listed[key][0]:
            parts.append(holds[key].before)
    before = "".join(parts)
    return Carry(now, before, holds, read)


def stamps(listing: str) -> dict[str, str]:
    """Each file of a `layout.files_listing` -> its size and modification time, "size|mtime"."""
    out = {}
    for line in listing.splitlines():
        path, size, mtime = line.rsplit("|", 2)
        out[path] = f"{size}|{mtime}"
    return out
