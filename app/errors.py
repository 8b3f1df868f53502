"""Map the layers' typed errors to one clear line and exit code 1 at the command line."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import click

from collector.errors import CollectorError
from warehouse.errors import WarehouseError

__all__ = ["AppError", "reports_errors"]

P = ParamSpec("P")
R = TypeVar("R")


class AppError(Exception):
    """A problem the user can fix (bad input file, missing optional dependency)."""


def _interrupted(exc: Exception) -> bool:
    """Whether `exc` is DuckDB stopping a query for Ctrl-C: the engine takes the signal while
    it runs, and its Python side raises InterruptException, or RuntimeError("Query
    interrupted") through the relation API, where Python code would raise KeyboardInterrupt."""
    duckdb = sys.modules.get("duckdb")  # not loaded: the error cannot be DuckDB's
    if duckdb is not None and isinstance(exc, duckdb.InterruptException):
        return True
    return isinstance(exc, RuntimeError) and str(exc).strip() == "Query interrupted"


def _damaged_lake_file(exc: Exception) -> WarehouseError | None:
    """DamagedFile for DuckDB failing to decode a lake file outside `warehouse.queries` (a
    table read whole, a mart's build); None for any other error."""
    duckdb = sys.modules.get("duckdb")  # not loaded: the error cannot be DuckDB's
    if duckdb is None or not isinstance(exc, duckdb.Error):
        return None
    from warehouse.damage import as_damaged

    mapped = as_damaged(exc)
    return mapped if isinstance(mapped, WarehouseError) else None


def _value_out_of_contract(exc: Exception) -> str | None:
    """A clear line for DuckDB refusing a value of a lake file (a string where the contract has
    a number, an integer past its column's range): what another tool's file may hold. None
    for any other error."""
    duckdb = sys.modules.get("duckdb")  # not loaded: the error cannot be DuckDB's
    kinds = () if duckdb is None else (duckdb.ConversionException, duckdb.OutOfRangeException)
    if not kinds or not isinstance(exc, kinds):
        return None
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    from warehouse.damage import off_contract_file

    named = _SOURCE_COLUMN.search(reason)
    found = off_contract_file(named.group(1) if named else None)
    where = (
        "A file another tool wrote may hold a value of another type or range than its column "
        "has in the lake's contract (docs/design.md §3)"
        if found is None
        else f"{str(found[0])!r} holds {found[1]}"
    )
    return (
        f"a value in the lake does not fit: {reason}. {where}: move that file out of the lake, "
        "or write it again with the contract's types"
    )


# how DuckDB names the column of a value it could not convert
_SOURCE_COLUMN = re.compile(r"source column (\w+)")


def reports_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn our errors into `Error: <message>` and exit 1; a usage error keeps exit 2."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (AppError, CollectorError, WarehouseError) as exc:
            raise click.ClickException(str(exc)) from exc
        except Exception as exc:
            if _interrupted(exc):  # Ctrl-C inside a DuckDB query: as Ctrl-C anywhere else
                raise click.Abort from exc
            damaged = _damaged_lake_file(exc)
            if damaged is not None:
                raise click.ClickException(str(damaged)) from exc
            unfit = _value_out_of_contract(exc)
            if unfit is None:
                raise
            raise click.ClickException(unfit) from exc

    return wrapper
