"""The summary marts (job_usage, job_outcomes, usage_daily, cluster_occupancy,
fairness_weekly) and their whole build from the sample-level marts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sql
from warehouse import queries
from warehouse.connection import (
    DERIVED_VIEWS,
    register_table,
)
from warehouse.emissions import register_intensity
from warehouse.partitions import SAMPLE_MARTS
from warehouse.row_counts import table_rows
from warehouse.summary.landing import land_mart

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from warehouse.attribution import AttributionConfig


# The marts built from the sample-level ones (and jobs, allocations, events), in build order.
SUMMARY_MARTS: tuple[tuple[str, str], ...] = (
    ("job_usage", "marts/job_usage"),
    ("job_outcomes", "marts/job_outcomes"),
    ("usage_daily", "marts/usage_daily"),
    ("cluster_occupancy", "marts/cluster_occupancy"),
    ("fairness_weekly", "marts/fairness_weekly"),
)


# The summary marts a later one reads (sql/marts/job_outcomes.sql, fairness_weekly.sql).
_READ_BY_LATER = frozenset({"job_usage", "job_outcomes", "usage_daily"})


# Derived views several summary marts read, in the order they read each other.
_BUILT_ONCE = ("jobs_latest", "cluster_data_end", "job_gpu_intervals", "job_gpu_shares")
# The raw tables the summary marts and the views they build on read (their SQL's `Reads:`):
# a view over every raw table's files (the samples' among them) costs binding their files.
SUMMARY_RAW_TABLES = ("jobs", "job_gpus", "gpus", "gpu_events", "app_throughput", "associations")


@dataclass(frozen=True, slots=True)
class WholeBuild:
    """What a whole build computed on the way that the state of the next update records
    (warehouse/summary/state.py): the per-day index of `gpu_job_buckets`
    (sql/attribution/summary_index.sql) and the derived views `jobs_latest` and
    `job_gpu_intervals`, as the marts were built from them."""

    counts: dict[str, int]
    index: pa.Table
    jobs_latest: pa.Table
    job_gpu_intervals: pa.Table


def build_summary_marts(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    config: AttributionConfig,
    progress: Callable[[str], None] | None = None,
) -> dict[str, int]:
    """Rebuild the job- and cluster-level marts whole from the sample-level ones; return rows.

    They read the small per-bucket and per-day tables, never samples, so this costs a
    fraction of one pass over the samples. `con` needs only the reference tables
    (register_reference): the views the build reads, it registers.
    """
    return build_whole(con, root, config, progress).counts


def build_whole(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    config: AttributionConfig,
    progress: Callable[[str], None] | None = None,
    *,
    registered: tuple[str, ...] = (),
    restore_views: bool = True,
) -> WholeBuild:
    """`build_summary_marts`, returning also what the state of the next update records, so
    recording it needs no engine of its own nor a second run of the derived views.
    `registered`: tables whose views `con` has over their files as they are now (the
    sample-level marts `attribute` just registered), not registered again. `restore_views`
    False: the derived views the build held as tables are left so (an engine closed after)."""
    for table in (*SUMMARY_RAW_TABLES, *(m for m, _ in SAMPLE_MARTS)):  # in the lake now
        if table not in registered:
            register_table(con, root, table)
    index = queries.run_arrow(con, "attribution/summary_index")
    register_intensity(con, config.emissions)
    # Read by several marts: each computed once for this build (then views again, below).
    built = {}
    for view in _BUILT_ONCE:
        built[view] = queries.run_arrow(con, DERIVED_VIEWS[view])
        con.from_arrow(built[view]).create_view(view)
    counts = {}
    try:
        for mart, query in SUMMARY_MARTS:
            if progress:
                progress(mart)
            result = queries.run_arrow(con, query, **config.params(query, con))
            counts[mart] = land_mart(root, mart, result)
            if restore_views or mart in _READ_BY_LATER:  # else the engine is closed after
                register_table(con, root, mart)
    finally:
        for view in _BUILT_ONCE if restore_views else ():
            queries.define_view(con, view, sql.load(DERIVED_VIEWS[view]))
    return WholeBuild(counts, index, built["jobs_latest"], built["job_gpu_intervals"])


def mart_rows(root: Path, mart: str) -> int:
    """Rows in `mart`'s files, from their footers (each read once: warehouse/row_counts.py)."""
    return table_rows(root, mart)
