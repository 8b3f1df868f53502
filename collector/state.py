"""Collector checkpoints: a SQLite file under `<lake>/_state/`, written in one transaction a run.

DESIGN §3: state that is updated in place lives in a transactional store, never in Parquet.
A run opens one `BEGIN IMMEDIATE` transaction, so two collectors of the same kind on one lake
take turns, and a run that fails commits nothing (its checkpoint does not move).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from collector.errors import CollectorError
from warehouse import layout

__all__ = ["state_transaction"]


@contextmanager
def state_transaction(
    root: Path, filename: str, schema: str, command: str, timeout_s: float = 30.0
) -> Iterator[sqlite3.Connection]:
    """Yield a connection to `<root>/_state/<filename>` inside one write transaction.

    `schema` (CREATE … IF NOT EXISTS statements) is applied first. Committed only if the body
    succeeds; raises CollectorError naming `command` when another run holds the lock longer
    than `timeout_s`.
    """
    path = layout.state_dir(root) / filename
    con = layout.open_state_db(
        root, filename, timeout_s, autocommit=True
    )  # not for every local user to read
    try:
        con.executescript(schema)
        try:
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise CollectorError(
                f"the state {str(path)!r} is locked ({exc}); is another `{command}` running "
                "on this lake?"
            ) from exc
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    finally:
        con.close()
