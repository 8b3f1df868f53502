"""Early warning of a failing GPU without any failure history: the trend of its corrected ECC
errors and its precursor XIDs, against the fleet's own baseline.

Per GPU and hour (sql/detectors/gpu_ecc_trend_hourly.sql: counter steps, resets handled), the
rule counts the corrected errors of the last `window_h` hours (the rate) and of the window before
(the acceleration is the first against the second). The fleet's baseline is robust: the median
and the MAD of every GPU's windowed count, so a fleet whose memory is noisy raises its own bar.
A GPU warns when, in one window:

- its new corrected errors reach the baseline's bar (`baseline_mads` MADs above the median, and
  at least `min_errors`), came in at least `min_active_hours` different hours (a climb, not one
  burst) and at least `accel_ratio` times those of the window before; or
- it logged `min_precursor_xids` precursor XIDs (63 row-remap event, 92 high single-bit rate,
  119/120 GSP errors before a bus failure), or one of them with a new corrected error.

A GPU gets one finding per week (from Monday, UTC) in which it warned, stamped with the end of
the hour it first fired (`start_ts`): the time a run every hour would have raised it, from which
evaluation measures the lead time before the failure; `end_ts` is the end of its last firing
hour. (A week, not an episode, names the finding, so stricter thresholds can only remove or
delay a warning, never make a new one.) The trained failing-GPU model
(detectors/models/failing_gpu.py) takes over where a site has failures of its own to learn from;
`gpuledger evaluate` scores both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.findings import Severity, as_frame
from detectors.rules.base import Rule, Window, evidence
from detectors.rules.thresholds import HealthTrendThresholds

if TYPE_CHECKING:
    from detectors.rules.config import RuleConfig

__all__ = ["DETECTOR", "PRECURSOR_XIDS", "RULES", "HealthTrendThresholds", "detect"]

DETECTOR = "gpu_health_trend"
QUERY = "detectors/gpu_ecc_trend_hourly"
QUERY_STORED = "detectors/gpu_ecc_trend_hourly_stored"  # the same rows, from the hours kept
# 63 row-remap recording event, 92 excessive single-bit interrupts (reference/dcgm.md: predictive
# HW memory), 119/120 GSP RPC timeout / GSP error (a bus failure's usual forerunners)
PRECURSOR_XIDS = (63, 92, 119, 120)
_GPU = ["cluster", "gpu_uuid"]


def _params(config: RuleConfig, window: Window) -> dict[str, Any]:
    return {"since": window.since, "precursor_xids": list(PRECURSOR_XIDS)}


def windowed(hourly: pl.DataFrame, t: HealthTrendThresholds) -> pl.DataFrame:
    """Add the window's counts (`recent`, `prior`, `active_hours`, `xids`), the fleet's
    baseline (`baseline`, `mad`, `bar`) and whether the hour fires (`ecc_fires`, `xid_fires`)."""
    hours = max(1, int(t.window_h))
    w, w2 = f"{hours}h", f"{2 * hours}h"
    frame = hourly.sort([*_GPU, "hour"]).with_columns(
        pl.col("sbe_new").cast(pl.Float64).fill_null(0.0),
        pl.col("precursor_xids").cast(pl.Float64).fill_null(0.0),
        (pl.col("sbe_new").fill_null(0) > 0).cast(pl.Float64).alias("_active"),
    )
    frame = frame.with_columns(
        pl.col("sbe_new").rolling_sum_by("hour", w).over(_GPU).alias("recent"),
        pl.col("sbe_new").rolling_sum_by("hour", w2).over(_GPU).alias("_both"),
        pl.col("_active").rolling_sum_by("hour", w).over(_GPU).alias("active_hours"),
        pl.col("precursor_xids").rolling_sum_by("hour", w).over(_GPU).alias("xids"),
    ).with_columns((pl.col("_both") - pl.col("recent")).alias("prior"))
    baseline = pl.col("recent").median().over("cluster")
    mad = (pl.col("recent") - baseline).abs().median().over("cluster")
    frame = frame.with_columns(baseline.alias("baseline"), mad.alias("mad")).with_columns(
        pl.max_horizontal(
            pl.lit(float(t.min_errors)),
            pl.col("baseline") + t.baseline_mads * 1.4826 * pl.col("mad"),
        ).alias("bar")
    )
    ecc = (
        (pl.col("recent") >= pl.col("bar"))
        & (pl.col("active_hours") >= t.min_active_hours)
        & (pl.col("recent") >= t.accel_ratio * pl.col("prior"))
    )
    xid = (pl.col("xids") >= t.min_precursor_xids) | (
        (pl.col("xids") >= 1) & (pl.col("recent") >= 1)
    )
    return frame.with_columns(ecc.alias("ecc_fires"), xid.alias("xid_fires")).drop(
        "_active", "_both"
    )


def detect(hourly: pl.DataFrame, config: RuleConfig, window: Window) -> pl.DataFrame:
    """One `gpu_health_trend` finding per GPU and week in which it warned."""
    t = config.health_trend
    fired = (
        windowed(hourly, t)
        .filter(pl.col("ecc_fires") | pl.col("xid_fires"))
        .with_columns((pl.col("hour") + pl.duration(hours=1)).alias("fire_ts"))
    )
    episodes = (
        fired.sort([*_GPU, "fire_ts"])
        .with_columns(pl.col("fire_ts").dt.truncate("1w").alias("anchor_ts"))
        .group_by([*_GPU, "anchor_ts"], maintain_order=True)
        .agg(
            pl.col("node").first(),
            pl.col("gpu_index").first(),
            pl.col("fire_ts").first().alias("start_ts"),
            pl.col("fire_ts").last().alias("end_ts"),
            pl.col("recent").first().alias("errors_in_window"),
            pl.col("prior").first().alias("errors_window_before"),
            pl.col("active_hours").first().cast(pl.Int64),
            pl.col("xids").first().cast(pl.Int64).alias("precursor_xids"),
            pl.col("baseline").first().alias("fleet_median"),
            pl.col("mad").first().alias("fleet_mad"),
            pl.col("bar").first(),
            pl.col("ecc_fires").first().alias("by_ecc"),
            pl.col("recent").max().alias("errors_peak"),
        )
    )
    why = (
        pl.when(pl.col("by_ecc"))
        .then(
            pl.format(
                "{} new corrected ECC errors in {} h over {} different hours ({} in the {} h "
                "before; the fleet's bar is {})",
                pl.col("errors_in_window").cast(pl.Int64),
                pl.lit(int(t.window_h)),
                "active_hours",
                pl.col("errors_window_before").cast(pl.Int64),
                pl.lit(int(t.window_h)),
                pl.col("bar").round(1),
            )
        )
        .otherwise(
            pl.format(
                "{} precursor XID(s) (63/92/119/120) and {} new corrected ECC errors in {} h",
                "precursor_xids",
                pl.col("errors_in_window").cast(pl.Int64),
                pl.lit(int(t.window_h)),
            )
        )
    )
    return (
        episodes.with_columns(
            pl.lit(DETECTOR).alias("detector"),
            pl.lit(Severity.WARN.value).alias("severity"),
            pl.lit("gpu").alias("subject_kind"),
            pl.coalesce("gpu_uuid", pl.format("{}/{}", "node", "gpu_index")).alias("subject_id"),
            pl.lit(None, pl.String).alias("user"),
            pl.lit(None, pl.String).alias("account"),
            pl.lit(None, pl.String).alias("job_id"),
            pl.lit(True).alias("predicted"),
            (1 - pl.col("bar") / pl.col("errors_peak").clip(lower_bound=1))
            .clip(0.1, 1)
            .cast(pl.Float32)
            .alias("score"),
            pl.lit(0.0).alias("gpu_h_at_stake"),
            pl.format(
                "GPU {} on {}: may be failing: {}; move its jobs to a checkpoint and drain it "
                "when they end",
                "gpu_index",
                "node",
                why,
            ).alias("message"),
            pl.lit(int(t.window_h)).alias("window_h"),
        )
        .with_columns(
            evidence(
                "errors_in_window",
                "errors_window_before",
                "active_hours",
                "precursor_xids",
                "fleet_median",
                "fleet_mad",
                "bar",
                "window_h",
                "start_ts",
            )
        )
        .pipe(as_frame)
    )


RULES = (Rule("gpu_health_trend", QUERY, _params, detect, stored=QUERY_STORED),)
