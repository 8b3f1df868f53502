"""queries.run: the one runner of shipped SQL checks parameters before DuckDB sees them."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest

import sql
from warehouse import queries
from warehouse.connection import connect
from warehouse.errors import QueryParameterError

PROBE = "tests/probe_between"
PROBE_SQL = """\
-- probe_between: the integers in [$start, $end).
--
-- Params:
--   $start  inclusive
--   $end    exclusive

SELECT
    i
FROM range($start, $end) AS r(i)
"""


@pytest.fixture(scope="module")
def empty_lake(tmp_path_factory):
    """One connection over an empty lake for the module (a `connect` costs 0.1 CPU-s)."""
    with connect(tmp_path_factory.mktemp("empty")) as con:
        yield con


@pytest.fixture
def con(empty_lake):
    """A cursor of its own over the empty lake, in UTC as `connect` sets it: its temporary
    tables are its own, and it sees the lake's views."""
    with empty_lake.cursor() as cursor:
        cursor.execute("SET TimeZone = 'UTC'")  # a session setting: a cursor starts without it
        yield cursor


@pytest.fixture
def probe(monkeypatch):
    """Serve one extra query with two parameters; every other name goes to the real loader."""
    real = sql.load

    def load(name: str) -> str:
        return PROBE_SQL if name == PROBE else real(name)

    monkeypatch.setattr(sql, "load", load)
    return PROBE


@pytest.mark.parametrize(
    ("params", "got"),
    [
        ({"start": 1}, "['start']; missing: end"),  # one missing
        ({"start": 1, "end": 3, "step": 1}, "['end', 'start', 'step']; unknown: step"),  # extra
        ({}, "[]; missing: end, start"),  # none at all
        ({"begin": 1, "end": 3}, "['begin', 'end']; unknown: begin; missing: start"),  # misspelt
    ],
)
def test_wrong_parameters_name_what_was_expected_and_what_came(con, probe, params, got):
    with pytest.raises(QueryParameterError) as info:
        queries.run(con, probe, **params)

    assert str(info.value) == f"{probe}: expects parameters ['end', 'start'], got {got}"


def test_parameters_to_a_query_without_any_are_refused(con):
    with pytest.raises(QueryParameterError) as info:
        queries.run(con, "views/jobs_latest", cluster="della")

    assert str(info.value) == (
        "views/jobs_latest: expects parameters [], got ['cluster']; unknown: cluster"
    )


def test_run_arrow_checks_parameters_too(con, probe):
    with pytest.raises(QueryParameterError, match=r"expects parameters \['end', 'start'\]"):
        queries.run_arrow(con, probe, start=1)


@pytest.mark.parametrize("run", [queries.run, queries.run_arrow])
@pytest.mark.parametrize(
    ("params", "fragment"), [({"start": "one", "end": 4}, "'one'"), ({"start": 1, "end": ""}, "''")]
)
def test_a_parameter_of_the_wrong_type_is_a_parameter_error_naming_it(
    con, probe, run, params, fragment
):
    with pytest.raises(QueryParameterError) as info:
        run(con, probe, **params)

    message = str(info.value)
    assert message.startswith(f"{probe}: ")
    assert fragment in message
    assert "\n" not in message


def test_right_parameters_return_polars_and_arrow(con, probe):
    frame = queries.run(con, probe, start=1, end=4)
    table = queries.run_arrow(con, probe, start=1, end=4)

    assert isinstance(frame, pl.DataFrame)
    assert frame["i"].to_list() == [1, 2, 3]
    assert isinstance(table, pa.Table)
    assert table.column("i").to_pylist() == [1, 2, 3]
    assert queries.parameters(con, probe) == {"start", "end"}


def test_a_query_without_parameters_runs_on_an_empty_lake(con):
    frame = queries.run(con, "views/jobs_latest")

    assert frame.height == 0
    assert "updated_ts" in frame.columns


def test_an_unknown_query_is_refused(con):
    with pytest.raises(sql.UnknownQuery, match=r"No SQL file named 'views/nope'"):
        queries.run(con, "views/nope")


def test_a_query_error_that_is_not_about_a_value_given_keeps_its_own_type(con, monkeypatch):
    """A mart built before a column existed is the caller's to handle (the Fairness page
    says so), not "a parameter does not fit"."""
    import duckdb

    real = sql.load
    text = "SELECT no_such_column FROM range($start, $end) AS r(i)"
    monkeypatch.setattr(sql, "load", lambda name: text if name == PROBE else real(name))
    with pytest.raises(duckdb.BinderException):
        queries.run(con, PROBE, start=1, end=4)


WHOLE = "tests/probe_whole"
WHOLE_SQL = """\
-- probe_whole: $n integers from $first, skipping $skip, each plus $step.
--
-- Params:
--   $first  where the range starts (cast to an integer)
--   $step   added to each (any number)
--   $n      how many (LIMIT)
--   $skip   how many to skip (OFFSET)

SELECT
    i + $step AS v
FROM range(CAST($first AS BIGINT), 100) AS r(i)
ORDER BY i
LIMIT $n
OFFSET $skip
"""


@pytest.fixture
def whole(monkeypatch):
    real = sql.load
    monkeypatch.setattr(sql, "load", lambda name: WHOLE_SQL if name == WHOLE else real(name))
    return WHOLE


@pytest.mark.parametrize("run", [queries.run, queries.run_arrow])
@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"n": 1.5}, "$n takes an integer (the query's LIMIT), got 1.5"),
        ({"skip": 0.25}, "$skip takes an integer (the query's OFFSET), got 0.25"),
        ({"first": 2.5}, "$first takes an integer (the query casts it to BIGINT), got 2.5"),
        ({"n": float("inf")}, "$n takes an integer (the query's LIMIT), got inf"),
    ],
)
def test_a_fraction_where_the_query_takes_an_integer_is_refused_not_rounded(
    con, whole, run, params, fragment
):
    given = {"first": 0, "step": 0, "n": 2, "skip": 0} | params
    with pytest.raises(QueryParameterError) as info:
        run(con, whole, **given)

    message = str(info.value)
    assert message.startswith(f"{whole}: a parameter does not fit the query (")
    assert message.endswith(fragment)
    assert "\n" not in message


def test_whole_floats_and_fractions_elsewhere_are_taken(con, whole):
    frame = queries.run(con, whole, first=3.0, step=0.5, n=2.0, skip=1)

    assert frame["v"].to_list() == [4.5, 5.5]


def test_fetch_returns_the_columns_and_plain_rows(con, probe):
    columns, rows = queries.fetch(con, probe, start=1, end=3)

    assert columns == ["i"]
    assert rows == [{"i": 1}, {"i": 2}]
    assert queries.rows(con, probe, start=5, end=5) == []
    with pytest.raises(QueryParameterError):
        queries.rows(con, probe, start=1)


def test_fetch_refuses_a_fraction_where_the_query_takes_an_integer(con, whole):
    with pytest.raises(QueryParameterError, match=r"\$n takes an integer"):
        queries.fetch(con, whole, first=0, step=0, n=1.5, skip=0)


@pytest.mark.parametrize("name", sql.names())
def test_the_cheap_test_lets_through_every_integer_parameter_the_parser_finds(name):
    """The text test before parsing (sqlglot) never skips a parameter the parser would find."""
    for key in queries._integer_parameters(name):
        assert queries._may_take_integers(name, {key: 0.5}), (name, key)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 1 LIMIT $k",
        "SELECT 1 OFFSET\n  $k",
        "SELECT CAST( $k AS INTEGER)",
        "SELECT try_cast($k AS BIGINT)",
        "SELECT $k :: INTEGER",
    ],
)
def test_the_cheap_test_sees_the_places_an_integer_goes(monkeypatch, text):
    monkeypatch.setattr(sql, "load", lambda name: text)
    assert queries._may_take_integers("q", {"k": 0.5})


def test_the_cheap_test_skips_comments_and_literals(monkeypatch):
    text = "-- LIMIT $k\nSELECT 'CAST($k' AS a, \"$k::int\" /* OFFSET $k */ WHERE x < $k"
    monkeypatch.setattr(sql, "load", lambda name: text)
    assert not queries._may_take_integers("q", {"k": 0.5})


ORDERED = "tests/probe_ordered"
ORDERED_SQL = """\
-- probe_ordered: the integers in [0, $n), largest first.
--
-- Params:
--   $n  how many

SELECT i FROM range($n) AS r(i) ORDER BY i DESC
"""


@pytest.fixture
def ordered(monkeypatch):
    real = sql.load
    monkeypatch.setattr(sql, "load", lambda name: ORDERED_SQL if name == ORDERED else real(name))
    return ORDERED


def test_run_keeps_the_querys_order_and_leaves_no_table_behind(con, ordered):
    # run and run_arrow hold the result in a temporary engine table while they read it out
    frame = queries.run(con, ordered, n=50_000)
    table = queries.run_arrow(con, ordered, n=50_000)

    assert frame["i"].to_list() == list(range(49_999, -1, -1))
    assert table.column("i").to_pylist() == list(range(49_999, -1, -1))
    assert con.sql("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchall() == [(0,)]


def test_cursors_of_one_connection_each_get_their_own_result(con, ordered):
    # the dashboard and the API read through one cursor per thread of one connection
    first, second = con.cursor(), con.cursor()
    queries.create_table(first, "held", "SELECT 1 AS x", {}, temporary=True)

    assert queries.run(second, ordered, n=3)["i"].to_list() == [2, 1, 0]
    assert first.sql("SELECT x FROM held").fetchall() == [(1,)]


def test_define_view_and_create_table_take_only_names_of_ours(con):
    queries.define_view(con, "probe_view", "SELECT 42 AS answer")
    queries.create_table(
        con, "probe_table", "SELECT answer + $more AS total FROM probe_view", {"more": 1}
    )

    assert con.sql("SELECT total FROM probe_table").fetchall() == [(43,)]
    for bad in ("x; DROP TABLE jobs", 'a"b', "two words"):
        with pytest.raises(ValueError, match="not a"):
            queries.define_view(con, bad, "SELECT 1")
        with pytest.raises(ValueError, match="not a"):
            queries.create_table(con, bad, "SELECT 1", {})


def test_create_table_names_the_query_whose_parameter_does_not_fit(con, probe):
    text = queries.checked_text(con, probe, {"start": "one", "end": 4})

    with pytest.raises(QueryParameterError, match=f"^{probe}: .*'one'"):
        queries.create_table(con, "t", text, {"start": "one", "end": 4}, label=probe)
