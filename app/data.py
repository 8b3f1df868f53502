"""Cached data access for the Streamlit pages: every page gets its frames from here.

Every cached function takes the lake root as its first argument, so two lakes never share a
cache entry (tests run several in one process).
"""

from __future__ import annotations

import datetime as dt

import duckdb
import polars as pl
import streamlit as st

from app.config import lake_root
from warehouse import queries
from warehouse.connection import connect

__all__ = [
    "clusters",
    "lake",
    "occupancy_series",
    "summary",
    "top_jobs",
    "top_users",
    "window_summary",
]

TTL_S = 300


def lake() -> str:
    """The lake this dashboard shows (resolved, so it keys the caches)."""
    return str(lake_root().resolve())


@st.cache_resource(ttl=TTL_S)
def _connection(root: str) -> duckdb.DuckDBPyConnection:
    from pathlib import Path

    return connect(Path(root), require=("job_usage",))


def _run(root: str, name: str, **params: object) -> pl.DataFrame:
    # A DuckDB connection is not thread-safe; each query runs on its own cursor.
    return queries.run(_connection(root).cursor(), name, **params)


@st.cache_data(ttl=TTL_S)
def summary(root: str) -> pl.DataFrame:
    return _run(root, "dashboard/cluster_summary")


def clusters(root: str) -> list[str]:
    return [str(c) for c in summary(root).get_column("cluster").to_list()]


@st.cache_data(ttl=TTL_S)
def occupancy_series(root: str, cluster: str, start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
    return _run(root, "dashboard/occupancy_series", cluster=cluster, start=start, end=end)


@st.cache_data(ttl=TTL_S)
def window_summary(root: str, cluster: str, start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
    return _run(root, "dashboard/cluster_window_summary", cluster=cluster, start=start, end=end)


@st.cache_data(ttl=TTL_S)
def top_users(
    root: str, cluster: str, start: dt.datetime, end: dt.datetime, limit: int
) -> pl.DataFrame:
    return _run(
        root, "dashboard/top_users_by_idle", cluster=cluster, start=start, end=end, limit=limit
    )


@st.cache_data(ttl=TTL_S)
def top_jobs(
    root: str, cluster: str, start: dt.datetime, end: dt.datetime, limit: int
) -> pl.DataFrame:
    return _run(
        root, "dashboard/top_jobs_by_idle", cluster=cluster, start=start, end=end, limit=limit
    )
