"""Cached data access for the Streamlit pages: every page gets its frames from here.

Every cached function takes the lake root as its first argument, so two lakes never share a
cache entry (tests run several in one process). Every filter a page offers arrives here as a
value and reaches SQL as a bound `$param`; free text is lower-cased into `$needle` and matched
with contains(), so it is never part of the SQL text. `viewer` is the signed-in non-manager
whose jobs alone may be shown, or None for everyone's (app.access).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import duckdb
import polars as pl
import streamlit as st

from app.config import lake_root
from app.errors import AppError
from detectors.job_advice import Advice
from detectors.job_report import UnknownJob, load_job_advice, load_job_diagnosis
from warehouse import queries
from warehouse.errors import EmptyWarehouse
from warehouse.lake import Lake
from warehouse.one_job import job_engine

T = TypeVar("T")

__all__ = [
    "FAIRNESS_TABLE",
    "FairnessUnavailable",
    "account_leaderboard",
    "clear_caches",
    "clusters",
    "efficiency_histogram",
    "extent",
    "failure_risk_by_node",
    "fairness_jain_weekly",
    "fairness_shares",
    "findings",
    "gpu_event_log",
    "gpu_events_daily",
    "gpu_health",
    "has_fairness",
    "job_advice",
    "job_detail",
    "job_diagnosis",
    "job_facets",
    "job_gpu_timeline",
    "job_table",
    "lake",
    "needle",
    "node_health",
    "occupancy_series",
    "recommendations",
    "user_daily_usage",
    "user_leaderboard",
    "window_co2e",
    "window_summary",
]

TTL_S = 300
# The weekly fairness mart (DESIGN §4.1), built by `gpuledger attribute`.
FAIRNESS_TABLE = "fairness_weekly"


class FairnessUnavailable(AppError):
    """The fairness mart exists but cannot be read as the Fairness page expects."""


def lake() -> str:
    """The lake this dashboard shows (resolved, so it keys the caches)."""
    return str(lake_root().resolve())


def needle(text: str | None) -> str:
    """Free text from a search box as the `$needle` the queries match with contains()."""
    return (text or "").strip().lower()


def clear_caches() -> None:
    """Forget every cached frame and connection (the timing harness measures cold pages)."""
    st.cache_data.clear()
    st.cache_resource.clear()


@st.cache_resource(ttl=TTL_S)
def _connection(root: str) -> duckdb.DuckDBPyConnection:
    # every table, the fairness mart too, is a view `connect` registers over the lake's files:
    # a file damaged inside is DamagedFile naming it when a query decodes it (warehouse.damage).
    # Built marts are jobs (job_usage) or, before any scheduler record, the telemetry's
    # occupancy: such a lake has its GPUs' hours and health to show, and was told to run the
    # `attribute` it had run. A lake with neither is told what to run.
    lake = Lake.at(root)
    try:
        return lake.connect(require=("job_usage",))
    except EmptyWarehouse as no_jobs:
        try:
            return lake.connect(require=("cluster_occupancy",))
        except EmptyWarehouse:
            raise no_jobs from None


def _on_lake(root: str, read: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
    """`read` on a cursor of the lake's connection (a DuckDB connection is not thread-safe;
    each read gets its own cursor). The views name the files the lake had when they were
    opened; a collector, compaction or `gpuledger attribute` may have replaced some since, so
    on DuckDB's IOException the lake is reopened once. A file damaged inside is DamagedFile
    naming it (the cursor's views are the connection's)."""
    try:
        con = _connection(root)
        with queries.damaged_files(con):
            return read(con.cursor())
    except duckdb.IOException:
        _connection.clear()
        con = _connection(root)
        with queries.damaged_files(con):
            return read(con.cursor())


def _on_job(
    root: str, cluster: str, job_id: str, read: Callable[[duckdb.DuckDBPyConnection], T]
) -> T:
    """`read` on an engine over the files of the job's cluster and days alone
    (warehouse/one_job.py), as `gpuledger job` reads them: through the lake's connection the
    bottleneck's owner rule would run over every sample of the lake (5–6 s a job on a
    simulated week of 1,024 GPUs). UnknownJob also when the lake has no jobs yet; a file
    damaged inside is DamagedFile naming it."""
    try:
        with job_engine(Path(root), job_id, cluster) as con:
            return read(con)
    except EmptyWarehouse:
        raise UnknownJob(f"No job {job_id!r} in the lake") from None


def _run(root: str, name: str, **params: object) -> pl.DataFrame:
    return _on_lake(root, lambda con: queries.run(con, name, **params))


# ---------------------------------------------------------------- cluster and overview


@st.cache_data(ttl=TTL_S)
def extent(root: str) -> pl.DataFrame:
    """One row per cluster: data_start, data_end (start of the last bucket), gpus_total."""
    return _run(root, "dashboard/cluster_extent")


def clusters(root: str) -> list[str]:
    return [str(c) for c in extent(root).get_column("cluster").to_list()]


@st.cache_data(ttl=TTL_S)
def occupancy_series(root: str, cluster: str, start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
    return _run(root, "dashboard/occupancy_series", cluster=cluster, start=start, end=end)


@st.cache_data(ttl=TTL_S)
def window_summary(root: str, cluster: str, start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
    return _run(root, "dashboard/cluster_window_summary", cluster=cluster, start=start, end=end)


@st.cache_data(ttl=TTL_S)
def window_co2e(root: str, cluster: str, start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
    """The kg CO2e of the cluster's jobs on the UTC days the window touches (one row)."""
    return _run(root, "dashboard/window_co2e", cluster=cluster, start=start, end=end)


# ---------------------------------------------------------------- jobs


@st.cache_data(ttl=TTL_S)
def job_table(
    root: str,
    cluster: str,
    start: dt.datetime,
    end: dt.datetime,
    viewer: str | None,
    *,
    search: str = "",
    users: tuple[str, ...] = (),
    accounts: tuple[str, ...] = (),
    partitions: tuple[str, ...] = (),
    states: tuple[str, ...] = (),
    min_idle_gpu_h: float = 0.0,
    limit: int = 5000,
) -> pl.DataFrame:
    return _run(
        root,
        "dashboard/job_table",
        cluster=cluster,
        start=start,
        end=end,
        viewer=viewer,
        needle=needle(search),
        users=list(users),
        accounts=list(accounts),
        partitions=list(partitions),
        states=list(states),
        min_idle_gpu_h=min_idle_gpu_h,
        limit=limit,
    )


@st.cache_data(ttl=TTL_S)
def job_facets(
    root: str, cluster: str, start: dt.datetime, end: dt.datetime, viewer: str | None
) -> dict[str, list[str]]:
    """The values each job filter offers: {'user': [...], 'account': [...], ...}."""
    rows = _run(root, "dashboard/job_facets", cluster=cluster, start=start, end=end, viewer=viewer)
    return {
        facet: rows.filter(pl.col("facet") == facet).get_column("value").to_list()
        for facet in ("user", "account", "partition", "state")
    }


@st.cache_data(ttl=TTL_S)
def job_detail(root: str, cluster: str, job_id: str, viewer: str | None) -> pl.DataFrame:
    return _run(root, "dashboard/job_detail", cluster=cluster, job_id=job_id, viewer=viewer)


@st.cache_data(ttl=TTL_S)
def job_advice(root: str, cluster: str, job_id: str) -> list[Advice]:
    """What to change next time: the advice `gpuledger job` gives, from the same engine."""
    try:
        return _on_job(root, cluster, job_id, lambda con: load_job_advice(con, job_id, cluster))
    except UnknownJob:
        return []


@st.cache_data(ttl=TTL_S)
def job_diagnosis(root: str, cluster: str, job_id: str) -> dict[str, object]:
    """The job's bottleneck (`diagnosis`, `advice` and the signals behind them): what
    `gpuledger job` prints under Bottleneck, from the same function; {} for an unknown job."""
    try:
        return _on_job(root, cluster, job_id, lambda con: load_job_diagnosis(con, job_id, cluster))
    except UnknownJob:
        return {}


@st.cache_data(ttl=TTL_S)
def job_gpu_timeline(root: str, cluster: str, job_id: str) -> pl.DataFrame:
    return _run(root, "dashboard/job_gpu_timeline", cluster=cluster, job_id=job_id)


# ---------------------------------------------------------------- users and accounts


@st.cache_data(ttl=TTL_S)
def user_leaderboard(
    root: str,
    cluster: str,
    start: dt.datetime,
    end: dt.datetime,
    viewer: str | None,
    search: str = "",
) -> pl.DataFrame:
    return _run(
        root,
        "dashboard/user_leaderboard",
        cluster=cluster,
        start=start,
        end=end,
        viewer=viewer,
        needle=needle(search),
    )


@st.cache_data(ttl=TTL_S)
def account_leaderboard(
    root: str, cluster: str, start: dt.datetime, end: dt.datetime, viewer: str | None
) -> pl.DataFrame:
    return _run(
        root, "dashboard/account_leaderboard", cluster=cluster, start=start, end=end, viewer=viewer
    )


@st.cache_data(ttl=TTL_S)
def efficiency_histogram(
    root: str, cluster: str, start: dt.datetime, end: dt.datetime, viewer: str | None
) -> pl.DataFrame:
    return _run(
        root,
        "dashboard/efficiency_histogram",
        cluster=cluster,
        start=start,
        end=end,
        viewer=viewer,
    )


@st.cache_data(ttl=TTL_S)
def user_daily_usage(
    root: str, cluster: str, user: str, start: dt.datetime, end: dt.datetime
) -> pl.DataFrame:
    return _run(
        root, "dashboard/user_daily_usage", cluster=cluster, user=user, start=start, end=end
    )


# ---------------------------------------------------------------- fairness


def has_fairness(root: str) -> bool:
    """Whether the lake can answer fairness questions (the weekly mart is there)."""
    con = _connection(root)
    known = con.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    return FAIRNESS_TABLE in {str(name) for (name,) in known}


def _run_fairness(root: str, name: str, **params: object) -> pl.DataFrame:
    try:
        return _run(root, name, **params)
    except duckdb.BinderException as exc:
        raise FairnessUnavailable(
            f"The {FAIRNESS_TABLE} mart does not have the columns the Fairness page reads "
            f"(sql/{name}.sql): {str(exc).splitlines()[0]}"
        ) from exc


@st.cache_data(ttl=TTL_S)
def fairness_shares(
    root: str, cluster: str, start: dt.datetime, end: dt.datetime, viewer: str | None
) -> pl.DataFrame:
    return _run_fairness(
        root, "dashboard/fairness_shares", cluster=cluster, start=start, end=end, viewer=viewer
    )


@st.cache_data(ttl=TTL_S)
def fairness_jain_weekly(
    root: str, cluster: str, start: dt.datetime, end: dt.datetime
) -> pl.DataFrame:
    return _run_fairness(
        root, "dashboard/fairness_jain_weekly", cluster=cluster, start=start, end=end
    )


# ---------------------------------------------------------------- health


@st.cache_data(ttl=TTL_S)
def gpu_health(
    root: str, cluster: str, start: dt.datetime, end: dt.datetime, search: str = ""
) -> pl.DataFrame:
    return _run(
        root,
        "dashboard/gpu_health",
        cluster=cluster,
        start=start,
        end=end,
        needle=needle(search),
    )


def node_health(gpus: pl.DataFrame) -> pl.DataFrame:
    """Roll the per-GPU health rows (gpu_health) up to their nodes, worst first."""
    counts = ["xids", "fatal_xids", "ecc_dbe", "row_remap_failures", "throttle_events"]
    return (
        gpus.group_by("node")
        .agg(
            pl.len().alias("gpus_with_events"),
            *[pl.col(c).sum() for c in counts],
            pl.col("offline_events").sum(),
            pl.col("last_event_ts").max(),
        )
        .sort(
            ["fatal_xids", "ecc_dbe", "row_remap_failures", "xids", "node"],
            descending=[True, True, True, True, False],
        )
    )


@st.cache_data(ttl=TTL_S)
def gpu_events_daily(root: str, cluster: str, start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
    return _run(root, "dashboard/gpu_events_daily", cluster=cluster, start=start, end=end)


@st.cache_data(ttl=TTL_S)
def gpu_event_log(
    root: str,
    cluster: str,
    start: dt.datetime,
    end: dt.datetime,
    search: str = "",
    limit: int = 1000,
) -> pl.DataFrame:
    return _run(
        root,
        "dashboard/gpu_event_log",
        cluster=cluster,
        start=start,
        end=end,
        needle=needle(search),
        limit=limit,
    )


@st.cache_data(ttl=TTL_S)
def failure_risk_by_node(
    root: str, cluster: str, start: dt.datetime, end: dt.datetime, drain_score: float
) -> pl.DataFrame:
    return _run(
        root,
        "dashboard/failure_risk_by_node",
        cluster=cluster,
        start=start,
        end=end,
        drain_score=drain_score,
    )


# ---------------------------------------------------------------- findings and recommendations


@st.cache_data(ttl=TTL_S)
def findings(
    root: str,
    cluster: str,
    start: dt.datetime,
    end: dt.datetime,
    viewer: str | None,
    *,
    search: str = "",
    severities: tuple[str, ...] = (),
    subject_kinds: tuple[str, ...] = (),
    job_id: str | None = None,
    limit: int = 2000,
) -> pl.DataFrame:
    return _run(
        root,
        "dashboard/findings_feed",
        cluster=cluster,
        start=start,
        end=end,
        viewer=viewer,
        needle=needle(search),
        severities=list(severities),
        subject_kinds=list(subject_kinds),
        job_id=job_id,
        limit=limit,
    )


@st.cache_data(ttl=TTL_S)
def recommendations(root: str, cluster: str, search: str = "") -> pl.DataFrame:
    return _run(root, "dashboard/recommendation_list", cluster=cluster, needle=needle(search))
