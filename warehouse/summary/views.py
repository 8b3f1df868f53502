"""Views of Arrow tables and of raw tables in the update's engine: the small pieces every
step of a summary-mart update stands its inputs up with.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from warehouse import layout
from warehouse.connection import (
    register_files,
)

if TYPE_CHECKING:
    import duckdb


def _arrow_view(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    """Make `table` readable as `name` (registered: never also a view of that name)."""
    con.register(name, table)


def _restricted(con: duckdb.DuckDBPyConnection, base: str, view: str, scope: str) -> None:
    """Create `view` as the rows of `base` whose (cluster, job_id) is in `scope`."""
    con.table(base).join(con.table(scope), ["cluster", "job_id"], how="semi").create_view(view)


def _register_raw(con: duckdb.DuckDBPyConnection, root: Path, tables: Iterable[str]) -> None:
    for table in tables:
        register_files(con, table, layout.table_files(root, table), view=f"{table}_all")
        con.table(f"{table}_all").create_view(table)
