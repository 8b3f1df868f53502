"""Cached data access for the Streamlit pages: every page gets its frames from here."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import polars as pl
import streamlit as st

from app.config import lake_root
from warehouse import queries
from warehouse.connection import connect

__all__ = [
    "clusters",
    "connection",
    "lake",
    "occupancy_series",
    "summary",
    "top_jobs",
    "top_users",
]

TTL_S = 300


@st.cache_resource
def lake() -> Path:
    return lake_root()


@st.cache_resource(ttl=TTL_S)
def connection(root: Path) -> duckdb.DuckDBPyConnection:
    """One read-only-by-convention connection per lake; pages never mutate it."""
    return connect(root, require=("job_usage",))


def _run(name: str, **params: object) -> pl.DataFrame:
    # DuckDB connections are not thread-safe; each query runs on its own cursor.
    return queries.run(connection(lake()).cursor(), name, **params)


@st.cache_data(ttl=TTL_S)
def summary() -> pl.DataFrame:
    return _run("dashboard/cluster_summary")


def clusters() -> list[str]:
    return [str(c) for c in summary().get_column("cluster").to_list()]


@st.cache_data(ttl=TTL_S)
def occupancy_series(cluster: str, start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
    return _run("dashboard/occupancy_series", cluster=cluster, start=start, end=end)


@st.cache_data(ttl=TTL_S)
def top_users(cluster: str, limit: int) -> pl.DataFrame:
    return _run("dashboard/top_users_by_idle", cluster=cluster, limit=limit)


@st.cache_data(ttl=TTL_S)
def top_jobs(cluster: str, limit: int) -> pl.DataFrame:
    return _run("dashboard/top_jobs_by_idle", cluster=cluster, limit=limit)
