"""Multi-GPU jobs whose GPUs are not used alike: partially idle jobs and straggler GPUs.

Both read one row per (job, GPU) over the job's life (sql/detectors/job_device_activity.sql).
A GPU is *never active* when it was active less than `never_active_frac` of its observed time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.findings import Severity, as_frame
from detectors.rules.base import Rule, Window, evidence
from detectors.rules.thresholds import GpuBalanceThresholds
from detectors.wording import counted_expr

if TYPE_CHECKING:
    from detectors.rules.config import RuleConfig

__all__ = ["RULES", "GpuBalanceThresholds"]

QUERY = "detectors/job_device_activity"


def _params(config: RuleConfig, window: Window) -> dict[str, Any]:
    return {"since": window.since}


def _job_columns() -> list[pl.Expr]:
    return [
        pl.lit("job").alias("subject_kind"),
        pl.col("job_id").alias("subject_id"),
        pl.col("job_start_ts").alias("anchor_ts"),
        pl.lit(False).alias("predicted"),
    ]


def _partial(devices: pl.DataFrame, t: GpuBalanceThresholds) -> pl.DataFrame:
    inactive = pl.col("active_s") < t.never_active_frac * pl.col("observed_s")
    jobs = (
        devices.group_by("cluster", "job_id")
        .agg(
            pl.first("user"),
            pl.first("account"),
            pl.first("job_start_ts"),
            pl.first("job_end_ts"),
            pl.len().alias("gpus_observed"),
            pl.first("gpus").alias("gpus"),
            inactive.sum().alias("idle_gpus"),
            pl.col("observed_s").median().alias("observed_s"),
            (pl.col("idle_s").filter(inactive).sum() / 3600).alias("idle_gpu_h"),
            pl.col("gpu_uuid").filter(inactive).sort().alias("idle_gpu_uuids"),
            pl.col("node").filter(inactive).first().alias("node"),
        )
        .filter(
            (pl.col("idle_gpus") >= max(t.partial_min_idle_gpus, 1))
            & (pl.col("idle_gpus") < pl.col("gpus_observed"))
            & (pl.col("observed_s") >= t.partial_min_minutes * 60)
            & (pl.col("idle_gpu_h") >= t.partial_min_gpu_h)
        )
    )
    share = pl.col("idle_gpus") / pl.col("gpus_observed")
    return jobs.with_columns(
        pl.lit("partial_idle").alias("detector"),
        pl.when(share >= 0.5)
        .then(pl.lit(Severity.WARN.value))
        .otherwise(pl.lit(Severity.INFO.value))
        .alias("severity"),
        *_job_columns(),
        pl.lit(None, pl.String).alias("gpu_uuid"),
        pl.col("job_start_ts").alias("start_ts"),
        pl.col("job_end_ts").alias("end_ts"),
        share.cast(pl.Float32).alias("score"),
        pl.col("idle_gpu_h").alias("gpu_h_at_stake"),
        # where some of its GPUs sent no sample, what they did is unknown: no --gres to ask for
        pl.when(pl.col("gpus").fill_null(0) > pl.col("gpus_observed"))
        .then(
            pl.format(
                "Job {} ({}): {} of the {} that reported (of its {}) never did any work "
                "({} GPU-h); the others sent no data",
                "job_id",
                pl.col("user").fill_null("unknown user"),
                "idle_gpus",
                counted_expr("gpus_observed", "GPU"),
                "gpus",
                pl.col("idle_gpu_h").round(2),
            )
        )
        .otherwise(
            pl.format(
                "Job {} ({}): {} of its {} never did any work ({} GPU-h); "
                "ask for --gres=gpu:{} next time",
                "job_id",
                pl.col("user").fill_null("unknown user"),
                "idle_gpus",
                counted_expr("gpus_observed", "GPU"),
                pl.col("idle_gpu_h").round(2),
                pl.col("gpus_observed") - pl.col("idle_gpus"),
            )
        )
        .alias("message"),
        evidence("gpus_observed", "idle_gpus", "idle_gpu_uuids", "observed_s", "idle_gpu_h"),
    ).pipe(as_frame)


def _stragglers(devices: pl.DataFrame, t: GpuBalanceThresholds) -> pl.DataFrame:
    active = devices.filter(
        (pl.col("active_s") >= t.never_active_frac * pl.col("observed_s"))
        & pl.col("busy_mean").is_not_null()
    )
    per_job = pl.len().over("cluster", "job_id")
    ranked = active.with_columns(
        per_job.alias("gpus_active"),
        pl.col("busy_mean").median().over("cluster", "job_id").alias("job_busy_median"),
        pl.col("observed_s").median().over("cluster", "job_id").alias("job_observed_s"),
        (pl.col("observed_s").sum().over("cluster", "job_id") / 3600).alias("job_gpu_h"),
    ).with_columns((pl.col("busy_mean") / pl.col("job_busy_median")).alias("ratio"))
    slow = ranked.filter(
        (pl.col("gpus_active") >= max(t.straggler_min_gpus, 2))
        & (pl.col("job_busy_median") >= t.straggler_min_busy)
        & (pl.col("ratio") <= t.straggler_ratio)
        & (pl.col("job_observed_s") >= t.straggler_min_minutes * 60)
    )
    # Synchronous jobs wait for their slowest GPU: every GPU loses (1 - the slowest's ratio) of
    # its time, once for the job however many GPUs are slow. Each slow GPU's finding carries
    # its part of that, by how far it falls behind (one finding per slow GPU summed the loss
    # once per straggler: 8.7 GPU-h at stake of a job observed for 3.7).
    behind = 1 - pl.col("ratio")
    job = ("cluster", "job_id")
    job_lost = pl.col("job_gpu_h") * (1 - pl.col("ratio").min().over(job))
    lost = job_lost * behind / behind.sum().over(job)
    slow = slow.with_columns(
        pl.len().over(job).alias("gpus_slow"), job_lost.alias("job_lost_gpu_h")
    )
    return slow.with_columns(
        pl.lit("straggler_gpu").alias("detector"),
        pl.lit(Severity.WARN.value).alias("severity"),
        pl.lit("gpu").alias("subject_kind"),
        pl.col("device").alias("subject_id"),
        pl.col("job_start_ts").alias("anchor_ts"),
        pl.lit(False).alias("predicted"),
        pl.col("job_start_ts").alias("start_ts"),
        pl.col("job_end_ts").alias("end_ts"),
        (1 - pl.col("ratio")).clip(0, 1).cast(pl.Float32).alias("score"),
        lost.alias("gpu_h_at_stake"),
        pl.format(
            "Job {} ({}): GPU {} on {} runs at {}% of the job's median activity ({}); "
            "check its clocks, PCIe/NVLink and host",
            "job_id",
            pl.col("user").fill_null("unknown user"),
            pl.col("gpu_index").cast(pl.String).fill_null("?"),
            pl.col("node").fill_null("?"),
            (pl.col("ratio") * 100).round(0).cast(pl.Int64),
            pl.when(pl.col("gpus_slow") == 1)
            .then(pl.format("{} GPU-h lost waiting for it", lost.round(2)))
            .otherwise(
                pl.format(
                    "{} of the {} GPU-h the job lost waiting for its {} slow GPUs",
                    lost.round(2),
                    pl.col("job_lost_gpu_h").round(2),
                    "gpus_slow",
                )
            ),
        ).alias("message"),
        evidence(
            "device",
            "busy_mean",
            "job_busy_median",
            "ratio",
            "gpus_active",
            "job_gpu_h",
            "gpus_slow",
            "job_lost_gpu_h",
        ),
    ).pipe(as_frame)


def _detect(devices: pl.DataFrame, config: RuleConfig, window: Window) -> pl.DataFrame:
    t = config.gpu_balance
    return pl.concat([_partial(devices, t), _stragglers(devices, t)], how="vertical")


RULES = (Rule("gpu_balance", QUERY, _params, _detect),)
