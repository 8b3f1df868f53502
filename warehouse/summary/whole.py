"""The summary marts (job_usage, job_outcomes, usage_daily, cluster_occupancy,
fairness_weekly) and their whole build from the sample-level marts.
"""

from __future__ import annotations

from collections.abc import Callable
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

    from warehouse.attribution import AttributionConfig


# The marts built from the sample-level ones (and jobs, allocations, events), in build order.
SUMMARY_MARTS: tuple[tuple[str, str], ...] = (
    ("job_usage", "marts/job_usage"),
    ("job_outcomes", "marts/job_outcomes"),
    ("usage_daily", "marts/usage_daily"),
    ("cluster_occupancy", "marts/cluster_occupancy"),
    ("fairness_weekly", "marts/fairness_weekly"),
)


# Derived views several summary marts read, in the order they read each other.
_BUILT_ONCE = ("job_gpu_intervals", "job_gpu_shares")
# The raw tables the summary marts and the views they build on read (their SQL's `Reads:`):
# a view over every raw table's files (the samples' among them) costs binding their files.
SUMMARY_RAW_TABLES = ("jobs", "job_gpus", "gpus", "gpu_events", "app_throughput", "associations")


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
    for table in (*SUMMARY_RAW_TABLES, *(m for m, _ in SAMPLE_MARTS)):  # in the lake now
        register_table(con, root, table)
    queries.define_view(con, "jobs_latest", sql.load(DERIVED_VIEWS["jobs_latest"]))
    register_intensity(con, config.emissions)
    # Read by several marts: each computed once for this build (then views again, below).
    for view in _BUILT_ONCE:
        con.from_arrow(queries.run_arrow(con, DERIVED_VIEWS[view])).create_view(view)
    counts = {}
    try:
        for mart, query in SUMMARY_MARTS:
            if progress:
                progress(mart)
            result = queries.run_arrow(con, query, **config.params(query, con))
            counts[mart] = land_mart(root, mart, result)
            register_table(con, root, mart)
    finally:
        for view in _BUILT_ONCE:
            queries.define_view(con, view, sql.load(DERIVED_VIEWS[view]))
    return counts


def mart_rows(root: Path, mart: str) -> int:
    """Rows in `mart`'s files, from their footers (each read once: warehouse/row_counts.py)."""
    return table_rows(root, mart)
