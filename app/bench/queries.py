"""The `dashboard` scenario of `gpuledger bench`: every dashboard and report query, timed.

Whatever files exist under sql/dashboard/ and sql/report*/ are run, with parameters from one
table of defaults (the whole span of the data, the busiest job and user, no filters), except
where a page passes others (`PAGE_PARAMS`). A query
that fails (a table not built on the bench lake, a parameter not in the table) is reported
with its error instead of a time; it never stops the bench.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Any

import sql
from warehouse import queries
from warehouse.errors import WarehouseError

if TYPE_CHECKING:
    import duckdb

__all__ = ["DASHBOARD_PREFIXES", "dashboard_defaults", "dashboard_queries", "time_queries"]

DASHBOARD_PREFIXES = ("dashboard/", "report")
QUERY_BUDGET_S = 1.0  # the acceptance: every dashboard query within a second
# where a page runs a query with other values than the defaults: the alerts page's feed lists
# every finding (the busiest job's own findings, often none, are the Job page's)
PAGE_PARAMS: dict[str, dict[str, Any]] = {"dashboard/findings_feed": {"job_id": None}}


def dashboard_queries() -> list[str]:
    """The names of every shipped dashboard and report query."""
    return [name for name in sql.names() if name.startswith(DASHBOARD_PREFIXES)]


def dashboard_defaults(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The parameter values every dashboard query is timed with, read from the lake's marts."""
    [(cluster, first, last)] = con.sql(
        "SELECT cluster, min(bucket), max(bucket) FROM cluster_occupancy "
        "GROUP BY cluster ORDER BY count(*) DESC LIMIT 1"
    ).fetchall()
    [(job_id, user)] = con.sql(
        "SELECT job_id, user FROM job_usage ORDER BY alloc_gpu_h DESC NULLS LAST LIMIT 1"
    ).fetchall()
    end = last + dt.timedelta(minutes=5)
    monday = (first - dt.timedelta(days=first.weekday())).date()
    week_start = dt.datetime.combine(monday, dt.time(), dt.UTC)
    return {
        "cluster": cluster,
        "start": first,
        "end": end,
        "bucket_s": 300,
        "limit": 20,
        "job_id": job_id,
        "user": user,
        "viewer": None,
        "needle": "",
        "users": [],
        "accounts": [],
        "partitions": [],
        "states": [],
        "severities": [],
        "subject_kinds": [],
        "drain_score": 0.5,
        "half_life_s": 7 * 86400,
        "min_idle_gpu_h": 1.0,
        "week_start_e": week_start.timestamp(),
        "week_end_e": (week_start + dt.timedelta(days=7)).timestamp(),
        "first_week": monday,
        "last_week": monday,
        "as_of_e": end.timestamp(),
    }


def time_queries(con: duckdb.DuckDBPyConnection, runs: int = 2) -> list[dict[str, Any]]:
    """Each dashboard query's best time of `runs`, its rows, or the error that stopped it."""
    import duckdb

    defaults = dashboard_defaults(con)
    results: list[dict[str, Any]] = []
    for name in dashboard_queries():
        wanted = queries.parameters(con, name)
        missing = sorted(wanted - set(defaults))
        if missing:
            results.append({"query": name, "error": f"no default for {missing!r}"})
            continue
        params = {k: defaults[k] for k in wanted} | PAGE_PARAMS.get(name, {})
        best, rows = float("inf"), 0
        try:
            for _ in range(runs):
                start = time.perf_counter()
                rows = queries.run_arrow(con, name, **params).num_rows
                best = min(best, time.perf_counter() - start)
        except (duckdb.Error, WarehouseError) as exc:
            results.append({"query": name, "error": str(exc).splitlines()[0]})
            continue
        results.append(
            {"query": name, "seconds": best, "rows": rows, "within_budget": best <= QUERY_BUDGET_S}
        )
    return results
