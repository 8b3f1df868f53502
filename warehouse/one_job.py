"""A DuckDB over the part of the lake that one job's report reads: its cluster and its days.

`gpuledger job JOBID` is typed by users and must answer at once, whatever the lake's size.
`connect` (warehouse.connection) opens a view over every file of every table; this opens
views over the job's cluster only (every table is partitioned by cluster), and for the tables
partitioned by day that the report reads per sample (gpu_samples, job_gpu_daily,
gpu_job_buckets) over the days from the job's first start to its last end only
(sql/jobs/job_span.sql), a day's margin on each side. The views have the contract's columns,
as `connect`'s do, so the same queries give the same rows: only files that cannot hold the
job's rows are left out. Files outside the layout's `cluster=`/`date=` folders are kept.

The samples whose owners the bottleneck signals decide (unowned_samples) are further only
those on the nodes of the job's allocations within its span (sql/jobs/job_samples.sql): an
owner is decided among the allocations on the sample's own node that cover its instant, so the
other samples cannot be the job's, and the Parquet reader skips the row groups of other nodes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sql
from warehouse import layout, queries
from warehouse.connection import (
    DERIVED_VIEWS,
    WarehouseConfig,
    open_engine,
    register_files,
    register_reference,
)
from warehouse.errors import EmptyWarehouse

if TYPE_CHECKING:
    import duckdb

__all__ = ["DAY_MARGIN", "connect_job", "job_engine"]

# the tables read whole for the job's cluster, and those read for its days only
_BY_CLUSTER = ("jobs", "job_gpus", "job_usage", "job_outcomes", "findings")
_BY_DAY = ("gpu_samples", "job_gpu_daily", "gpu_job_buckets")
DAY_MARGIN = dt.timedelta(days=1)


def _in_clusters(path: Path, folders: set[str]) -> bool:
    """Whether `path` may hold rows of a cluster whose folder is one of `folders`."""
    named = layout.folder_cluster(path)
    return named is None or named in folders


def _in_days(path: Path, first: dt.date | None, last: dt.date | None) -> bool:
    """Whether `path` may hold rows of the days from `first` to `last` (None: unbounded)."""
    key = layout.partition_key(path)
    if key is None:
        return True
    day = key[1]
    return (first is None or day >= first) and (last is None or day <= last)


def _folders(clusters: Iterable[str]) -> set[str]:
    """The folder names a cluster's files may sit in: its own name (a hive writer's, decoded)
    and the lake's safe form of it."""
    return {f for c in clusters for f in (c, layout.safe_name(c))}


def _days(spans: list[dict[str, Any]]) -> tuple[dt.date | None, dt.date | None]:
    """The first and last day whose files may hold samples of the job (None: unbounded),
    from its spans (sql/jobs/job_span.sql) widened by DAY_MARGIN."""
    starts = [row["first_ts"] for row in spans]
    ends = [row["last_ts"] for row in spans if not row["open"]]
    first = min(starts) - DAY_MARGIN if starts and None not in starts else None
    closed = ends and len(ends) == len(spans) and None not in ends  # none still running
    last = max(ends) + DAY_MARGIN if closed else None
    return (first and first.date()), (last and last.date())


def _sample_bounds(spans: list[dict[str, Any]]) -> dict[str, Any]:
    """The parameters of sql/jobs/job_samples.sql: the nodes of the job's allocations and the
    instants its samples can lie between (None: unbounded), from its spans."""
    starts = [row["first_ts"] for row in spans]
    ends = [row["last_ts"] for row in spans]
    open_ = any(row["open"] for row in spans) or None in ends
    return {
        "nodes": sorted({node for row in spans for node in row["nodes"]}),
        "first_ts": None if not starts or None in starts else min(starts),
        "last_ts": None if open_ or not ends else max(ends),
    }


def connect_job(root: Path, job_id: str, cluster: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the views `gpuledger job` reads (jobs, jobs_latest, job_gpus,
    job_usage, job_outcomes, findings, gpu_samples, job_gpu_daily, gpu_job_buckets and
    gpu_models; unowned_samples, the samples on the nodes of the job's allocations within its
    span, and owned_samples, those with their owners), over the files that can hold `job_id`'s
    rows (on `cluster`, or any).

    Raises EmptyWarehouse if the lake is missing or has no jobs.
    """
    if not root.is_dir():
        raise EmptyWarehouse(root, "any table (the folder does not exist)")
    listing = {table: layout.table_files(root, table) for table in _BY_CLUSTER + _BY_DAY}
    if not listing["jobs"]:
        raise EmptyWarehouse(root, "'jobs'")
    con = open_engine(WarehouseConfig(root))
    # each file's footer read once: binding the views and the report's queries (the
    # bottleneck's reads the samples twice) would read them again and again
    con.execute("SET parquet_metadata_cache = true")
    wanted = None if cluster is None else _folders([cluster])
    for table in _BY_CLUSTER:
        paths = listing[table]
        register_files(con, table, [p for p in paths if wanted is None or _in_clusters(p, wanted)])
    queries.define_view(con, "jobs_latest", sql.load("views/jobs_latest"))
    register_reference(con, ("gpu_models",))

    spans = queries.rows(con, "jobs/job_span", job_id=job_id, cluster=cluster)
    folders = _folders(row["cluster"] for row in spans)
    first, last = _days(spans)
    for table in _BY_DAY:
        paths = [p for p in listing[table] if _in_clusters(p, folders) and _in_days(p, first, last)]
        register_files(con, table, paths)
    bounds = _sample_bounds(spans)
    # where the job's cluster's data ends (a running job's run time in sql/jobs/job_detail.sql)
    queries.define_view(con, "cluster_data_end", sql.load(DERIVED_VIEWS["cluster_data_end"]))
    queries.relation(con, "jobs/job_samples", **bounds).create_view("unowned_samples")
    # each sample's owner, as the marts decide it (the bottleneck signals read it)
    queries.define_view(con, "owned_samples", sql.load(DERIVED_VIEWS["owned_samples"]))
    return con


@contextmanager
def job_engine(
    root: Path, job_id: str, cluster: str | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """`connect_job`'s engine for one read, closed after it: what reads one job's report
    (`gpuledger mail`, the API, the dashboard's Job page) use instead of a connection over the
    whole lake, whose views would decide the owner of every sample of the lake for the job's
    bottleneck. A lake file damaged inside is DamagedFile naming it."""
    con = connect_job(root, job_id, cluster)
    try:
        with queries.damaged_files(con):
            yield con
    finally:
        con.close()
