"""A Parquet file damaged inside a data page (footer intact) opens fine and fails only when a
query decodes the page: that failure is DamagedFile naming the file, not DuckDB's raw error."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sql
from tests.damage import flip_data_page
from warehouse import queries, writer
from warehouse.connection import connect
from warehouse.damage import as_damaged, intact_cache_info
from warehouse.errors import DamagedFile, QueryParameterError

PROBE = "tests/probe_power"
PROBE_SQL = """\
-- probe_power: the mean power of a cluster's samples.
--
-- Params:
--   $cluster  the cluster

SELECT
    avg(power_w) AS power_w_mean
FROM gpu_samples
WHERE cluster = $cluster
"""
ROWS = 5000


@pytest.fixture
def probe(monkeypatch):
    real = sql.load
    monkeypatch.setattr(sql, "load", lambda name: PROBE_SQL if name == PROBE else real(name))
    return PROBE


def batch(make_samples, day: dt.datetime) -> pa.Table:
    """A day of one GPU's samples whose power readings all differ (pages worth damaging)."""
    table = make_samples([day + dt.timedelta(seconds=10 * k) for k in range(ROWS)])
    power = np.random.default_rng(7).uniform(80.0, 700.0, ROWS).astype(np.float32)
    return table.set_column(table.schema.get_field_index("power_w"), "power_w", pa.array(power))


@pytest.fixture
def damaged_lake(lake, make_samples, t0):
    """Two days of samples; the second day's file is damaged in the middle of power_w's pages."""
    midnight = t0.replace(hour=0)
    writer.write_batch(lake, "gpu_samples", batch(make_samples, midnight), "day1")
    [bad] = writer.write_batch(
        lake, "gpu_samples", batch(make_samples, midnight + dt.timedelta(days=1)), "day2"
    )
    flip_data_page(bad, "power_w")
    return lake, bad


@pytest.mark.parametrize("run", [queries.run, queries.run_arrow])
def test_a_query_decoding_a_damaged_page_names_the_file(damaged_lake, probe, run):
    lake, bad = damaged_lake
    with connect(lake) as con:  # the footer reads: the views are created without complaint
        with pytest.raises(DamagedFile) as info:
            run(con, probe, cluster="della")

    message = str(info.value)
    assert info.value.path == bad
    assert str(bad) in message
    assert "\n" not in message
    assert "move it out of the lake" in message


def test_columns_the_damage_does_not_touch_still_read(damaged_lake):
    lake, _ = damaged_lake
    with connect(lake) as con:
        assert con.sql("SELECT count(*) FROM gpu_samples").fetchall() == [(2 * ROWS,)]


def test_other_query_errors_keep_their_own_type(damaged_lake, probe):
    lake, _ = damaged_lake
    with connect(lake) as con:
        with pytest.raises(QueryParameterError):
            queries.run(con, probe)  # no $cluster: still the parameter error
        # DuckDB's own error with nothing damaged behind it is left as it is
        healthy = duckdb.Error("Parquet file is likely corrupted, dictionary offset out of range")
        with connect(lake.parent / "elsewhere") as other:
            assert as_damaged(healthy, other) is healthy
        missing = duckdb.BinderException('Referenced column "nope" not found')
        assert as_damaged(missing, con) is missing


def test_a_second_look_decodes_no_intact_file_again_until_it_changes(lake, make_samples, t0):
    """The query runner searches the connection's files, the command line's handler then every
    connection's (this test's is the newest, searched first): a file found intact is not
    decoded again until it is rewritten or replaced."""
    midnight = t0.replace(hour=0)
    days = [midnight + dt.timedelta(days=k) for k in range(3)]
    files = [
        writer.write_batch(lake, "gpu_samples", batch(make_samples, d), f"d{k}")[0]
        for k, d in enumerate(days)
    ]
    looks_damaged = duckdb.Error("Parquet file is likely corrupted, dictionary offset out of range")

    def decodes(look: Callable[[], BaseException]) -> tuple[int, BaseException]:
        before = intact_cache_info().decodes
        found = look()
        return intact_cache_info().decodes - before, found

    def by_the_runner() -> BaseException:
        try:
            with queries.damaged_files(con):
                raise looks_damaged
        except Exception as exc:
            return exc
        raise AssertionError("not raised")

    with connect(lake) as con:
        assert decodes(by_the_runner) == (3, looks_damaged)  # each file once; none damaged
        assert decodes(by_the_runner) == (0, looks_damaged)

        # a file landed again (a new file renamed over it) is decoded again, the others not
        writer.write_batch(lake, "gpu_samples", batch(make_samples, days[1]), "d1")
        assert decodes(by_the_runner) == (1, looks_damaged)

        # damaged in place (the same file, its size unchanged, written since): decoded and
        # named by the handler's look, the two files before it skipped
        flip_data_page(files[2], "power_w")
        count, found = decodes(lambda: as_damaged(looks_damaged))
        assert isinstance(found, DamagedFile)
        assert (count, found.path) == (1, files[2])
