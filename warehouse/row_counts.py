"""Row counts of a table's files, from their Parquet footers, remembered per file.

`gpuledger attribute` reports every mart's rows after each update. Read from every file's
footer, that count grew with the lake's history (a day partition per mart and day: at a year,
thousands of footers for one new day). Each file's count is kept in
`<lake>/_state/row_counts/<table>.json` with the file's size and modification time — the
stamp every fingerprint of the lake trusts (warehouse/layout.py) — so a count reads only the
footers of the files new or rewritten since the last. The file is re-derivable: a missing,
unreadable or torn one is counted again from the footers, and one that cannot be written is
skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq

from warehouse import layout

__all__ = ["table_rows"]

_FOLDER = "row_counts"


def _cache_path(root: Path, table: str) -> Path:
    return root / "_state" / _FOLDER / f"{table}.json"


def _read(path: Path) -> dict[str, list[int]]:
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def _write(path: Path, counts: dict[str, list[int]]) -> None:
    body = json.dumps(counts, separators=(",", ":")).encode()
    layout.replace_rederivable(path, lambda handle: handle.write(body))


def table_rows(root: Path, table: str, files: list[Path] | None = None) -> int:
    """Rows in `table`'s files (`files`: as listed already): each file's footer read once per
    size and modification time."""
    path = _cache_path(root, table)
    known = _read(path)
    counts: dict[str, list[int]] = {}
    total = 0
    prefix = str(root) + os.sep
    for file in layout.table_files(root, table) if files is None else files:
        stat = file.stat()  # before the footer: a file rewritten after it is counted again
        name = str(file)[len(prefix) :]
        stamp = [stat.st_size, stat.st_mtime_ns]
        entry = known.get(name)
        if isinstance(entry, list) and len(entry) == 3 and entry[:2] == stamp:
            rows = int(entry[2])
        else:
            rows = pq.read_metadata(file).num_rows
        counts[name] = [*stamp, rows]
        total += rows
    if counts != known:
        _write(path, counts)
    return total
