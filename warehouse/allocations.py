"""The scheduler's allocations (`job_gpus`) held in one state file, read again only where a
batch file is new or rewritten.

The per-day pass and the summary marts' update read every allocation (which can own a day's
samples, which jobs a change puts in scope). Read through a view over the table's files, each
read bound every batch file's footer: a batch a day and collector, so the cost of one new day
grew with the lake's history. `hold_allocations` keeps the rows of every file, as the view
reads them (typed by the contract, `cluster` filled from the folder), in
`<lake>/_state/allocations/job_gpus.parquet`, each row with its file and the file's size and
modification time (the stamp every fingerprint of the lake trusts); a call reads the files
whose stamp changed, drops the rows of files gone, and holds the rows, in the files' order,
as a table in the engine. The file is re-derivable: missing or unreadable, every file is read
again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from warehouse import layout, queries
from warehouse.arrow_arrays import read_parquet, repeated_string, strings
from warehouse.connection import register_files
from warehouse.schema import TABLES

if TYPE_CHECKING:
    import duckdb

__all__ = ["hold_allocations"]

_TABLE = "job_gpus"
_FILE = "__gpuledger_file"
_STAMPS = b"gpuledger.stamps"


def _cache_path(root: Path) -> Path:
    return root / "_state" / "allocations" / f"{_TABLE}.parquet"


def _read_cache(path: Path) -> tuple[pa.Table | None, dict[str, str]]:
    try:
        table = read_parquet(path)
        stamps = json.loads((table.schema.metadata or {})[_STAMPS])
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return None, {}
    if not isinstance(stamps, dict) or _FILE not in table.column_names:
        return None, {}
    return table, stamps


def _write_cache(path: Path, table: pa.Table, stamps: dict[str, str]) -> None:
    meta = {**(table.schema.metadata or {}), _STAMPS: json.dumps(stamps).encode()}
    layout.replace_rederivable(
        path, lambda handle: pq.write_table(table.replace_schema_metadata(meta), handle)
    )


def _read_file(con: duckdb.DuckDBPyConnection, path: Path) -> pa.Table:
    """One file's rows as the table's view reads them, with the file's name."""
    register_files(con, _TABLE, [path], view="allocations_file")
    queries.create_table(
        con, "allocations_read", "SELECT * FROM allocations_file", {}, temporary=True
    )
    rows = con.table("allocations_read").to_arrow_table()
    con.execute("DROP TABLE allocations_read")
    return rows.append_column(_FILE, repeated_string(str(path), rows.num_rows))


def _typed_empty() -> pa.Table:
    """No row, with the columns and types a view over the table's files reads as Arrow: the
    contract's (warehouse/schema.py), timestamps in the engine's microseconds."""
    fields = [
        pa.field(f.name, pa.timestamp("us", tz=f.type.tz))
        if pa.types.is_timestamp(f.type)
        else pa.field(f.name, f.type)  # nullable, as the view's columns
        for f in TABLES[_TABLE].schema
    ]
    return pa.Table.from_batches([], pa.schema([*fields, pa.field(_FILE, pa.string())]))


def hold_allocations(con: duckdb.DuckDBPyConnection, root: Path, table: str) -> None:
    """Create the engine table `table` holding every row of `job_gpus`'s files, in the order a
    view over them reads (by file, then row), reading only the files new or rewritten since the
    last call (any process's) and keeping the state file up to date."""
    files = layout.table_files(root, _TABLE)
    names = [str(p) for p in files]
    stamps = dict(zip(names, _stamps(files), strict=True))
    path = _cache_path(root)
    empty = _typed_empty()
    cached, known = _read_cache(path)
    if cached is not None and cached.schema.remove_metadata() != empty.schema:
        cached, known = None, {}  # written by a gpuledger of another contract
    kept = [name for name in names if cached is not None and known.get(name) == stamps[name]]
    fresh = [p for p, name in zip(files, names, strict=True) if known.get(name) != stamps[name]]
    parts = [empty]
    if cached is not None and kept:
        parts.append(cached.filter(pc.is_in(cached.column(_FILE), strings(kept))))
    parts += [_read_file(con, p).cast(empty.schema) for p in fresh]
    rows = pa.concat_tables([t.replace_schema_metadata(None) for t in parts])
    if fresh or len(kept) != len(known):
        # each file's rows in the files' order (the sort is stable), as the view reads them
        position = pc.index_in(rows.column(_FILE), value_set=strings(names))
        rows = rows.take(pc.sort_indices(position))
        _write_cache(path, rows, stamps)
    con.register("allocations_held", rows.drop_columns([_FILE]))
    try:
        queries.create_table(
            con, table, "SELECT * FROM allocations_held", {}, temporary=True, label=_TABLE
        )
    finally:
        con.unregister("allocations_held")


def _stamps(files: list[Path]) -> list[str]:
    """Each file's size and modification time, "size|mtime" (as `layout.files_listing`)."""
    return [
        line.rsplit("|", 2)[1] + "|" + line.rsplit("|", 2)[2]
        for line in layout.files_listing(files).splitlines()
    ]
