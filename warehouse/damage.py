"""Name the lake file behind DuckDB's error when a Parquet file is damaged inside (a data page,
a dictionary) while its footer still reads, so the view over it was created without complaint.

DuckDB notices such damage only when a query decodes the page, and its message names the file
only sometimes ("Failed to read file …: ZSTD Decompression failure", but also just "Parquet
file is likely corrupted, dictionary offset out of range"). Every connection remembers the
files its views read (`remember`, called where views are registered); `as_damaged` turns a
damage error into `DamagedFile` naming the file — the one the message names, else the first
remembered file DuckDB cannot decode whole.

The same error is often examined twice (by `warehouse.queries` with its connection, then by
the command line's handler with every connection), and a lake's files are mostly intact: a file
found to decode whole is remembered by its identity (path, device, inode, size, modification
time, as `layout.files_fingerprint` tells a changed file), so a later search skips it until it
is rewritten or replaced. Only intact verdicts are kept (a file found damaged ends the search),
at most INTACT_CACHE_SIZE of them, the least recently used dropped first.
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from warehouse.errors import DamagedFile

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

__all__ = [
    "INTACT_CACHE_SIZE",
    "IntactCacheInfo",
    "as_damaged",
    "unreadable",
    "intact_cache_info",
    "looks_damaged",
    "off_contract_file",
    "remember",
]

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


# Files found to decode whole, by identity; a dashboard's threads search concurrently.
INTACT_CACHE_SIZE = 16_384
_Identity = tuple[str, int, int, int, int]
_INTACT: OrderedDict[_Identity, None] = OrderedDict()
_INTACT_LOCK = threading.Lock()
_COUNTS = {"hits": 0, "decodes": 0}


class IntactCacheInfo(NamedTuple):
    """How the search for a damaged file used its cache: files skipped as known intact (hits),
    files decoded (decodes), and how many intact files are remembered now (size)."""

    hits: int
    decodes: int
    size: int


def intact_cache_info() -> IntactCacheInfo:
    """The cache's counts since the process started (like functools' cache_info)."""
    with _INTACT_LOCK:
        return IntactCacheInfo(_COUNTS["hits"], _COUNTS["decodes"], len(_INTACT))


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


def off_contract_file(column: str | None) -> tuple[Path, str] | None:
    """The first file the live connections' views read whose `column` (any contract column
    when None) has another type than its table's contract, with that type: the file behind
    DuckDB refusing a value it cannot convert ("Could not convert string 'n/a' to FLOAT when
    casting from source column engine_active"), which names no file. Read on that error path
    only (each file's footer)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from warehouse.schema import TABLES

    for name in dict.fromkeys(_remembered(None)):
        path = Path(name)
        table = next(
            (TABLES[p.name] for p in path.parents if p.name in TABLES and p != path.parent),
            None,
        )
        if table is None:
            continue
        try:
            schema = pq.read_schema(path)
        except (OSError, pa.ArrowException):
            continue  # gone since, or damaged: said by as_damaged
        contract = table.schema
        for field in schema:
            wanted = contract.field(field.name) if field.name in contract.names else None
            if wanted is None or (column is not None and field.name != column):
                continue
            if _may_not_fit(field.type, wanted.type):
                return path, f"{field.name} as {field.type} (the contract's: {wanted.type})"
    return None


def _may_not_fit(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether values of type `have` may not convert to `want`: text where the contract has
    no text, or a number wider than the contract's integer."""
    import pyarrow as pa

    def text(t: pa.DataType) -> bool:
        return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t))

    if text(have):
        return not text(want)
    if pa.types.is_integer(want) and (pa.types.is_integer(have) or pa.types.is_floating(have)):
        return bool(pa.types.is_floating(have) or have.bit_width > want.bit_width)
    return False


def _unreadable(path: str, *, cached: bool = False) -> bool:
    """Whether DuckDB fails to decode every column of every row of `path` (a fresh reader, so
    nothing of the failed query's state is reused; streamed, so a large file is never held).

    With `cached`, a file already found intact with the same identity is not decoded again,
    and one found intact now is remembered.
    """
    import duckdb

    if not Path(path).is_file():
        return False  # removed since it was listed (compaction, a rebuild): not damage
    if not os.access(path, os.R_OK):
        return False  # not this user's to read (its own error says so): not damage
    try:
        stat = os.stat(path)  # before decoding: a file replaced meanwhile has another identity
    except FileNotFoundError:
        return False  # removed just now
    identity = (path, stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if cached:
        with _INTACT_LOCK:
            if identity in _INTACT:
                _INTACT.move_to_end(identity)
                _COUNTS["hits"] += 1
                return False
    with _INTACT_LOCK:
        _COUNTS["decodes"] += 1
    probe = duckdb.connect()
    try:
        for _ in probe.read_parquet(path).to_arrow_reader(65_536):
            pass  # decoded batch by batch, dropped: memory stays one batch, not one file
    except (duckdb.Error, OSError, ValueError):  # the stream raises DuckDB's error as Arrow's
        return True
    finally:
        probe.close()
    if cached:
        with _INTACT_LOCK:
            _INTACT[identity] = None
            _INTACT.move_to_end(identity)
            while len(_INTACT) > INTACT_CACHE_SIZE:
                _INTACT.popitem(last=False)
    return False


def unreadable(path: Path) -> bool:
    """Whether the Parquet file `path` fails to decode (every column of every row, streamed)."""
    return _unreadable(str(path))


def as_damaged(exc: BaseException, con: duckdb.DuckDBPyConnection | None = None) -> BaseException:
    """`exc` as DamagedFile naming the damaged file when it is DuckDB failing to decode one of
    the lake files `con`'s views read (any live connection's when `con` is None); else `exc`.

    The file is the one the message names (if it indeed does not decode), else, for a message
    of damage, found by decoding each remembered file in turn (only on this error path: a
    lake's worth of reading, once; files found intact before and unchanged since are skipped).
    A file missing since its view was made is not damage.
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
        if _unreadable(path, cached=True):
            return DamagedFile(Path(path), reason)
    return exc
