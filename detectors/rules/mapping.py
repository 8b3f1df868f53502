"""Attribution self-check: GPUs that worked with no job, and jobs whose GPUs sent no data.

Either means the job ↔ GPU key (DESIGN §3.3 `job_gpus`) or the telemetry needs fixing before
any per-job figure can be trusted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.findings import Severity, as_frame
from detectors.rules.base import Rule, Window, evidence
from detectors.rules.thresholds import MappingThresholds

if TYPE_CHECKING:
    from detectors.rules.config import RuleConfig

__all__ = ["RULES", "MappingThresholds"]


def _params(config: RuleConfig, window: Window) -> dict[str, Any]:
    return {"since": window.since}


def _unattributed(days: pl.DataFrame, config: RuleConfig, window: Window) -> pl.DataFrame:
    t = config.mapping
    busy = days.with_columns((pl.col("active_s") / 3600).alias("active_h")).filter(
        pl.col("active_h") >= t.unattributed_min_active_h
    )
    return busy.with_columns(
        pl.lit("gpu_without_job").alias("detector"),
        pl.lit(Severity.WARN.value).alias("severity"),
        pl.lit("gpu").alias("subject_kind"),
        pl.col("device").alias("subject_id"),
        pl.col("day").cast(pl.Datetime("ms", "UTC")).alias("anchor_ts"),
        pl.lit(None, pl.String).alias("job_id"),
        pl.lit(None, pl.String).alias("user"),
        pl.lit(None, pl.String).alias("account"),
        pl.col("first_ts").alias("start_ts"),
        (pl.col("last_ts") + pl.duration(minutes=5)).alias("end_ts"),
        pl.lit(False).alias("predicted"),
        (pl.col("active_s") / pl.col("observed_s")).clip(0, 1).cast(pl.Float32).alias("score"),
        pl.col("active_h").alias("gpu_h_at_stake"),
        pl.format(
            "GPU {} on {} was active {} h on {} with no job holding it: a process outside the "
            "scheduler, or a broken job↔GPU mapping (check the prolog / hpc_job labels)",
            "gpu_index",
            "node",
            pl.col("active_h").round(2),
            "day",
        ).alias("message"),
        evidence("observed_s", "active_s", "day"),
    ).pipe(as_frame)


def _without_data(jobs: pl.DataFrame, config: RuleConfig, window: Window) -> pl.DataFrame:
    """Jobs whose GPUs sent (almost) no data while the rest of their cluster's did: the
    GPU-hours the job held while its cluster's GPUs reported (`cluster_seen_frac` of its run)
    are what telemetry should have covered. Where the cluster's GPUs did not report (its
    scheduler's records alone are collected, every exporter is down, or none was deployed
    yet) no job's mapping is at fault. Flagged per job, a cluster without exporters sent 31
    users mail to "adjust the job's request" over 1,643 GPU-hours (the whole allocation), and
    so did a cluster whose exporters all stopped (23 owners over 385 GPU-hours)."""
    t = config.mapping
    covered = pl.col("observed_gpu_h") / pl.col("alloc_gpu_h")
    expected = pl.col("alloc_gpu_h") * pl.col("cluster_seen_frac").fill_null(0)
    dark = jobs.with_columns(
        covered.alias("observed_frac"), expected.alias("expected_gpu_h")
    ).filter(
        (pl.col("expected_gpu_h") >= t.nodata_min_alloc_gpu_h)
        & (pl.col("observed_gpu_h") <= t.nodata_max_observed_frac * pl.col("expected_gpu_h"))
    )
    return dark.with_columns(
        pl.lit("job_without_data").alias("detector"),
        pl.when(pl.col("observed_gpu_h") == 0)
        .then(pl.lit(Severity.WARN.value))
        .otherwise(pl.lit(Severity.INFO.value))
        .alias("severity"),
        pl.lit("job").alias("subject_kind"),
        pl.col("job_id").alias("subject_id"),
        pl.col("start_ts").alias("anchor_ts"),
        pl.lit(None, pl.String).alias("node"),
        pl.lit(None, pl.String).alias("gpu_uuid"),
        pl.lit(False).alias("predicted"),
        (1 - pl.col("observed_frac")).clip(0, 1).cast(pl.Float32).alias("score"),
        (pl.col("expected_gpu_h") - pl.col("observed_gpu_h"))
        .clip(lower_bound=0)
        .alias("gpu_h_at_stake"),
        pl.format(
            "Job {} ({}): {} GPU-h allocated but telemetry covered only {}% of it — "
            "no exporter on its nodes, or its GPUs are mapped to the wrong indices",
            "job_id",
            pl.col("user").fill_null("unknown user"),
            pl.col("alloc_gpu_h").round(2),
            (pl.col("observed_frac") * 100).round(1),
        ).alias("message"),
        evidence("gpus", "alloc_gpu_h", "observed_gpu_h", "observed_frac", "cluster_seen_frac"),
    ).pipe(as_frame)


RULES = (
    Rule("gpu_without_job", "detectors/unattributed_gpu_daily", _params, _unattributed),
    Rule("job_without_data", "detectors/job_profiles", _params, _without_data),
)
