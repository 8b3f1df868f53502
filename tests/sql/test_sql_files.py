"""Every shipped SQL file is one statement, documents its parameters, and is used somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

import sql

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("collector", "warehouse", "detectors", "app")
HEADER_PARAM = re.compile(r"^--\s+\$([A-Za-z_][A-Za-z0-9_]*)\b")


def header(text: str) -> list[str]:
    """The comment lines before the first line of SQL."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line)
    return lines


@pytest.fixture(scope="module")
def con():
    with duckdb.connect() as con:
        yield con


@pytest.fixture(scope="module")
def package_sources() -> str:
    return "\n".join(
        path.read_text(encoding="utf-8")
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
    )


def test_there_are_queries():
    assert "views/jobs_latest" in sql.names()
    assert list(sql.names()) == sorted(set(sql.names()))


@pytest.mark.parametrize("name", sql.names())
def test_each_file_holds_exactly_one_statement(con, name):
    statements = con.extract_statements(sql.load(name))

    assert len(statements) == 1, f"{name}: {len(statements)} statements"


@pytest.mark.parametrize("name", sql.names())
def test_header_names_the_file(name):
    lines = header(sql.load(name))
    basename = name.rsplit("/", 1)[-1]

    assert lines, f"{name}: no header comment"
    assert lines[0].startswith(f"-- {basename}: "), lines[0]


@pytest.mark.parametrize("name", sql.names())
def test_header_documents_exactly_the_statements_parameters(con, name):
    text = sql.load(name)
    documented = {m.group(1) for line in header(text) if (m := HEADER_PARAM.match(line))}
    [statement] = con.extract_statements(text)

    assert documented == set(statement.named_parameters)


@pytest.mark.parametrize("name", sql.names())
def test_no_orphans_every_query_is_named_in_the_packages(package_sources, name):
    assert f'"{name}"' in package_sources or f"'{name}'" in package_sources, (
        f"sql/{name}.sql is not used by any module of {', '.join(PACKAGES)}"
    )


def test_header_parsing_sees_params_only_in_the_header():
    text = "-- q: x.\n-- Params:\n--   $a  first\n--   $b_2 second\n\nSELECT $a -- $c\n"

    documented = {m.group(1) for line in header(text) if (m := HEADER_PARAM.match(line))}

    assert documented == {"a", "b_2"}


def test_an_unknown_name_is_refused_listing_the_known_ones():
    with pytest.raises(sql.UnknownQuery) as info:
        sql.load("nope")

    message = str(info.value)
    assert message.startswith("No SQL file named 'nope'; known: ")
    assert all(name in message for name in sql.names())
    assert isinstance(info.value, LookupError)
    assert not isinstance(info.value, KeyError)  # KeyError would wrap the message in quotes
