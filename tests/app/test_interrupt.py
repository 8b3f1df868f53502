"""Ctrl-C inside a DuckDB query ends a command as Ctrl-C anywhere else does: "Aborted!", no
traceback (the bench's long steps are queries: a SIGINT there ended in 50 lines of traceback)."""

from __future__ import annotations

import threading
from pathlib import Path

import click
import duckdb
import pytest
from click.testing import CliRunner

from app.errors import reports_errors

LONG = "SELECT sum(a.range * b.range) FROM range(100000000) a, range(1000) b"


def interrupting(con: duckdb.DuckDBPyConnection) -> threading.Timer:
    """What Ctrl-C does to a running query: the engine is told to stop (as its SIGINT
    handler does), a moment after the query starts."""
    timer = threading.Timer(0.3, con.interrupt)
    timer.start()
    return timer


@pytest.mark.parametrize("how", ["execute", "relation"])
def test_a_query_stopped_by_ctrl_c_is_aborted_without_a_traceback(tmp_path: Path, how: str) -> None:
    @click.command()
    @reports_errors
    def long_query() -> None:
        con = duckdb.connect()
        timer = interrupting(con)
        try:
            if how == "execute":
                con.execute(LONG).fetchall()
            else:  # the relation API raises RuntimeError("Query interrupted")
                con.sql(LONG).write_parquet(str(tmp_path / "out.parquet"))
        finally:
            timer.cancel()

    result = CliRunner().invoke(long_query, [])
    assert result.exit_code == 1, result.output
    assert "Aborted!" in result.output
    assert "Traceback" not in result.output and "interrupted" not in result.output


def test_another_runtime_error_is_not_taken_for_ctrl_c() -> None:
    @click.command()
    @reports_errors
    def broken() -> None:
        raise RuntimeError("something else")

    result = CliRunner().invoke(broken, [])
    assert isinstance(result.exception, RuntimeError)
