"""The one runner of shipped SQL: `run(con, "marts/job_usage", cluster="a")` -> polars frame."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

import sql
from warehouse.damage import as_damaged
from warehouse.errors import QueryParameterError

if TYPE_CHECKING:
    import duckdb
    import polars as pl
    import pyarrow as pa

__all__ = [
    "damaged_files",
    "fetch",
    "parameters",
    "parsed",
    "relation",
    "rows",
    "run",
    "run_arrow",
    "view_text",
]


def parameters(con: duckdb.DuckDBPyConnection, name: str) -> set[str]:
    """Return the `$params` that sql/<name>.sql expects."""
    count, named = _shape(con, name)
    if count != 1:
        raise ValueError(f"{name}: holds {count} statements, expected one")
    return set(named)


# Each shipped query's number of statements and `$params`, parsed once per process (name ->
# shape): a file's text never changes while we run (sql.load caches it), and parsing the
# larger marts costs milliseconds each time a build asks.
_SHAPES: dict[str, tuple[int, frozenset[str]]] = {}


# Each SQL text of ours that DuckDB ran, parsed once per process (text -> its statement), the
# first texts kept when there are more (a closed set: the files of sql/ and the statements made
# of them and of the contract's names, a few hundred). DuckDB's parser costs about as much as
# binding on a small lake (fairness_weekly: 4 ms), and every connect(), attribution pass and
# page sends the same texts again; a parsed statement runs on any connection, with its own
# values each time (DuckDB copies it for each run).
_PARSED: dict[str, duckdb.Statement] = {}
PARSED_CACHE_SIZE = 4_096
# A forked child parses afresh: the statements were made by the parent's engines, whose
# threads the child does not have (a child reusing them died of SIGSEGV in the crash tests).
os.register_at_fork(after_in_child=_PARSED.clear)


def parsed(con: duckdb.DuckDBPyConnection, text: str) -> duckdb.Statement | str:
    """`text` as DuckDB parsed it the first time this process ran it: what `con.execute` and
    `con.sql` take in its place, without parsing it again. A text of several statements (or
    none) stays text: DuckDB runs it, or says what is wrong with it, as before."""
    found = _PARSED.get(text)
    if found is None:
        statements = con.extract_statements(text)
        if len(statements) != 1:
            return text
        found = statements[0]
        if len(_PARSED) < PARSED_CACHE_SIZE:
            _PARSED[text] = found
    return found


def _shape(con: duckdb.DuckDBPyConnection, name: str) -> tuple[int, frozenset[str]]:
    """How many statements sql/<name>.sql holds, and the `$params` of its first one."""
    shape = _SHAPES.get(name)
    if shape is None:
        statements = con.extract_statements(sql.load(name))
        named = frozenset(statements[0].named_parameters) if statements else frozenset()
        shape = _SHAPES[name] = (len(statements), named)
    return shape


def _relation(
    con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any]
) -> duckdb.DuckDBPyRelation:
    text = checked_text(con, name, params)
    with _parameter_errors(name, params):
        return con.sql(parsed(con, text), params=params or None)


def checked_text(con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, Any]) -> str:
    """The text of sql/<name>.sql, once it is known to be one statement whose `$params` are
    exactly those of `params` (QueryParameterError otherwise, naming what is wrong)."""
    text = sql.load(name)
    count, named = _shape(con, name)
    if count != 1:
        raise QueryParameterError(f"{name}: holds {count} statements, expected one")
    expected = set(named)
    if set(params) != expected:
        unknown, missing = sorted(set(params) - expected), sorted(expected - set(params))
        raise QueryParameterError(
            f"{name}: expects parameters {sorted(expected)!r}, got {sorted(params)!r}"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
            + (f"; missing: {', '.join(missing)}" if missing else "")
        )
    _refuse_fractions(name, params)
    return text


@cache
def _integer_parameters(name: str) -> dict[str, str]:
    """The `$params` of sql/<name>.sql that only take whole numbers, each with where it is
    used: a LIMIT or OFFSET, or cast to an integer type."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql.load(name), read="duckdb")
    found: dict[str, str] = {}
    for clause in tree.find_all(exp.Limit, exp.Offset):
        if isinstance(clause.expression, exp.Placeholder):
            found[clause.expression.name] = f"the query's {clause.key.upper()}"
    for cast in tree.find_all(exp.Cast):
        if isinstance(cast.this, exp.Placeholder) and cast.to.is_type(*exp.DataType.INTEGER_TYPES):
            kind = cast.to.sql(dialect="duckdb")
            found.setdefault(cast.this.name, f"the query casts it to {kind}")
    return found


# string literals, quoted identifiers and comments, left to right (the first that starts wins)
_NOT_CODE = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.S)


# what view_text reads a query's text as: a string literal or quoted identifier (kept), a
# comment (dropped), a `$param` (its value written in), left to right
_VIEW_TOKENS = re.compile(
    r"('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")|(--[^\n]*|/\*.*?\*/)|\$([A-Za-z_][A-Za-z0-9_]*)", re.S
)


def view_text(con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, Any]) -> str:
    """sql/<name>.sql (checked as `checked_text` checks it) with each `$param` written as its
    value's SQL literal, as DuckDB writes a constant (`duckdb.ConstantExpression`), and its
    comments left out: the text of a view, which takes no parameters. DuckDB's relation layer
    writes a view over a relation with parameters the same way (`relation.create_view`), but
    only after binding the relation: this text is bound once, by the view itself."""
    import duckdb

    text = checked_text(con, name, params)
    literals = {key: str(duckdb.ConstantExpression(value)) for key, value in params.items()}

    def written(token: re.Match[str]) -> str:
        if token.group(1) is not None:
            return token.group(1)
        if token.group(2) is not None:
            return " "
        return literals[token.group(3)]

    return _VIEW_TOKENS.sub(written, text)


def _may_take_integers(name: str, params: dict[str, Any]) -> bool:
    """Whether any of `params` stands where `_integer_parameters` could find it: right after
    LIMIT, OFFSET or CAST( / TRY_CAST(, or before `::`. A cheap test on the query's code
    (comments and literals removed) that only lets through what the parser must decide."""
    code = _NOT_CODE.sub(" ", sql.load(name))
    return any(
        re.search(
            rf"(?i)(?:\b(?:LIMIT|OFFSET)\s+|\b(?:TRY_)?CAST\s*\(\s*)\${re.escape(key)}\b"
            rf"|\${re.escape(key)}\s*::",
            code,
        )
        for key in params
    )


def _refuse_fractions(name: str, params: Mapping[str, Any]) -> None:
    """Refuse a number with a fraction where the query takes a whole number: DuckDB would
    round it without a word (LIMIT 1.5 returns 2 rows)."""
    fractions = {
        key: value
        for key, value in params.items()
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer())
    }
    if not fractions or not _may_take_integers(name, fractions):
        return  # the usual case: no need to parse the query (sqlglot takes ~0.1 s to load)
    integers = _integer_parameters(name)
    for key, value in sorted(fractions.items()):
        if key in integers:
            raise QueryParameterError(
                f"{name}: a parameter does not fit the query ({key}={value!r}): "
                f"${key} takes an integer ({integers[key]}), got {value!r}"
            )


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


# The engine table a query's whole result is held in while `run`/`run_arrow` read it out.
_RESULT = "gpuledger_query_result"


@contextmanager
def _materialized(
    con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any]
) -> Iterator[duckdb.DuckDBPyRelation]:
    """sql/<name>.sql run once into a temporary engine table, read as a relation, then dropped.

    A relation from `con.sql` is bound when made and bound again when run: on a small lake
    the binding of a mart's query costs more than running it (job_usage: 17 ms of 56). The
    rows keep the query's order (DuckDB preserves insertion order).
    """
    create_table(con, _RESULT, checked_text(con, name, params), params, temporary=True, label=name)
    try:
        yield con.table(_RESULT)
    finally:
        con.execute(f"DROP TABLE IF EXISTS {_RESULT}")


def relation(
    con: duckdb.DuckDBPyConnection, name: str, /, **params: Any
) -> duckdb.DuckDBPyRelation:
    """sql/<name>.sql as a lazy relation, for results too big to hold: stream it to Parquet."""
    return _relation(con, name, params)


@contextmanager
def damaged_files(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Turn DuckDB failing to decode a lake file that `con`'s views read (a damaged data page)
    into DamagedFile naming the file; any other error stays as it is."""
    try:
        yield
    except Exception as exc:
        mapped = as_damaged(exc, con)
        if mapped is exc:
            raise
        raise mapped from exc


def run(con: duckdb.DuckDBPyConnection, name: str, /, **params: Any) -> pl.DataFrame:
    """Execute sql/<name>.sql with `params` bound by name and return the result as polars.

    Raises DamagedFile when a lake file the query reads is damaged inside.
    """
    with _materialized(con, name, params) as result:
        frame: pl.DataFrame = result.pl()
    return frame


def run_arrow(con: duckdb.DuckDBPyConnection, name: str, /, **params: Any) -> pa.Table:
    """Like `run`, but return an Arrow table (what the writer lands)."""
    with _materialized(con, name, params) as result:
        return result.to_arrow_table()


def fetch(
    con: duckdb.DuckDBPyConnection, name: str, /, **params: Any
) -> tuple[list[str], list[dict[str, Any]]]:
    """Like `run`, but the column names and the rows as dicts of Python values, with neither
    polars nor Arrow loaded: for the small results of one-job reads (`gpuledger job`), whose
    start-up time matters. Integers stay int (`run` turns HUGEINT sums into Decimal)."""
    text = checked_text(con, name, params)
    with damaged_files(con), _parameter_errors(name, params):
        cursor = con.execute(parsed(con, text), params or None)  # bound once, rows as values
        columns = [column[0] for column in cursor.description or ()]
        return columns, [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def rows(con: duckdb.DuckDBPyConnection, name: str, /, **params: Any) -> list[dict[str, Any]]:
    """The rows of `fetch`, alone."""
    return fetch(con, name, **params)[1]


def define_view(
    con: duckdb.DuckDBPyConnection, name: str, query: str, *, reused: bool = True
) -> None:
    """Create (or replace) the view `name` as the SQL text `query` (a file of sql/, a query
    built from the contract's names and types, or `view_text`'s: a value is only ever in it
    as the literal DuckDB writes for it). `reused`: whether the same text comes again (it is
    then parsed once per process, `parsed`); a view over a lake's files is not.

    One statement, bound once: `con.sql(query).create_view(name)` binds the query for the
    relation, then again for the view (~2× the cost, paid for every view of every connection).
    """
    if not name.isidentifier():
        raise ValueError(f"not a view name of ours: {name!r}")
    statement = f"CREATE OR REPLACE VIEW {name} AS {query}"
    con.execute(parsed(con, statement) if reused else statement)


def create_table(
    con: duckdb.DuckDBPyConnection,
    table: str,
    select: str,
    params: Mapping[str, Any],
    *,
    temporary: bool = False,
    label: str | None = None,
) -> None:
    """Run `select` (SQL text made of checked_text's files) once into the engine table `table`
    (replaced; `temporary`: in the connection's temp schema), `params` bound by name; errors
    name the query `label` (default: the table).

    Bound once: a relation (`queries.relation(...).filter(...).create(...)`) binds the whole
    query again at every step, which on a small lake costs more than running it. Raises
    DamagedFile when a lake file it reads is damaged inside.
    """
    if not table.isidentifier():
        raise ValueError(f"not a table name of ours: {table!r}")
    kind = "TEMPORARY TABLE" if temporary else "TABLE"
    with damaged_files(con), _parameter_errors(label or table, dict(params)):
        statement = parsed(con, f"CREATE OR REPLACE {kind} {table} AS\n{select}\n")
        con.execute(statement, dict(params) or None)
