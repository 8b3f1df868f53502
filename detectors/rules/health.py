"""Hardware health: thermal and power throttling, XIDs by NVIDIA's class, ECC double-bit
errors, row-remap failure and pending.

Two sources: the samples' counters and clock-event bits per GPU-hour
(sql/detectors/gpu_health_hourly.sql) and the `gpu_events` table per GPU-day
(sql/detectors/gpu_health_events.sql). A GPU problem's id is anchored on the UTC day it was
first seen, so both sources (and later runs) name one double-bit error once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.findings import Severity, as_frame
from detectors.rules.base import Rule, Window, evidence
from detectors.rules.thresholds import HealthThresholds
from detectors.wording import counted_expr

if TYPE_CHECKING:
    from detectors.rules.config import RuleConfig

__all__ = ["RULES", "HealthThresholds"]

HOURLY = "detectors/gpu_health_hourly"
HOURLY_STORED = "detectors/gpu_health_hourly_stored"  # the same rows, as the lake keeps them
EVENTS = "detectors/gpu_health_events"
# XID actions (NVSentinel) that take the GPU or node out of service: critical.
_OUT_OF_SERVICE = ("RESET_GPU", "RESTART_BM", "RESTART_VM", "WORKFLOW_XID_48", "CHECK_MECHANICALS")
# XIDs that warn of a failure to come (SBE storm, row-remap events): predicted findings.
_PRECURSORS = (63, 92)
# GSP RPC timeout / GSP error: NVIDIA resets the GPU after one, but a single one a day is common
# on healthy GPUs; repeated, or with climbing corrected errors, they announce a bus failure
# (gpu_health_trend warns of that). Once a day: a warning, not a verdict.
_GSP = (119, 120)
# Below this an H100/A100 is far from its slowdown temperature (~85-90 °C): thermal bits at
# such a temperature say more about the reading than about the heat.
_HOT_C = 75.0


def _params(config: RuleConfig, window: Window) -> dict[str, Any]:
    return {"since": window.since}


def _gpu_subject() -> list[pl.Expr]:
    return [
        pl.lit("gpu").alias("subject_kind"),
        pl.coalesce("gpu_uuid", pl.format("{}/{}", "node", "gpu_index")).alias("subject_id"),
        pl.lit(None, pl.String).alias("user"),
        pl.lit(None, pl.String).alias("account"),
    ]


def _throttling(hourly: pl.DataFrame, t: HealthThresholds) -> pl.DataFrame:
    # each sample once: one carrying HW thermal and HW slowdown (NVML sets both) counted twice
    bad = pl.col("throttled_samples")
    hours = hourly.with_columns(
        pl.col("clock_busy_max").max().over("model").alias("model_clock_max"),
    ).filter(bad >= t.throttle_min_share * pl.col("samples"))
    loss = (1 - pl.col("clock_throttled_mean") / pl.col("model_clock_max")).clip(0, 1).fill_null(0)
    per_hour_gpu_h = pl.col("samples") * pl.col("interval_s") / 3600
    # the work slowed is that of the busy samples that were throttled, not of every busy one
    busy_share = pl.col("throttled_busy_samples") / pl.col("samples")
    gpus = (
        hours.group_by("cluster", "node", "gpu_uuid", "gpu_index")
        .agg(
            pl.len().alias("throttled_hours"),
            pl.col("hour").min().alias("start_ts"),
            (pl.col("hour").max() + pl.duration(hours=1)).alias("end_ts"),
            (per_hour_gpu_h * busy_share * loss).sum().alias("slowdown_gpu_h"),
            pl.col("thermal_samples").sum(),
            pl.col("hw_slowdown_samples").sum(),
            pl.col("power_brake_samples").sum(),
            pl.col("throttled_busy_samples").sum(),
            pl.col("temp_max").max(),
            pl.col("clock_throttled_mean").mean(),
            pl.col("model_clock_max").first(),
        )
        .filter(pl.col("throttled_hours") >= t.throttle_min_hours)
    )
    cause = (
        pl.when(
            pl.col("thermal_samples")
            >= pl.max_horizontal("hw_slowdown_samples", "power_brake_samples")
        )
        .then(pl.lit("thermal"))
        .when(pl.col("power_brake_samples") >= pl.col("hw_slowdown_samples"))
        .then(pl.lit("power brake"))
        .otherwise(pl.lit("HW slowdown"))
    )
    # Never busy while throttled: the bits were seen on an idle GPU, so no work was slowed,
    # and thermal bits at idle temperatures point at the reading (sensor, firmware) more than
    # at cooling. Say what was seen, as information only. (Not "no throttled busy clock": an
    # exporter without SM_CLOCK has none while the GPU works flat out.)
    idle = pl.col("throttled_busy_samples") == 0
    return (
        gpus.with_columns(
            cause.alias("cause"),
            pl.lit("throttling").alias("detector"),
            pl.when(idle)
            .then(pl.lit(Severity.INFO.value))
            .when(pl.col("throttled_hours") >= 24)
            .then(pl.lit(Severity.CRITICAL.value))
            .otherwise(pl.lit(Severity.WARN.value))
            .alias("severity"),
            *_gpu_subject(),
            pl.col("start_ts").dt.truncate("1d").alias("anchor_ts"),
            pl.lit(None, pl.String).alias("job_id"),
            pl.lit(False).alias("predicted"),
            (pl.col("throttled_hours") / 24).clip(0, 1).cast(pl.Float32).alias("score"),
            pl.col("slowdown_gpu_h").alias("gpu_h_at_stake"),
        )
        .with_columns(
            pl.when(idle)
            .then(
                pl.format(
                    "GPU {} on {}: {} clock-event bits reported for {} h while the GPU was idle "
                    "(max {} °C; no work slowed); {}",
                    "gpu_index",
                    "node",
                    "cause",
                    "throttled_hours",
                    pl.col("temp_max").round(0).cast(pl.Int64).cast(pl.String).fill_null("?"),
                    pl.when((pl.col("cause") == "thermal") & (pl.col("temp_max") < _HOT_C))
                    .then(pl.lit("thermal bits without heat: check the temperature sensor"))
                    .otherwise(pl.lit("check cooling and power if it recurs under load")),
                )
            )
            .otherwise(
                pl.format(
                    "GPU {} on {}: {} clock throttling for {} h (max {} °C, busy clock {} of {} "
                    "MHz; {} GPU-h of work slowed); check cooling and power",
                    "gpu_index",
                    "node",
                    "cause",
                    "throttled_hours",
                    pl.col("temp_max").round(0).cast(pl.Int64).cast(pl.String).fill_null("?"),
                    pl.col("clock_throttled_mean")
                    .round(0)
                    .cast(pl.Int64)
                    .cast(pl.String)
                    .fill_null("?"),  # an exporter without SM_CLOCK
                    pl.col("model_clock_max")
                    .round(0)
                    .cast(pl.Int64)
                    .cast(pl.String)
                    .fill_null("?"),
                    pl.col("slowdown_gpu_h").round(2),
                )
            )
            .alias("message"),
            evidence(
                "cause",
                "throttled_hours",
                "thermal_samples",
                "hw_slowdown_samples",
                "power_brake_samples",
                "temp_max",
                "clock_throttled_mean",
                "model_clock_max",
            ),
        )
        .pipe(as_frame)
    )


def _counters(hourly: pl.DataFrame, t: HealthThresholds) -> pl.DataFrame:
    per_gpu = hourly.group_by("cluster", "node", "gpu_uuid", "gpu_index").agg(
        pl.col("hour").filter(pl.col("dbe_max") > 0).min().alias("dbe_from"),
        (pl.col("dbe_max").max() - pl.col("dbe_min").min().clip(upper_bound=0)).alias("dbe_new"),
        pl.col("dbe_max").max().alias("dbe_max"),
        pl.col("sbe_max").max().alias("sbe_max"),
        pl.col("hour").filter(pl.col("remap_failure")).min().alias("failure_from"),
        pl.col("hour").filter(pl.col("remap_pending")).min().alias("pending_from"),
        (pl.col("hour").max() + pl.duration(hours=1)).alias("end_ts"),
    )
    dbe = per_gpu.filter(pl.col("dbe_max") >= t.dbe_min).with_columns(
        pl.lit("ecc_dbe").alias("detector"),
        pl.col("dbe_from").alias("start_ts"),
        pl.format(
            "GPU {} on {}: {} (double-bit), {} corrected; "
            "drain it and reset the GPU (XID 48 class)",
            "gpu_index",
            "node",
            counted_expr("dbe_max", "uncorrectable ECC error"),
            pl.col("sbe_max").fill_null(0),
        ).alias("message"),
    )
    failure = per_gpu.filter(pl.col("failure_from").is_not_null()).with_columns(
        pl.lit("row_remap_failure").alias("detector"),
        pl.col("failure_from").alias("start_ts"),
        pl.format(
            "GPU {} on {}: row remapping FAILED — the memory cannot be repaired in place; "
            "take the GPU out of service (RMA)",
            "gpu_index",
            "node",
        ).alias("message"),
    )
    pending = per_gpu.filter(
        pl.col("pending_from").is_not_null() & pl.col("failure_from").is_null()
    ).with_columns(
        pl.lit("row_remap_pending").alias("detector"),
        pl.col("pending_from").alias("start_ts"),
        pl.format(
            "GPU {} on {}: a row remap is pending — reset the GPU when its jobs end to apply it",
            "gpu_index",
            "node",
        ).alias("message"),
    )
    frames = [dbe, failure, pending]
    out = pl.concat([f.select(sorted(f.columns)) for f in frames], how="vertical")
    return out.with_columns(
        pl.when(pl.col("detector") == "row_remap_pending")
        .then(pl.lit(Severity.WARN.value))
        .otherwise(pl.lit(Severity.CRITICAL.value))
        .alias("severity"),
        *_gpu_subject(),
        pl.col("start_ts").dt.truncate("1d").alias("anchor_ts"),
        pl.lit(None, pl.String).alias("job_id"),
        (pl.col("detector") == "row_remap_pending").alias("predicted"),
        pl.lit(1.0).cast(pl.Float32).alias("score"),
        pl.lit(0.0).alias("gpu_h_at_stake"),
        evidence("dbe_max", "sbe_max", "failure_from", "pending_from"),
    ).pipe(as_frame)


def _detect_hourly(hourly: pl.DataFrame, config: RuleConfig, window: Window) -> pl.DataFrame:
    t = config.health
    return pl.concat([_throttling(hourly, t), _counters(hourly, t)], how="vertical")


# one GPU's events of one kind on one day (the rows of sql/detectors/gpu_health_events.sql
# are per code too)
_DAY_GPU = ("cluster", "node", "gpu_uuid", "gpu_index", "kind", "day")


def _detect_events(events: pl.DataFrame, config: RuleConfig, window: Window) -> pl.DataFrame:
    t = config.health
    hw_xid = (pl.col("kind") == "xid") & (pl.col("xid_class") != "application")
    picked = events.filter(
        (hw_xid & (pl.col("events") >= t.xid_min_events))
        # (dbe_min holds for the events as for the counter: a site's 2 was ignored here). An
        # ecc_dbe event's code is the GPU's double-bit counter after the increase (each
        # collector lands one per increase); without it, the events are the errors
        | (
            (pl.col("kind") == "ecc_dbe")
            & (pl.coalesce(pl.col("code").max().over(_DAY_GPU), pl.col("events")) >= t.dbe_min)
        )
        | (pl.col("kind") == "row_remap_failure")
    )
    detector = (
        pl.when(pl.col("kind") == "xid").then(pl.lit("xid_hardware")).otherwise(pl.col("kind"))
    )
    critical = pl.col("action").is_in(_OUT_OF_SERVICE) | pl.col("code").is_in([48, 79, 95])
    gsp_once = (pl.col("kind") == "xid") & pl.col("code").is_in(_GSP) & (pl.col("events") < 2)
    critical = (critical & ~gsp_once) | pl.col("kind").is_in(["ecc_dbe", "row_remap_failure"])
    precursor = (pl.col("kind") == "xid") & pl.col("code").is_in(_PRECURSORS)
    what = (
        pl.when(pl.col("kind") == "xid")
        .then(
            pl.format(
                "XID {} ({}, {}, NVIDIA action {})",
                "code",
                pl.col("mnemonic").fill_null("not in NVIDIA's catalogue"),
                pl.col("xid_class"),
                pl.col("action").fill_null("unknown"),
            )
        )
        .when(pl.col("kind") == "ecc_dbe")
        .then(pl.lit("uncorrectable (double-bit) ECC error"))
        .otherwise(pl.lit("row-remap failure"))
    )
    # A subject per (GPU, XID code): two codes on one GPU on one day are two problems.
    subject = pl.coalesce("gpu_uuid", pl.format("{}/{}", "node", "gpu_index"))
    return picked.with_columns(
        detector.alias("detector"),
        pl.when(critical)
        .then(pl.lit(Severity.CRITICAL.value))
        .otherwise(pl.lit(Severity.WARN.value))
        .alias("severity"),
        pl.lit("gpu").alias("subject_kind"),
        pl.when(pl.col("kind") == "xid")
        .then(pl.format("{}#xid{}", subject, "code"))
        .otherwise(subject)
        .alias("subject_id"),
        pl.lit(None, pl.String).alias("user"),
        pl.lit(None, pl.String).alias("account"),
        pl.col("day").cast(pl.Datetime("ms", "UTC")).alias("anchor_ts"),
        pl.col("job_ids").str.split(",").list.first().alias("job_id"),
        pl.col("first_ts").alias("start_ts"),
        pl.col("last_ts").alias("end_ts"),
        precursor.alias("predicted"),
        pl.lit(1.0).cast(pl.Float32).alias("score"),
        pl.col("jobs_gpu_h").alias("gpu_h_at_stake"),
        pl.format(
            "GPU {} on {}: {} ×{} on {}; {} running on it had {} GPU-h at risk",
            "gpu_index",
            "node",
            what,
            "events",
            "day",
            counted_expr("jobs_hit", "job"),
            pl.col("jobs_gpu_h").round(2),
        ).alias("message"),
        evidence("kind", "code", "xid_class", "action", "events", "job_ids", "jobs_gpu_h"),
    ).pipe(as_frame)


RULES = (
    Rule("gpu_health_events", EVENTS, _params, _detect_events),
    Rule("gpu_health_hourly", HOURLY, _params, _detect_hourly, stored=HOURLY_STORED),
)
