"""`Lake`: one lake, as every caller holds and passes it.

A command, the service's round, the API or a bench builds one `Lake` from the `--lake` path
(`Lake.at`) and hands it down; no layer re-interprets a bare path. The object owns what is
the lake's own and delegates each to the module that defines it:

- its layout — where a table's and a partition's files are, the `_state/` folder
  (warehouse/layout.py);
- engine connections — DuckDB with one view per table (warehouse/connection.py);
- locks — the writer lock and who holds it (warehouse/writer_lock.py);
- state — the SQLite state files under `_state/` (warehouse/state_files.py);
- damage checks — a DuckDB error turned into the damaged file it names (warehouse/damage.py);
- settled reads — a read run again when a writer replaced the files under it (`read_settled`).

The modules below it keep working on `lake.root`: they are what `Lake` is made of.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from warehouse import damage, layout, state_files, writer_lock
from warehouse.connection import DEFAULT_MEMORY_LIMIT, WarehouseConfig

if TYPE_CHECKING:
    import duckdb

__all__ = ["Lake"]

T = TypeVar("T")
# reads of one lake while writers replace its files: what a reader tries before it gives up,
# and its first wait before the next try (doubled each time: a writer's burst passes)
SETTLED_READ_ATTEMPTS = 5
SETTLED_READ_WAIT_S = 0.25


@dataclass(frozen=True, slots=True)
class Lake:
    """The lake at `root`: its layout, engine connections, writer lock, state and damage
    checks. Immutable and cheap: one per command, passed down."""

    root: Path

    def __post_init__(self) -> None:
        # absolute, however it was spelled (layout.resolve_root says why)
        object.__setattr__(self, "root", layout.resolve_root(self.root))

    @classmethod
    def at(cls, path: str | os.PathLike[str] | None) -> Lake:
        """The lake at `path` (the default `./lake` when None or empty)."""
        return cls(layout.resolve_root(path))

    def __str__(self) -> str:  # messages name the lake by its path, as before
        return str(self.root)

    def exists(self) -> bool:
        """Whether the lake's folder exists (a lake nothing has landed in yet does not)."""
        return self.root.is_dir()

    # --- layout ------------------------------------------------------------------------------

    def table_dir(self, table: str) -> Path:
        return layout.table_dir(self.root, table)

    def partition_dir(self, table: str, cluster: str, date: dt.date | None) -> Path:
        return layout.partition_dir(self.root, table, cluster, date)

    def table_files(self, table: str) -> list[Path]:
        """`table`'s Parquet files now, sorted."""
        return layout.table_files(self.root, table)

    def state_dir(self) -> Path:
        """`<root>/_state/`, made if missing."""
        return layout.state_dir(self.root)

    # --- engine connections ------------------------------------------------------------------

    def config(
        self,
        *,
        memory_limit: str = DEFAULT_MEMORY_LIMIT,
        threads: int | None = None,
        temp_directory: Path | None = None,
    ) -> WarehouseConfig:
        """The engine settings for this lake."""
        return WarehouseConfig(self.root, memory_limit, threads, temp_directory)

    def connect(
        self, *, require: Iterable[str] = (), config: WarehouseConfig | None = None
    ) -> duckdb.DuckDBPyConnection:
        """DuckDB with one view per table of this lake (`warehouse.connection.connect`);
        EmptyWarehouse if a table in `require` has no data. `config`: engine settings for this
        lake (its root must be this lake's)."""
        from warehouse.connection import connect

        return connect(config or self.config(), require=require)

    # --- locks -------------------------------------------------------------------------------

    def writer(
        self,
        step: str,
        *,
        command: str | None = None,
        wait: bool = True,
        timeout_s: float | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> AbstractContextManager[None]:
        """Hold the lake's writer lock for `step` (`warehouse.writer_lock.writer_lock`)."""
        return writer_lock.writer_lock(
            self.root, step, command=command, wait=wait, timeout_s=timeout_s, progress=progress
        )

    def writer_holder(self) -> writer_lock.Holder | None:
        """Who holds the writer lock now (None: nobody)."""
        return writer_lock.holder(self.root)

    # --- state -------------------------------------------------------------------------------

    def state_path(self, spec: state_files.StateFile) -> Path:
        return state_files.state_path(self.root, spec)

    def state(
        self, spec: state_files.StateFile, timeout_s: float = 30.0, *, autocommit: bool = False
    ) -> sqlite3.Connection:
        """Open the lake's state file `spec` at its current schema (`state_files.open_state`)."""
        return state_files.open_state(self.root, spec, timeout_s, autocommit=autocommit)

    # --- damage checks -----------------------------------------------------------------------

    def damaged(
        self, exc: BaseException, con: duckdb.DuckDBPyConnection | None = None
    ) -> BaseException:
        """`exc` as DamagedFile naming the lake file DuckDB failed to decode, else `exc`
        (`warehouse.damage.as_damaged`)."""
        return damage.as_damaged(exc, con)

    # --- settled reads -------------------------------------------------------------------------

    def files_now(self, tables: Iterable[str] | None = None) -> frozenset[tuple[str, int, int]]:
        """Every committed Parquet file of the lake's tables (or of `tables`), with its mtime
        and size."""
        from warehouse.schema import TABLES

        found = set()
        for table in TABLES if tables is None else tables:
            for path in self.table_files(table):
                try:
                    info = path.stat()
                except FileNotFoundError:  # replaced or removed since it was listed
                    continue
                found.add((str(path), info.st_mtime_ns, info.st_size))
        return frozenset(found)

    def read_settled(
        self,
        read: Callable[[], T],
        attempts: int = SETTLED_READ_ATTEMPTS,
        wait_s: float = SETTLED_READ_WAIT_S,
        tables: Iterable[str] | None = None,
    ) -> T:
        """`read()`, run again (up to `attempts` in all) when it fails with a DuckDB error while
        the lake's files changed under it: a collector re-landing its window or `attribute`
        replacing a mart renames a new file over the one a query had listed, and DuckDB then
        reads the new file with the old one's footer ("TProtocolException: Invalid data",
        "Could not convert Timestamp(MS) …"). An error on files that did not change is raised
        at once: it is the files', not the race's. Between tries it waits `wait_s`, doubled each
        time (with 5 tries, 0 of 12 detect runs failed beside a writer landing 20 batches a
        second; 6 of 14 had failed, with none). A file gone between its listing and its
        reading (FileNotFoundError: a re-landing evicted it) is the race's too. `tables`: the
        tables whose changes count (default every table; `attribute`, which writes the marts
        itself, counts only the raw tables)."""
        import time

        import duckdb

        for attempt in range(1, attempts + 1):
            before = self.files_now(tables)
            try:
                return read()
            except (duckdb.Error, FileNotFoundError):
                if attempt == attempts or self.files_now(tables) == before:
                    raise
            time.sleep(wait_s * 2 ** (attempt - 1))
        raise AssertionError("unreachable")  # pragma: no cover
