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
from typing import TYPE_CHECKING

from collector.errors import CollectorError
from warehouse import state_files

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["arrow_blob", "state_transaction"]


@contextmanager
def state_transaction(
    root: Path, spec: state_files.StateFile, command: str, timeout_s: float = 30.0
) -> Iterator[sqlite3.Connection]:
    """Yield a connection to the state file `spec` of the lake `root` inside one write
    transaction (the file at its schema's version: warehouse/state_files.py).

    Committed only if the body succeeds; raises CollectorError naming `command` when another
    run holds the lock longer than `timeout_s`.
    """
    path = state_files.state_path(root, spec)
    try:  # a file to migrate is migrated under the same lock
        con = state_files.open_state(path, spec, timeout_s, autocommit=True)
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):  # not another run: e.g. a file SQLite cannot open
            raise
        raise _locked(path, command, exc) from exc
    try:
        try:
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise _locked(path, command, exc) from exc
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    finally:
        con.close()


def _locked(path: Path, command: str, exc: sqlite3.OperationalError) -> CollectorError:
    return CollectorError(
        f"the state {str(path)!r} is locked ({exc}); is another `{command}` running on this lake?"
    )


def arrow_blob(rows: pa.Table) -> bytes:
    """`rows` as an Arrow IPC stream, to stage in a state file before they land (read back
    with `pa.ipc.open_stream(blob).read_all()`)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as stream:
        stream.write_table(rows)
    return bytes(sink.getvalue().to_pybytes())
