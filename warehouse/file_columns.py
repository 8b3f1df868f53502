"""The columns of each set of lake files a view was made over, remembered per process, so that
`connection.register_files` binds a view over the same files again once, not twice.

A view over files needs their columns first (a column a file lacks reads as null), which costs
DuckDB's binder a pass over their footers; the view's own query then reads them again. On a
small lake that binding costs more than reading the rows, and `connect()`, every attribution
and every summary build register the same tables over the same files again and again.

A file is known by its identity (path, device, inode, size, modification time), as
`layout.files_fingerprint` tells a changed file: the writer never rewrites a file in place (it
writes a new one and renames it over), so files with the same identities hold the same columns.
A file that cannot be looked at has no identity: its set is not remembered (DuckDB then says
what is wrong with it, as before).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

__all__ = ["COLUMNS_CACHE_SIZE", "FilesKey", "columns", "files_key", "remember"]

# What a view over files is made from: each file's identity, in order.
FilesKey = tuple[tuple[str, int, int, int, int], ...]

# File sets whose columns are remembered, the least recently used dropped first (a dashboard's
# threads register views concurrently).
COLUMNS_CACHE_SIZE = 4_096
_COLUMNS: OrderedDict[FilesKey, frozenset[str]] = OrderedDict()
_LOCK = threading.Lock()


def files_key(paths: Sequence[Path]) -> FilesKey | None:
    """The identities of `paths`; None when one cannot be looked at."""
    identities = []
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            return None
        identities.append((str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return tuple(identities)


def columns(key: FilesKey | None) -> frozenset[str] | None:
    """The columns the files of `key` hold, as last bound (None: not known)."""
    if key is None:
        return None
    with _LOCK:
        found = _COLUMNS.get(key)
        if found is not None:
            _COLUMNS.move_to_end(key)
        return found


def remember(key: FilesKey | None, names: frozenset[str]) -> None:
    """Remember that the files of `key` hold the columns `names`."""
    if key is None:
        return
    with _LOCK:
        _COLUMNS[key] = names
        _COLUMNS.move_to_end(key)
        while len(_COLUMNS) > COLUMNS_CACHE_SIZE:
            _COLUMNS.popitem(last=False)
