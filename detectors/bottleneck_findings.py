"""Bottleneck diagnoses as findings (a `gpuledger detect` producer: (con, now, since) -> table).

Only the diagnoses a user can act on become findings: `input_bound` (warn: the GPUs wait for
data), `memory_bound`, `communication_bound` and `underutilized` (info). Idle and stalled jobs
are left to the idle and hung-job rules, and well-used (`compute_bound`, `mixed`) or
unmeasured jobs raise nothing. GPU-hours at stake are the job's allocated GPU-hours not doing
work: alloc × (1 − busy_mean). A job's finding is anchored at its start, so it keeps its id.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import polars as pl

from detectors import names
from detectors.bottleneck import BottleneckThresholds, diagnose
from detectors.findings import FRAME_SCHEMA, to_findings
from warehouse import queries

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

__all__ = ["DETECTOR", "QUERY", "SEVERITY", "bottleneck_findings"]

DETECTOR = names.BOTTLENECK
QUERY = "detectors/bottleneck_jobs"
SEVERITY = {
    "input_bound": "warn",
    "memory_bound": "info",
    "communication_bound": "info",
    "underutilized": "info",
}
SIGNALS = (
    "diagnosis",
    "busy_mean",
    "sm_active_mean",
    "tensor_active_mean",
    "dram_active_mean",
    "nvlink_gbps_mean",
    "gap_frac",
    "burst_frac",
    "bursts_per_h",
)


def bottleneck_findings(
    con: duckdb.DuckDBPyConnection,
    now: dt.datetime,
    since: dt.datetime,
    thresholds: BottleneckThresholds | None = None,
    *,
    stored: bool = False,
) -> pa.Table:
    """Findings for the jobs started in [since, now) whose bottleneck has a fix. `stored`: read
    the sums the lake keeps a day at a time (`diagnose`)."""
    jobs = queries.run(con, QUERY, since=since, now=now)
    if jobs.is_empty():
        return to_findings(pl.DataFrame(schema=FRAME_SCHEMA), now)
    job_ids = jobs["job_id"].unique().to_list()
    diagnosed = pl.from_arrow(diagnose(con, job_ids, thresholds, stored=stored))
    assert isinstance(diagnosed, pl.DataFrame)
    rows = (
        diagnosed.filter(pl.col("diagnosis").is_in(list(SEVERITY)))
        .select("cluster", "job_id", "advice", *SIGNALS)
        .join(jobs.drop("busy_mean"), on=["cluster", "job_id"])
        .with_columns(
            pl.lit(DETECTOR).alias("detector"),
            pl.col("diagnosis").replace_strict(SEVERITY, return_dtype=pl.String).alias("severity"),
            pl.lit("job").alias("subject_kind"),
            pl.col("job_id").alias("subject_id"),
            pl.col("start_ts").alias("anchor_ts"),
            pl.lit(None, pl.String).alias("node"),
            pl.lit(None, pl.String).alias("gpu_uuid"),
            pl.lit(False).alias("predicted"),
            pl.lit(None, pl.Float32).alias("score"),
            (pl.col("alloc_gpu_h") * (1 - pl.col("busy_mean").clip(0, 1))).alias("gpu_h_at_stake"),
            pl.format(
                "Job {} ({}) is {}: {}",
                "job_id",
                pl.col("user").fill_null("?"),
                pl.col("diagnosis").str.replace_all("_", "-"),
                "advice",
            ).alias("message"),
            pl.struct(list(SIGNALS)).struct.json_encode().alias("evidence"),
        )
    )
    return to_findings(rows.select(list(FRAME_SCHEMA)), now)
