"""The one runner of shipped SQL: `run(con, "marts/job_usage", cluster="a")` -> polars frame."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import sql
from warehouse.errors import QueryParameterError

if TYPE_CHECKING:
    import duckdb
    import polars as pl
    import pyarrow as pa

__all__ = ["parameters", "relation", "run", "run_arrow"]


def parameters(con: duckdb.DuckDBPyConnection, name: str) -> set[str]:
    """Return the `$params` that sql/<name>.sql expects."""
    [statement] = con.extract_statements(sql.load(name))
    return set(statement.named_parameters)


def _relation(
    con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any]
) -> duckdb.DuckDBPyRelation:
    text = sql.load(name)
    statements = con.extract_statements(text)
    if len(statements) != 1:
        raise QueryParameterError(f"{name}: holds {len(statements)} statements, expected one")
    expected = set(statements[0].named_parameters)
    if set(params) != expected:
        raise QueryParameterError(
            f"{name}: expects parameters {sorted(expected)!r}, got {sorted(params)!r}"
        )
    with _parameter_errors(name, params):
        return con.sql(text, params=params or None)


@contextmanager
def _parameter_errors(name: str, params: dict[str, Any]) -> Iterator[None]:
    """Turn DuckDB's refusal of a parameter's value (a string where a number or a time is
    expected, a negative LIMIT) into one QueryParameterError naming the values given."""
    import duckdb

    try:
        yield
    except (
        duckdb.ConversionException,
        duckdb.BinderException,
        duckdb.InvalidInputException,
    ) as exc:
        # only what names a value given (or LIMIT/OFFSET, which take one): else a bug in the
        # query, a mart built before a column existed or a damaged file, and its own error
        message = str(exc)
        named = any(
            any(q in message for q in ((f"'{v}'", f'"{v}"') if isinstance(v, str) else (str(v),)))
            for v in params.values()
            if v is not None
        )
        if not params or not (named or "LIMIT" in message or "OFFSET" in message):
            raise
        if isinstance(exc, duckdb.InvalidInputException) and "cast" not in message.lower():
            raise
        given = ", ".join(f"{key}={value!r}" for key, value in sorted(params.items()))
        reason = str(exc).strip().splitlines()[0]
        raise QueryParameterError(
            f"{name}: a parameter does not fit the query ({given}): {reason}"
        ) from exc


def relation(
    con: duckdb.DuckDBPyConnection, name: str, /, **params: Any
) -> duckdb.DuckDBPyRelation:
    """sql/<name>.sql as a lazy relation, for results too big to hold: stream it to Parquet."""
    return _relation(con, name, params)


def run(con: duckdb.DuckDBPyConnection, name: str, /, **params: Any) -> pl.DataFrame:
    """Execute sql/<name>.sql with `params` bound by name and return the result as polars."""
    with _parameter_errors(name, params):
        frame: pl.DataFrame = _relation(con, name, params).pl()
    return frame


def run_arrow(con: duckdb.DuckDBPyConnection, name: str, /, **params: Any) -> pa.Table:
    """Like `run`, but return an Arrow table (what the writer lands)."""
    with _parameter_errors(name, params):
        return _relation(con, name, params).to_arrow_table()
