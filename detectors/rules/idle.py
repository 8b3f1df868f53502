"""Jobs whose GPUs do nothing: idle, holding memory without compute, or hung.

All three come from one pass over the 5-minute job buckets (sql/detectors/job_state_spans.sql),
judged on duty cycle, not on unbroken runs: a job is idle (or holds memory) over a window when
its GPUs did almost no work on average across it, so a short kernel every ~20 minutes (a
health check, a monitoring agent, a notebook's poll) does not hide an idle job; it is hung over
a window when most of it showed GPU_UTIL high while SM activity is ~0 (a kernel "running" but
doing no work, the NCCL-deadlock signature). Work is read from SM/engine activity, else (no
profiling fields) from power above idle, else from GPU_UTIL; the evidence's `signal` says which.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.findings import Severity, as_frame
from detectors.rules.base import Rule, Window, evidence
from detectors.rules.thresholds import IdleThresholds
from detectors.wording import counted_expr

if TYPE_CHECKING:
    from detectors.rules.config import RuleConfig

__all__ = ["RULES", "IdleThresholds"]

QUERY = "detectors/job_state_spans"


def _params(config: RuleConfig, window: Window) -> dict[str, Any]:
    t = config.idle
    shortest = min(t.idle_minutes, t.whole_job_min_minutes, t.hold_minutes, t.hung_minutes)
    return {
        "since": window.since,
        "idle_window_s": t.idle_minutes * 60.0,
        "hold_window_s": t.hold_minutes * 60.0,
        "hung_window_s": t.hung_minutes * 60.0,
        "idle_work_max_frac": t.idle_work_max_frac,
        "idle_real_work_max_frac": t.idle_real_work_max_frac,
        "idle_kernel_max_frac": t.idle_kernel_max_frac,
        "hold_fb_min_frac": t.hold_fb_min_frac,
        "hung_util_min_pct": t.hung_util_min_pct,
        "hung_sm_max": t.hung_sm_max,
        "hung_power_max_frac": t.hung_power_max_frac,
        "hung_duty_min_frac": t.hung_duty_min_frac,
        "min_span_s": shortest * 60.0,
    }


_HOURS = pl.col("state_s") / 3600.0
_WHOLE = pl.col("state_s") >= 0.999 * pl.col("observed_s")


def _detect(spans: pl.DataFrame, config: RuleConfig, window: Window) -> pl.DataFrame:
    t = config.idle
    whole_job = _WHOLE & (pl.col("observed_s") >= t.whole_job_min_minutes * 60)
    flagged = spans.filter(
        (pl.col("state").is_in(["idle", "memory_hold"]) & (pl.col("windowed") | whole_job))
        | ((pl.col("state") == "hung") & pl.col("windowed"))
    )
    what = (
        pl.when(pl.col("state") == "idle")
        .then(pl.lit("all GPUs idle"))
        .when(pl.col("state") == "memory_hold")
        .then(
            pl.format(
                "GPU memory held ({}% of a GPU) with no compute",
                (pl.col("fb_frac_max") * 100).round(0).cast(pl.Int64),
            )
        )
        .otherwise(
            pl.format(
                "hung: GPU_UTIL {}% but SM activity ~0 (likely a stalled collective)",
                pl.col("util_mean").round(0).cast(pl.Int64),
            )
        )
    )
    return flagged.with_columns(
        pl.col("state")
        .replace_strict({"idle": "idle_job", "memory_hold": "memory_hold", "hung": "hung_job"})
        .alias("detector"),
        pl.when(pl.col("state_gpu_h") >= t.critical_gpu_h)
        .then(pl.lit(Severity.CRITICAL.value))
        .otherwise(pl.lit(Severity.WARN.value))
        .alias("severity"),
        pl.lit("job").alias("subject_kind"),
        pl.col("job_id").alias("subject_id"),
        pl.coalesce("job_start_ts", "start_ts").alias("anchor_ts"),
        pl.lit(None, pl.String).alias("node"),
        pl.lit(None, pl.String).alias("gpu_uuid"),
        pl.lit(False).alias("predicted"),
        (pl.col("state_s") / pl.col("observed_s")).clip(0, 1).cast(pl.Float32).alias("score"),
        pl.col("state_gpu_h").alias("gpu_h_at_stake"),
        pl.format(
            "Job {} ({}, {}): {} for {} h of {} h observed ({} GPU-h){}{}",
            "job_id",
            pl.col("user").fill_null("unknown user"),
            counted_expr("gpus", "GPU").fill_null("? GPUs"),
            what,
            _HOURS.round(2),
            (pl.col("observed_s") / 3600).round(2),
            pl.col("state_gpu_h").round(2),
            pl.when(_WHOLE).then(pl.lit(" — its whole run")).otherwise(pl.lit("")),
            pl.when(pl.col("signal") == "power")
            .then(pl.lit(" (no profiling fields: work read from power)"))
            .when(pl.col("signal") == "gpu_util")
            .then(pl.lit(" (no profiling fields: work read from GPU_UTIL)"))
            .otherwise(pl.lit("")),
        ).alias("message"),
        evidence(
            "state",
            "spans",
            "longest_s",
            "state_s",
            "observed_s",
            "state_gpu_h",
            "windowed",
            "signal",
            "work_mean",
            "util_mean",
            "sm_mean",
            "fb_frac_max",
            "power_frac_mean",
            "episode_start_e",
            "observed_end_e",
        ),
    ).pipe(as_frame)


RULES = (Rule("job_states", QUERY, _params, _detect),)
