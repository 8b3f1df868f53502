"""What a change of one partition's files meant to do, kept until it is done.

Two changes of a raw table's partition take more than one rename, and a process killed between
them (a collector stopped mid-write, the machine losing power) would leave rows twice:

- **merge** (compaction): the merged file is renamed into place, then its source files are
  removed;
- **reland** (a batch landed again): the batch's new file is renamed into place, then its old
  rows are evicted from the compacted files that hold them.

Before the first rename, the writer records the change as a hidden file `.intent-<name>.json` in
the partition's folder (written whole, fsynced, renamed); after the last step it removes it. The
writer finishes any change left recorded before it next changes that partition, and
`gpuledger attribute` and each `gpuledger run` round finish those of every raw table first, so
no mart is built over rows held twice (warehouse/writer.py `recover`). Each file the change
removes is named with its size and modification time, and is only removed if it is unchanged.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from warehouse import layout

__all__ = ["PREFIX", "Intent", "clear", "pending", "record", "stat_of"]

PREFIX = ".intent-"
Stat = tuple[str, int, int]  # a file's name in its folder, size, modification time (ns)


@dataclass(frozen=True, slots=True)
class Intent:
    """A change of one partition's files: `kind` "merge" (the `others` are merged into
    `target`) or "reland" (batch `batch` lands as `target`; its rows leave the `others`)."""

    kind: str
    target: str
    others: tuple[Stat, ...]
    batch: str = ""


def stat_of(path: Path) -> Stat:
    """`path`'s name, size and modification time, as an intent names the files it removes."""
    info = path.stat()
    return (path.name, info.st_size, info.st_mtime_ns)


def record(folder: Path, intent: Intent) -> Path:
    """Write `intent` into `folder` durably (before the change's first rename); return its file."""
    path = folder / f"{PREFIX}{intent.kind}-{intent.target}.json"
    body = json.dumps(
        {
            "kind": intent.kind,
            "target": intent.target,
            "others": [list(s) for s in intent.others],
            "batch": intent.batch,
        }
    ).encode()
    fd, tmp = layout.create_temp(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):  # renamed into place already
            tmp.unlink()
    _sync(folder)
    return path


def pending(folder: Path) -> list[tuple[Path, Intent | None]]:
    """The intents left in `folder`, oldest name first; None for one that does not parse (a
    file cut short is never renamed into place, so only a hand-made one can be)."""
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith(PREFIX))
    except FileNotFoundError:
        return []
    found: list[tuple[Path, Intent | None]] = []
    for name in names:
        path = folder / name
        try:
            raw = json.loads(path.read_bytes())
            intent = Intent(
                kind=str(raw["kind"]),
                target=str(raw["target"]),
                others=tuple((str(n), int(s), int(m)) for n, s, m in raw["others"]),
                batch=str(raw.get("batch", "")),
            )
        except FileNotFoundError:
            continue  # finished and removed meanwhile
        except (ValueError, KeyError, TypeError):
            found.append((path, None))
            continue
        found.append((path, intent))
    return found


def clear(path: Path) -> None:
    """Remove an intent whose change is complete."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    _sync(path.parent)


def _sync(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
