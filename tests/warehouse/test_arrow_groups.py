"""warehouse/arrow_groups.py gives what Acero's `group_by` and `join` give (the summary state
groups its index with it, so that `gpuledger attribute` loads no pandas)."""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from warehouse.arrow_groups import distinct_by_cluster, max_by_cluster_date, pairs, semi_join

CLUSTERS = st.sampled_from(["alpha", "beta", "gamma"])
DAYS = st.integers(0, 4).map(lambda n: dt.date(2026, 3, 1) + dt.timedelta(days=n))
JOBS = st.one_of(st.none(), st.sampled_from(["1", "2", "10", "x"]))
ENDS = st.one_of(st.none(), st.floats(0, 1e9, allow_nan=False))

ROWS = st.lists(st.tuples(CLUSTERS, DAYS, JOBS, ENDS), max_size=40)


def index(rows: list[tuple[str, dt.date, str | None, float | None]]) -> pa.Table:
    return pa.table(
        {
            "cluster": pa.array([r[0] for r in rows], pa.string()),
            "date": pa.array([r[1] for r in rows], pa.date32()),
            "job_id": pa.array([r[2] for r in rows], pa.string()),
            "last_end_e": pa.array([r[3] for r in rows], pa.float64()),
        }
    )


def as_set(table: pa.Table) -> set[tuple[object, ...]]:
    return set(zip(*(c.to_pylist() for c in table.columns), strict=True))


@given(ROWS)
def test_distinct_pairs_are_those_of_a_group_by(rows):
    table = index(rows)
    for column in ("date", "job_id"):
        expected = table.group_by(["cluster", column]).aggregate([])
        got = distinct_by_cluster(table, column)

        assert got.schema == table.select(["cluster", column]).schema
        assert got.num_rows == expected.num_rows
        assert as_set(got) == as_set(expected.select(["cluster", column]))
        assert set(pairs(table, column)) == as_set(expected.select(["cluster", column]))


@given(ROWS)
def test_the_max_per_cluster_and_day_is_that_of_a_group_by(rows):
    table = index(rows)
    expected = table.group_by(["cluster", "date"]).aggregate([("last_end_e", "max")])

    got = max_by_cluster_date(table, "last_end_e")

    assert len(got) == expected.num_rows
    want = as_set(expected.select(["cluster", "date", "last_end_e_max"]))
    assert {(c, d, m) for c, d, m in got} == want
    assert all(m is None or not math.isnan(m) for _, _, m in got)


@given(ROWS, ROWS)
def test_a_semi_join_keeps_the_rows_a_join_keeps(rows, keys):
    table = index(rows)
    wanted = index(keys).select(["cluster", "job_id"])
    expected = table.join(wanted, ["cluster", "job_id"], join_type="left semi")

    got = semi_join(table, wanted, "job_id")

    assert sorted(got.to_pylist(), key=repr) == sorted(expected.to_pylist(), key=repr)
