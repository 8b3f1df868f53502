"""A DuckDB connection over the lake with one view per table of the contract.

Every table gets a view even when the lake has no file for it (an empty view with the contract's
columns), so queries never fail on a missing table. Files written by other tools are read the
same way: extra columns are ignored and missing nullable columns read as null, but a missing
(or null) `cluster` is the one the file's `cluster=` folder names, as a hive writer (Spark's
partitionBy, pyarrow's hive partitioning) leaves it to the path (`register_files`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import sql
from warehouse import file_columns, layout
from warehouse.damage import remember
from warehouse.emissions import CarbonIntensity, register_intensity
from warehouse.errors import DamagedFile, EmptyWarehouse, NotReadable, SchemaMismatch
from warehouse.queries import define_view, parsed, view_text
from warehouse.schema import TABLES, TableSpec

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "SPAN_VIEWS",
    "WarehouseConfig",
    "connect",
    "define_span_views",
    "open_engine",
    "quote_ident",
    "register_files",
    "register_reference",
    "register_table",
]

# Well under the 4 GB peak RSS the attribution must stay within: DuckDB spills past this.
DEFAULT_MEMORY_LIMIT = "2GB"
# Views defined by shipped SQL on top of the table views (name -> query name).
DERIVED_VIEWS = {
    "jobs_latest": "views/jobs_latest",
    # each sample's owner by the allocation rule (raw files keep their source's job_id)
    "unowned_samples": "views/unowned_samples",
    "sample_owners": "attribution/sample_owners",
    "owned_samples": "views/owned_samples",
    # where each cluster's open allocations end (job_gpu_intervals, fairness_weekly)
    "cluster_data_end": "views/cluster_data_end",
    "job_gpu_intervals": "views/job_gpu_intervals",
    "job_gpu_shares": "views/job_gpu_shares",
    "recommendations_latest": "views/recommendations_latest",
    "data_extent": "views/data_extent",
}

# The per-day pass's views over the samples (warehouse/partitions.py builds them, over one
# day's samples, as tables where it reads them more than once): `connect` leaves them out, as
# no query of its readers reads them, and binding them bound the owners' chain over every
# sample file again (0.19 s of a 0.49 s connection to a 1,024-GPU × 7-day lake).
SPAN_VIEWS = {
    "sample_devices": "views/sample_devices",
    "sample_steps": "views/sample_steps",
    "sample_spans": "views/sample_spans",
}


@dataclass(frozen=True, slots=True)
class WarehouseConfig:
    """Where the lake is, how much memory DuckDB may use, and where it spills beyond that.

    `temp_directory` defaults to `<root>/_state/duckdb_tmp` (a fast local disk is best: point
    it elsewhere when the lake is on slow or remote storage).
    """

    root: Path
    memory_limit: str = DEFAULT_MEMORY_LIMIT
    threads: int | None = None
    temp_directory: Path | None = None


def quote_ident(name: str) -> str:
    """Quote an identifier from a closed set (the contract's column names) for DuckDB."""
    return '"' + name.replace('"', '""') + '"'


def register_table(con: duckdb.DuckDBPyConnection, root: Path, name: str) -> bool:
    """Create (or refresh) the view `name` over its files; return whether the lake has any."""
    return register_files(con, name, layout.table_files(root, name))


def register_files(
    con: duckdb.DuckDBPyConnection,
    table: str,
    paths: list[Path],
    view: str | None = None,
    *,
    row_numbers: bool = False,
) -> bool:
    """Create the view `view` (default: `table`) over `paths`, typed by `table`'s contract.

    A column a file lacks reads as null, except a partition key its folder names: `cluster`
    (and `date`, for the marts partitioned by it) read from the `cluster=`/`date=` folder,
    percent-decoded as hive writers encode it, where the file has no such column or a null in
    it; a value in the file wins over its folder's (the lake's own folder names are made safe,
    so a name such as 'gpu farm' sits in cluster=gpu_farm). With `row_numbers` the view ends
    with `file_row_number`, each row's position in its file.

    Returns whether there was any file; with none the view is empty but has every column.
    """
    name = view or table
    if not paths:  # typed nulls, no row (not from_arrow: DuckDB would load pandas, ~0.5 s)
        columns = [
            f"CAST(NULL AS {column.type}) AS {quote_ident(column.name)}"
            for column in TABLES[table].columns
        ]
        if row_numbers:
            columns.append("CAST(NULL AS BIGINT) AS file_row_number")
        define_view(con, name, f"SELECT {', '.join(columns)} WHERE false")
        return False
    import duckdb

    key = file_columns.files_key(paths)
    params = {"files": [str(p) for p in paths], "row_numbers": row_numbers}
    present = file_columns.columns(key)
    try:
        if present is None:  # the files' columns, from DuckDB's binder
            rel = con.sql(parsed(con, sql.load(_LAKE_FILES)), params=params)
            present = frozenset(rel.columns) - _NOT_FILE_COLUMNS
            _refuse_other_case(table, paths, present)
            file_columns.remember(key, present)
        # one statement, bound once (a relation's create_view binds the query again)
        files = view_text(con, _LAKE_FILES, params)
        projection = _projection(table, present, row_numbers)
        define_view(con, name, f"SELECT {projection} FROM (\n{files}\n)", reused=False)
    except (duckdb.InvalidInputException, duckdb.IOException) as exc:
        raise _damaged(paths, exc) from exc
    remember(con, paths)  # to name a file damaged inside when a query decodes it
    return True


def _refuse_other_case(table: str, paths: list[Path], present: frozenset[str]) -> None:
    """Raise SchemaMismatch where a file names a contract column in other letter case (`TS`
    for `ts`): read as the contract's, its values would be null and its rows lost unsaid."""
    wanted = {field.name.lower(): field.name for field in TABLES[table].columns}
    other = sorted(c for c in present if c.lower() in wanted and c not in wanted.values())
    if not other:
        return
    import pyarrow.parquet as pq

    first = next((p for p in paths if other[0] in pq.read_schema(p).names), paths[0])
    names = ", ".join(f"{c!r} (the contract's {wanted[c.lower()]!r})" for c in other[:3])
    raise SchemaMismatch(
        f"{table}: {str(first)!r} names {names}{' …' if len(other) > 3 else ''}: column names "
        "are the contract's, in lower case (docs/design.md §3); rename them where the file is "
        "written"
    )


# Every column of a set of Parquet files, and the partition keys their paths name.
_LAKE_FILES = "views/lake_files"


def _projection(table: str, present: frozenset[str], row_numbers: bool) -> str:
    """The select list of `table`'s view over files holding the columns `present` (those of
    views/lake_files): the contract's columns, cast to its types."""
    spec = TABLES[table]
    keys = _path_keys(spec)
    projection = []
    for field in spec.columns:
        column = quote_ident(field.name)
        from_path = keys.get(field.name)
        if field.name not in present:
            source = from_path or "NULL"
        elif from_path is not None:  # the file's own value wins; its folder's fills a null
            # (both as the contract's type: a file's `cluster` of integers met the folder's
            # text in one CASE, and every command ended in a binder error's traceback)
            own = f"CAST({column} AS {field.type})"
            source = f"CASE WHEN {column} IS NULL THEN {from_path} ELSE {own} END"
        else:
            source = column
        projection.append(f"CAST({source} AS {field.type}) AS {column}")
    if row_numbers:
        projection.append("file_row_number")
    return ", ".join(projection)


# The partition keys a file's path names (`cluster=`, `date=`), as columns of views/lake_files.
_PATH_KEYS = {"cluster": "__gpuledger_path_cluster", "date": "__gpuledger_path_date"}
# The columns of views/lake_files that are not the files' own.
_NOT_FILE_COLUMNS = frozenset({*_PATH_KEYS.values(), "file_row_number"})


def _path_keys(spec: TableSpec) -> dict[str, str]:
    """The columns of `spec` that a file may leave to its folder (column -> lake_files column).

    A hive writer (Spark's partitionBy, pyarrow's hive partitioning) keeps partition columns
    out of the files: `cluster` is every table's, `date` the date-partitioned marts' whose
    partition column it is. Where the partition column is a timestamp (ts, start_ts, …) it is
    in the file anyway, and a `date=` folder could not restore it.
    """
    keys = {"cluster": _PATH_KEYS["cluster"]}
    if spec.date_column == "date":
        keys["date"] = _PATH_KEYS["date"]
    return keys


def _damaged(paths: list[Path], exc: Exception) -> Exception:
    """The first of `paths` whose Parquet footer cannot be read, as DamagedFile; else `exc`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in paths:
        try:
            pq.read_metadata(path)
        except FileNotFoundError:
            continue  # removed since it was listed (compaction, a rebuild): not damage
        except PermissionError as denied:
            return NotReadable(path, denied)  # not this user's to read: not damage
        except (pa.ArrowException, OSError) as bad:
            return DamagedFile(path, str(bad).strip().splitlines()[0] if str(bad) else "empty")
    return exc


def open_engine(config: WarehouseConfig) -> duckdb.DuckDBPyConnection:
    """A bare in-memory DuckDB in UTC with the config's memory limit, threads and spill folder.

    Past `memory_limit` DuckDB spills sorts, joins and aggregates to the temporary directory
    instead of failing, so a build's memory stays bounded whatever the lake's size.
    """
    import duckdb

    threads = config.threads or _engine_threads
    con = duckdb.connect(config={"threads": threads} if threads else {})
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET memory_limit = $limit", {"limit": config.memory_limit})
    spill = config.temp_directory
    if spill is None and config.root.is_dir() and os.access(config.root, os.W_OK):
        spill = layout.state_dir(config.root) / "duckdb_tmp"  # a read-only lake is still readable
    if spill is not None:
        con.execute("SET temp_directory = $dir", {"dir": str(spill)})
    return con


# Threads of the engines this process opens whose configuration names none; None: DuckDB's
# default, one per core it sees (set_engine_threads).
_engine_threads: int | None = None


def set_engine_threads(threads: int | None) -> None:
    """Cap the threads of every engine this process opens from now on whose configuration names
    none (None: back to DuckDB's default, one per core).

    For a process that shares its cores with others: `make check` runs one test worker per core,
    and each worker's many small engines would otherwise each start a thread per core.
    """
    global _engine_threads
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be 1 or more, not {threads}")
    _engine_threads = threads


def register_reference(con: duckdb.DuckDBPyConnection, views: Iterable[str] | None = None) -> None:
    """Create the views of the reference tables shipped with the package (gpu_models, …):
    those named in `views`, or all.

    The first read of a file in this process sniffs its columns' types; later ones (each
    build opens a few engines) read with those types and the plain CSV dialect, which skips
    the sniffing (~8 ms a file) and reads the same rows as the same types.
    """
    for view, filename in REFERENCE_VIEWS.items():
        if views is not None and view not in views:
            continue
        path = str(files("warehouse").joinpath("data", filename))
        columns = _REFERENCE_COLUMNS.get(path)
        if columns is None:
            rel = con.read_csv(path, header=True)
            _REFERENCE_COLUMNS[path] = dict(zip(rel.columns, map(str, rel.types), strict=True))
        else:
            rel = con.read_csv(path, header=True, columns=columns, auto_detect=False)
        rel.create_view(view)


# Each reference file's columns and their DuckDB types, as its first read in this process
# sniffed them (path -> column -> type).
_REFERENCE_COLUMNS: dict[str, dict[str, str]] = {}


# Reference tables shipped with the package (view name -> file in warehouse/data/):
# gpu_models: peak dense BF16 TFLOP/s (FP16 where a GPU has no BF16), memory and power per model;
# the peaks are NVIDIA's datasheet figures without sparsity, sources listed in docs/throughput.md
# (they are job_usage.mfu's denominator: a model not listed gets no MFU);
# xid_classes: NVIDIA's XID catalogue as NVSentinel maps it (action bucket, FATAL/NONFATAL).
REFERENCE_VIEWS = {"gpu_models": "gpu_models.csv", "xid_classes": "xid_classes.csv"}


def define_span_views(con: duckdb.DuckDBPyConnection) -> None:
    """Define SPAN_VIEWS on a connection of `connect`: each sample's span of time, over the
    whole lake (what the per-day pass computes a day at a time; tests read them)."""
    for view, query in SPAN_VIEWS.items():
        define_view(con, view, sql.load(query))


def connect(
    config: WarehouseConfig | Path,
    *,
    require: Iterable[str] = (),
) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB with one view per lake table, `gpu_models` and the
    DERIVED_VIEWS (`jobs_latest`, each sample's owner, ...; not the per-day pass's SPAN_VIEWS).

    Raises EmptyWarehouse if the lake is missing or has no data for a table in `require`.
    """
    if isinstance(config, Path):
        config = WarehouseConfig(root=config)
    root = config.root
    required = list(require)
    if required and not root.is_dir():
        raise EmptyWarehouse(root, "any table (the folder does not exist)")
    con = open_engine(config)
    present = {name for name in TABLES if register_table(con, root, name)}
    missing = [name for name in required if name not in present]
    if missing:
        raise EmptyWarehouse(root, " and ".join(repr(m) for m in missing))
    register_reference(con)
    for view, query in DERIVED_VIEWS.items():
        define_view(con, view, sql.load(query))
    # no intensity known here (the marts were built with the configuration's): kg_co2e of a
    # summary mart's SQL run on this connection is null, never 0
    register_intensity(con, CarbonIntensity())
    return con
