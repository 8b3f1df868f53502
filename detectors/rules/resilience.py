"""Resilience: jobs killed after hardware events, GPU-hours lost per account, and checkpoint
intervals from the observed interruption rate per job size (Young/Daly).

Reads one row per finished job (sql/detectors/job_resilience.sql). An *interruption* is a
node failure, a requeue, or a failure preceded by a hardware event on the job's GPUs.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.findings import Severity, as_frame
from detectors.rules.base import Rule, Window, as_of, by_cluster, evidence, period_anchor
from detectors.rules.thresholds import ResilienceThresholds
from detectors.wording import counted, counted_expr

if TYPE_CHECKING:
    from detectors.rules.config import RuleConfig

__all__ = ["SIZE_CLASSES", "RULES", "ResilienceThresholds", "checkpoint_advice", "young_daly_s"]

QUERY = "detectors/job_resilience"
# Job sizes (GPUs) that share one interruption rate: (label, smallest, largest).
SIZE_CLASSES: tuple[tuple[str, int, int], ...] = (
    ("1 GPU", 1, 1),
    ("2-8 GPUs", 2, 8),
    ("9-64 GPUs", 9, 64),
    ("65+ GPUs", 65, 1 << 30),
)


def young_daly_s(delta_s: float, mtbf_s: float) -> float:
    """Daly's optimal checkpoint interval (2006) for write cost `delta_s` and MTBF `mtbf_s`.

    sqrt(2·δ·M)·[1 + ⅓·sqrt(δ/2M) + δ/(18M)] − δ for δ < 2M, else M (Young's first-order
    sqrt(2·δ·M) is the leading term).
    """
    if mtbf_s <= 0 or delta_s <= 0:
        return float("nan")
    if delta_s >= 2 * mtbf_s:
        return mtbf_s
    r = delta_s / (2 * mtbf_s)
    return math.sqrt(2 * delta_s * mtbf_s) * (1 + math.sqrt(r) / 3 + r / 9) - delta_s


def checkpoint_advice(jobs: pl.DataFrame, delta_s: float) -> pl.DataFrame:
    """Per size class: job-hours run, interruptions, MTBF of one job, and the interval to use.

    `jobs` needs gpus, runtime_s and interrupted (one row per finished job).
    """
    rows = []
    for label, low, high in SIZE_CLASSES:
        sized = jobs.filter(pl.col("gpus").is_between(low, high))
        hours = float(sized["runtime_s"].sum() or 0.0) / 3600
        interruptions = int(sized["interrupted"].sum() or 0)
        mtbf_s = hours * 3600 / interruptions if interruptions else float("inf")
        interval = young_daly_s(delta_s, mtbf_s) if interruptions else float("nan")
        rows.append((label, low, high, len(sized), hours, interruptions, mtbf_s, interval))
    return pl.DataFrame(
        rows,
        schema={
            "size_class": pl.String,
            "min_gpus": pl.Int64,
            "max_gpus": pl.Int64,
            "jobs": pl.Int64,
            "job_hours": pl.Float64,
            "interruptions": pl.Int64,
            "mtbf_s": pl.Float64,
            "interval_s": pl.Float64,
        },
        orient="row",
    )


def _params(config: RuleConfig, window: Window) -> dict[str, Any]:
    return {"since": window.since}


def _after_hw_event(jobs: pl.DataFrame) -> pl.DataFrame:
    hit = jobs.filter(pl.col("failed") & pl.col("hw_event_before_end"))
    return hit.with_columns(
        pl.lit("failed_after_hw_event").alias("detector"),
        pl.lit(Severity.WARN.value).alias("severity"),
        pl.lit("job").alias("subject_kind"),
        pl.col("job_id").alias("subject_id"),
        pl.col("start_ts").alias("anchor_ts"),
        pl.lit(None, pl.String).alias("node"),
        pl.lit(None, pl.String).alias("gpu_uuid"),
        pl.lit(False).alias("predicted"),
        pl.lit(1.0).cast(pl.Float32).alias("score"),
        pl.col("gpu_h_lost").alias("gpu_h_at_stake"),
        pl.format(
            "Job {} ({}) failed ({}) after a hardware event on its GPUs ({}): {} GPU-h lost "
            "through no fault of the job; resubmit it and check the GPU",
            "job_id",
            pl.col("user").fill_null("unknown user"),
            "outcome",
            "hw_event_kinds",
            pl.col("gpu_h_lost").round(2),
        ).alias("message"),
        evidence("outcome", "hw_event_kinds", "gpus", "runtime_s", "gpu_h_lost"),
    ).pipe(as_frame)


def _accounts(jobs: pl.DataFrame, t: ResilienceThresholds, window: Window) -> pl.DataFrame:
    end = as_of(jobs, window, "end_ts")
    span = dt.timedelta(days=t.account_window_days)
    anchor = period_anchor(end, span)
    recent = jobs.filter((pl.col("end_ts") >= end - span) & pl.col("account").is_not_null())
    accounts = (
        recent.group_by("cluster", "account")
        .agg(
            pl.len().alias("jobs"),
            pl.col("alloc_gpu_h").sum(),
            pl.col("gpu_h_lost").sum(),
            (pl.col("gpu_h_lost") > 0).sum().alias("jobs_lost"),
            pl.col("interrupted").sum().alias("interruptions"),
        )
        .with_columns((pl.col("gpu_h_lost") / pl.col("alloc_gpu_h")).alias("lost_share"))
        .filter(
            (pl.col("gpu_h_lost") >= t.account_min_lost_gpu_h)
            & (pl.col("lost_share") >= t.account_min_lost_share)
        )
    )
    return accounts.with_columns(
        pl.lit("lost_gpu_hours").alias("detector"),
        pl.lit(Severity.WARN.value).alias("severity"),
        pl.lit("account").alias("subject_kind"),
        pl.col("account").alias("subject_id"),
        pl.lit(anchor).alias("anchor_ts"),
        pl.lit(None, pl.String).alias("job_id"),
        pl.lit(None, pl.String).alias("user"),
        pl.lit(None, pl.String).alias("node"),
        pl.lit(None, pl.String).alias("gpu_uuid"),
        pl.lit(end - span).alias("start_ts"),
        pl.lit(end).alias("end_ts"),
        pl.lit(False).alias("predicted"),
        pl.col("lost_share").clip(0, 1).cast(pl.Float32).alias("score"),
        pl.col("gpu_h_lost").alias("gpu_h_at_stake"),
        pl.format(
            "Account {}: {} GPU-h ({}% of {}) lost to {} failed, timed-out, preempted or "
            "requeued {} that ended in the last {} ({} interrupted by the system)",
            "account",
            pl.col("gpu_h_lost").round(1),
            (pl.col("lost_share") * 100).round(1),
            pl.col("alloc_gpu_h").round(1),
            "jobs_lost",
            pl.when(pl.col("jobs_lost") == 1).then(pl.lit("job")).otherwise(pl.lit("jobs")),
            pl.lit(counted(t.account_window_days, "day")),
            "interruptions",
        ).alias("message"),
        evidence("jobs", "jobs_lost", "interruptions", "alloc_gpu_h", "gpu_h_lost", "lost_share"),
    ).pipe(as_frame)


def _checkpoints(jobs: pl.DataFrame, t: ResilienceThresholds) -> pl.DataFrame:
    delta_s = t.checkpoint_cost_minutes * 60
    advice = checkpoint_advice(jobs, delta_s)
    sized = jobs.join_where(
        advice,
        pl.col("gpus") >= pl.col("min_gpus"),
        pl.col("gpus") <= pl.col("max_gpus"),
    )
    # With checkpoints every τ, an interruption costs half an interval on average (plus writes),
    # once per run lost: each run before a requeue that lost GPU-hours, and the last if it did.
    requeued_runs = pl.when(pl.col("gpu_h_lost_requeue") > 0).then(pl.col("requeues")).otherwise(0)
    last_run = (pl.col("gpu_h_lost") > pl.col("gpu_h_lost_requeue")).cast(pl.Int64)
    runs_lost = (requeued_runs + last_run).clip(1)
    expected = runs_lost * pl.col("gpus") * (pl.col("interval_s") / 2 + delta_s) / 3600
    avoidable = (pl.col("gpu_h_lost") - expected).clip(0)
    hit = sized.with_columns(
        avoidable.alias("avoidable_gpu_h"), runs_lost.alias("runs_lost")
    ).filter(
        pl.col("interrupted")
        & (pl.col("gpus") >= t.checkpoint_min_gpus)
        & pl.col("interval_s").is_not_nan()
        & (pl.col("avoidable_gpu_h") >= t.checkpoint_min_lost_gpu_h)
    )
    return hit.with_columns(
        pl.lit("checkpoint_interval").alias("detector"),
        pl.lit(Severity.INFO.value).alias("severity"),
        pl.lit("job").alias("subject_kind"),
        pl.col("job_id").alias("subject_id"),
        pl.col("start_ts").alias("anchor_ts"),
        pl.lit(None, pl.String).alias("node"),
        pl.lit(None, pl.String).alias("gpu_uuid"),
        pl.lit(False).alias("predicted"),
        (pl.col("avoidable_gpu_h") / pl.col("gpu_h_lost"))
        .clip(0, 1)
        .cast(pl.Float32)
        .alias("score"),
        pl.col("avoidable_gpu_h").alias("gpu_h_at_stake"),
        pl.format(
            "Job {} ({}, {}) lost {} GPU-h in {} (its last ran {} h); jobs of {} "
            "are interrupted every {} h here, so checkpoint every {} min (Young/Daly, {} min "
            "per checkpoint) to lose about {} GPU-h instead",
            "job_id",
            pl.col("user").fill_null("unknown user"),
            counted_expr("gpus", "GPU"),
            pl.col("gpu_h_lost").round(1),
            counted_expr("runs_lost", "interrupted run"),
            (pl.col("runtime_s") / 3600).round(1),
            "size_class",
            (pl.col("mtbf_s") / 3600).round(1),
            (pl.col("interval_s") / 60).round(0).cast(pl.Int64),
            pl.lit(t.checkpoint_cost_minutes),
            expected.round(1),
        ).alias("message"),
        evidence(
            "size_class", "jobs", "job_hours", "interruptions", "mtbf_s", "interval_s", "runs_lost"
        ),
    ).pipe(as_frame)


def _detect(jobs: pl.DataFrame, config: RuleConfig, window: Window) -> pl.DataFrame:
    t = config.resilience
    return pl.concat(
        [
            _after_hw_event(jobs),
            by_cluster(jobs, lambda part: _accounts(part, t, window)),
            by_cluster(jobs, lambda part: _checkpoints(part, t)),
        ],
        how="vertical",
    )


RULES = (Rule("resilience", QUERY, _params, _detect),)
