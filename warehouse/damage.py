"""Name the lake file behind DuckDB's error when a Parquet file is damaged inside (a data page,
a dictionary) while its footer still reads, so the view over it was created without complaint.

DuckDB notices such damage only when a query decodes the page, and its message names the file
only sometimes ("Failed to read file …: ZSTD Decompression failure", but also just "Parquet
file is likely corrupted, dictionary offset out of range"). Every connection remembers the
files its views read (`remember`, called where views are registered); `as_damaged` turns a
damage error into `DamagedFile` naming the file — the one the message names, else the first
remembered file DuckDB cannot decode whole.
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from warehouse.errors import DamagedFile

if TYPE_CHECKING:
    import duckdb

__all__ = ["as_damaged", "looks_damaged", "remember"]

# Messages of DuckDB's Parquet reader for a file damaged inside (seen on flipped bytes in
# data and dictionary pages: decompression failures, offsets out of range, page headers Thrift
# cannot decode — "don't know what type", "Varint-decoding found too large number"); these come
# as DuckDB's bare base error too.
_DAMAGE = re.compile(
    r"corrupt|decompress|payload value|thrift|don't know what type|varint", re.IGNORECASE
)
_NAMED = re.compile(r"""file ["']([^"']+)["']""")

_FILES: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, dict[str, None]] = (
    weakref.WeakKeyDictionary()
)


def remember(con: duckdb.DuckDBPyConnection, paths: Iterable[Path | str]) -> None:
    """Note that views of `con` read `paths` (in order; kept while `con` lives)."""
    files = _FILES.setdefault(con, {})
    files.update(dict.fromkeys(str(p) for p in paths))


def looks_damaged(exc: BaseException) -> bool:
    """Whether `exc` may be DuckDB's Parquet reader failing on a file's contents (a damage
    message, or DuckDB's unclassified base error); `as_damaged` checks the files before saying
    so."""
    import duckdb

    if not isinstance(exc, duckdb.Error):
        return False
    return type(exc) is duckdb.Error or bool(_DAMAGE.search(str(exc)))


def _reason(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0].rstrip(" :") if lines else type(exc).__name__


def _remembered(con: duckdb.DuckDBPyConnection | None) -> Iterator[str]:
    """The files `con`'s views read (none for a connection whose views were not registered
    here, such as a cursor: its caller maps the error with the connection itself); for None,
    every live connection's, the newest first (a command's own connection is its newest)."""
    if con is not None:
        yield from list(_FILES.get(con, {}))
        return
    for files in reversed(list(_FILES.values())):
        yield from list(files)


def _unreadable(path: str) -> bool:
    """Whether DuckDB fails to decode every column of every row of `path` (a fresh reader, so
    nothing of the failed query's state is reused; streamed, so a large file is never held)."""
    import duckdb

    if not Path(path).is_file():
        return False  # removed since it was listed (compaction, a rebuild): not damage
    if not os.access(path, os.R_OK):
        return False  # not this user's to read (its own error says so): not damage
    probe = duckdb.connect()
    try:
        for _ in probe.read_parquet(path).to_arrow_reader(65_536):
            pass  # decoded batch by batch, dropped: memory stays one batch, not one file
    except (duckdb.Error, OSError, ValueError):  # the stream raises DuckDB's error as Arrow's
        return True
    finally:
        probe.close()
    return False


def as_damaged(exc: BaseException, con: duckdb.DuckDBPyConnection | None = None) -> BaseException:
    """`exc` as DamagedFile naming the damaged file when it is DuckDB failing to decode one of
    the lake files `con`'s views read (any live connection's when `con` is None); else `exc`.

    The file is the one the message names (if it indeed does not decode), else, for a message
    of damage, found by decoding each remembered file in turn (only on this error path: a
    lake's worth of reading, once). A file missing since its view was made is not damage.
    """
    import duckdb

    if isinstance(exc, DamagedFile) or not isinstance(exc, duckdb.Error):
        return exc
    reason = _reason(exc)
    named = _NAMED.search(reason)
    if named is not None and Path(named.group(1)).is_file():
        # DuckDB named it ("Failed to read file …"): damage if it does not decode whole (a
        # file replaced or removed since the view was made is not)
        if not _unreadable(named.group(1)):
            return exc
        detail = reason.split(named.group(0), 1)[1].lstrip(" :")
        return DamagedFile(Path(named.group(1)), detail or reason)
    if not looks_damaged(exc):
        return exc
    for path in _remembered(con):
        if _unreadable(path):
            return DamagedFile(Path(path), reason)
    return exc
