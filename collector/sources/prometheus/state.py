"""Where each cluster's Prometheus pull got to: `<lake>/_state/prometheus.sqlite`.

One row per (cluster, source), where the source is the label selector the pull was made with.
`done_until_ms` is the end of the last window that was complete (old enough that no scrape can
still land in it) when it was landed; everything before it is in the lake. A rerun starts
there and re-pulls the windows after it, which replaces what an earlier run landed of them.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from warehouse import layout, state_files

__all__ = ["STATE_FILE", "Checkpoint", "CheckpointStore", "source_key"]

STATE_FILE: Final = state_files.PROMETHEUS.name


def source_key(selector: str) -> str:
    """A short stable name for a label selector (part of checkpoint keys and batch ids).

    The URL is not part of it: the same data read through another Prometheus replica or
    address must replace, not duplicate, what was landed.
    """
    return hashlib.sha1(selector.strip().encode()).hexdigest()[:10]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """How far one cluster's pull with one selector has landed complete windows."""

    cluster: str
    source: str
    selector: str
    url: str
    window_s: int
    done_until_ms: int


class CheckpointStore:
    """The checkpoints of one lake; every call is one short SQLite transaction."""

    def __init__(self, root: Path) -> None:
        self.path = layout.state_dir(root) / STATE_FILE
        self._connect().close()  # made (or brought to its schema's version) now

    def _connect(self) -> sqlite3.Connection:
        return state_files.open_state(self.path, state_files.PROMETHEUS, timeout_s=30.0)

    def get(self, cluster: str, source: str) -> Checkpoint | None:
        with closing(self._connect()) as con:
            row = con.execute(
                "SELECT cluster, source, selector, url, window_s, done_until_ms "
                "FROM checkpoints WHERE cluster = ? AND source = ?",
                (cluster, source),
            ).fetchone()
        return None if row is None else Checkpoint(*row)

    def selectors(self, cluster: str) -> list[tuple[str, str]]:
        """(source, selector) of every checkpoint of `cluster`."""
        with closing(self._connect()) as con:
            found = con.execute(
                "SELECT source, selector FROM checkpoints WHERE cluster = ? ORDER BY source",
                (cluster,),
            ).fetchall()
        return [(str(source), str(selector)) for source, selector in found]

    def save(self, checkpoint: Checkpoint) -> None:
        with closing(self._connect()) as con, con:
            con.execute(
                "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (cluster, source) DO UPDATE SET selector = excluded.selector, "
                "url = excluded.url, window_s = excluded.window_s, "
                "done_until_ms = excluded.done_until_ms, updated_ms = excluded.updated_ms",
                (
                    checkpoint.cluster,
                    checkpoint.source,
                    checkpoint.selector,
                    checkpoint.url,
                    checkpoint.window_s,
                    checkpoint.done_until_ms,
                    int(time.time() * 1000),
                ),
            )

    def delete(self, cluster: str, source: str) -> None:
        with closing(self._connect()) as con, con:
            con.execute(
                "DELETE FROM checkpoints WHERE cluster = ? AND source = ?", (cluster, source)
            )
