"""Failing-GPU model: P(an uncorrectable error, XID 48/79/94/95 or row-remap failure within the
next `horizon_h` hours) for each GPU and hour, from its corrected-ECC trend, XIDs, temperature,
throttling and remaps.

Alarms are episodes: consecutive alarming hours of one GPU (gaps up to `merge_gap_h`) are one
finding, raised at the end of the first alarming hour. Pure functions over polars frames; the
queries that feed them are declared as data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from detectors import names
from detectors.models.store import ModelCard, NotEnoughHistory

__all__ = [
    "DETECTOR",
    "FEATURES",
    "FailingGpuConfig",
    "QUERY_FAILURES",
    "QUERY_HOURLY",
    "SelfCheck",
    "alarm_episodes",
    "choose_threshold",
    "features",
    "fit",
    "label",
    "message",
    "not_evaluated",
    "score",
    "self_check",
]

DETECTOR = names.FAILING_GPU
QUERY_HOURLY = "models/gpu_health_hourly"
QUERY_FAILURES = "models/gpu_failures"
REQUIRED_COLUMNS = frozenset(
    {
        "cluster",
        "gpu_uuid",
        "node",
        "hour",
        "samples",
        "sbe_max",
        "dbe_max",
        "remap_pending",
        "remap_failure",
        "temp_mean",
        "temp_max",
        "throttle_frac",
        "minor_xids",
    }
)
FEATURES = (
    "sbe",
    "log_sbe",
    "sbe_d1",
    "sbe_d3",
    "sbe_d6",
    "sbe_d12",
    "sbe_d24",
    "sbe_growth_6h",
    "sbe_new_8h",
    "sbe_active_8h",
    "sbe_new_prev_8h",
    "remap_pending_i",
    "temp_mean",
    "temp_max",
    "temp_delta_24h",
    "throttle_frac",
    "xids_6h",
    "xids_24h",
    "xids_total",
    "samples",
)


@dataclass(frozen=True, slots=True)
class FailingGpuConfig:
    """Horizon of the prediction (the training label: a failure within `horizon_h`), how far
    ahead an alarm still counts as a warning rather than a false alarm (`alarm_window_h`: a GPU
    drained two days before it fails was drained for a reason), how alarms merge, and the
    false-alarm budget the threshold is chosen for (per 1,000 GPU-days, on predictions for data
    the model did not see)."""

    horizon_h: float = 24.0
    alarm_window_h: float = 72.0
    merge_gap_h: float = 6.0
    false_alarms_per_1000_gpu_days: float = 0.5
    min_lead_h: float = 1.0


def features(hourly: pl.DataFrame) -> pl.DataFrame:
    """Add the model's features to `gpu_health_hourly` rows (one GPU's trend over its hours).

    Shifts count rows, not hours: an hour without samples (an exporter gap) is skipped over.
    """
    missing = REQUIRED_COLUMNS - set(hourly.columns)
    if missing:
        raise ValueError(f"{DETECTOR}: gpu_health_hourly lacks columns {sorted(missing)!r}")
    gpu = ["cluster", "gpu_uuid"]
    sbe = pl.col("sbe_max").cast(pl.Float64).forward_fill().over(gpu).fill_null(0.0)
    frame = hourly.sort([*gpu, "hour"]).with_columns(
        sbe.alias("sbe"),
        (pl.col("hour") + pl.duration(hours=1)).alias("hour_end"),
        pl.col("remap_pending").cast(pl.Float64).alias("remap_pending_i"),
        pl.col("temp_mean").cast(pl.Float64).fill_null(strategy="forward").over(gpu),
        pl.col("temp_max").cast(pl.Float64).fill_null(strategy="forward").over(gpu),
        pl.col("minor_xids").cast(pl.Float64),
        pl.col("samples").cast(pl.Float64),
    )
    deltas = [
        (pl.col("sbe") - pl.col("sbe").shift(k).over(gpu)).fill_null(0.0).alias(f"sbe_d{k}")
        for k in (1, 3, 6, 12, 24)
    ]
    # new errors per hour: rises of the counter (a reset reads as none), and over 8 h how many,
    # in how many different hours, and how many in the 8 h before (a climb, not one burst)
    new = (pl.col("sbe") - pl.col("sbe").shift(1).over(gpu)).clip(lower_bound=0).fill_null(0.0)
    frame = frame.with_columns(new.alias("_new")).with_columns(
        pl.col("_new").rolling_sum(8, min_samples=1).over(gpu).alias("sbe_new_8h"),
        (pl.col("_new") > 0)
        .cast(pl.Float64)
        .rolling_sum(8, min_samples=1)
        .over(gpu)
        .alias("sbe_active_8h"),
    )
    frame = frame.with_columns(
        pl.col("sbe_new_8h").shift(8).over(gpu).fill_null(0.0).alias("sbe_new_prev_8h")
    ).drop("_new")
    return frame.with_columns(
        pl.col("sbe").log1p().alias("log_sbe"),
        *deltas,
        (pl.col("sbe").log1p() - pl.col("sbe").shift(6).over(gpu).log1p())
        .fill_null(0.0)
        .alias("sbe_growth_6h"),
        (pl.col("temp_mean") - pl.col("temp_mean").rolling_mean(24, min_samples=1).over(gpu))
        .fill_null(0.0)
        .alias("temp_delta_24h"),
        pl.col("minor_xids").rolling_sum(6, min_samples=1).over(gpu).alias("xids_6h"),
        pl.col("minor_xids").rolling_sum(24, min_samples=1).over(gpu).alias("xids_24h"),
        pl.col("minor_xids").cum_sum().over(gpu).alias("xids_total"),
        pl.col("throttle_frac").cast(pl.Float64).fill_null(0.0),
    )


def label(frame: pl.DataFrame, failures: pl.DataFrame, horizon_h: float) -> pl.DataFrame:
    """Add `hours_to_failure` (next failure after the hour's end), `label` (within the horizon)
    and `failed_recently` (a failure in the 36 h before the hour's end: the GPU is broken or in
    repair, so it is neither a training row nor a prediction)."""
    fails = failures.select("cluster", "gpu_uuid", pl.col("ts").cast(frame["hour_end"].dtype)).sort(
        "ts"
    )
    left = frame.sort("hour_end")
    ahead = left.join_asof(
        fails.rename({"ts": "next_failure"}),
        left_on="hour_end",
        right_on="next_failure",
        by=["cluster", "gpu_uuid"],
        strategy="forward",
        check_sortedness=False,
    ).join_asof(
        fails.rename({"ts": "last_failure"}),
        left_on="hour_end",
        right_on="last_failure",
        by=["cluster", "gpu_uuid"],
        strategy="backward",
        check_sortedness=False,
    )
    hours = (pl.col("next_failure") - pl.col("hour_end")).dt.total_seconds() / 3600.0
    since = (pl.col("hour_end") - pl.col("last_failure")).dt.total_seconds() / 3600.0
    return ahead.with_columns(
        hours.alias("hours_to_failure"),
        (hours <= horizon_h).fill_null(False).alias("label"),
        (since <= 36.0).fill_null(False).alias("failed_recently"),
    ).sort("cluster", "gpu_uuid", "hour")


def _matrix(frame: pl.DataFrame, features: tuple[str, ...] = FEATURES) -> np.ndarray:
    return frame.select(features).to_numpy().astype(np.float64)


def fit(frame: pl.DataFrame, seed: int = 0) -> Any:
    """Fit a gradient-boosted classifier on labelled rows (rows of broken GPUs are dropped)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    rows = frame.filter(~pl.col("failed_recently"))
    # healthy GPU-hours with no corrected errors, XIDs or remaps all look alike: a quarter of
    # them teaches the model as much, in a quarter of the time
    quiet = (pl.col("sbe") == 0) & (pl.col("xids_24h") == 0) & (pl.col("remap_pending_i") == 0)
    keep = pl.col("label") | ~quiet | (pl.int_range(pl.len()).hash(seed) % 4 == 0)
    rows = rows.filter(keep)
    model = HistGradientBoostingClassifier(
        max_iter=100,
        learning_rate=0.1,
        max_leaf_nodes=15,
        l2_regularization=1.0,
        random_state=seed,
    )
    labels = rows["label"].to_numpy()
    if labels.all() or not labels.any():
        raise NotEnoughHistory(
            f"{DETECTOR}: needs GPU-hours before a failure and others; got {len(labels)} rows, "
            f"{int(labels.sum())} before a failure"
        )
    model.fit(_matrix(rows), labels)
    return model


def score(model: Any, frame: pl.DataFrame, features: tuple[str, ...] = FEATURES) -> pl.DataFrame:
    """Add `score`, the model's probability of a failure within the horizon (0 where broken).

    `features`: those the model was trained on (its card's), so a model stored before a
    feature was added still scores."""
    if frame.is_empty():
        return frame.with_columns(pl.lit(None, pl.Float64).alias("score"))
    p = model.predict_proba(_matrix(frame, features))[:, 1]
    return frame.with_columns(
        pl.when(pl.col("failed_recently")).then(0.0).otherwise(pl.Series(p)).alias("score")
        if "failed_recently" in frame.columns
        else pl.Series("score", p)
    )


def alarm_episodes(scored: pl.DataFrame, threshold: float, merge_gap_h: float) -> pl.DataFrame:
    """One row per alarm episode: GPU, node, detected_ts (end of its first alarming hour),
    end_ts (end of its last), score at detection and the hours it alarmed."""
    hot = scored.filter(pl.col("score") >= threshold).sort("cluster", "gpu_uuid", "hour_end")
    if hot.is_empty():
        return hot.select("cluster", "gpu_uuid", "node").with_columns(
            pl.lit(None, scored["hour_end"].dtype).alias("detected_ts"),
            pl.lit(None, scored["hour_end"].dtype).alias("end_ts"),
            pl.lit(None, pl.Float64).alias("score"),
            pl.lit(None, pl.UInt32).alias("hours"),
        )
    gap = (pl.col("hour_end") - pl.col("hour_end").shift(1)).dt.total_seconds() / 3600.0
    new = (gap.over("cluster", "gpu_uuid") > merge_gap_h).fill_null(True)
    return (
        hot.with_columns(new.cast(pl.Int32).cum_sum().over("cluster", "gpu_uuid").alias("ep"))
        .group_by("cluster", "gpu_uuid", "ep", maintain_order=True)
        .agg(
            pl.col("node").first(),
            pl.col("hour_end").first().alias("detected_ts"),
            pl.col("hour_end").last().alias("end_ts"),
            pl.col("score").first(),
            pl.len().alias("hours"),
        )
        .drop("ep")
    )


@dataclass(frozen=True, slots=True)
class SelfCheck:
    """How alarms at one threshold did against the lake's own failure events."""

    threshold: float
    failures: int
    warned: int  # failures with an alarm at least `min_lead_h` before, within the window
    alarms: int
    false_alarms: int  # alarms with no failure within the alarm window after them
    gpu_days: float

    @property
    def recall(self) -> float | None:
        return self.warned / self.failures if self.failures else None

    @property
    def false_alarms_per_1000_gpu_days(self) -> float | None:
        return 1000 * self.false_alarms / self.gpu_days if self.gpu_days else None


def self_check(
    scored: pl.DataFrame, failures: pl.DataFrame, threshold: float, config: FailingGpuConfig
) -> SelfCheck:
    """Score alarms at `threshold` against failure events (what training can see, no truth)."""
    episodes = alarm_episodes(scored, threshold, config.merge_gap_h)
    gpu_days = scored.height / 24.0
    fails = failures.join(scored.select("cluster").unique(), on="cluster").select(
        "cluster", "gpu_uuid", pl.col("ts").cast(scored["hour_end"].dtype)
    )
    # only failures the scored hours could have seen coming
    seen = scored.group_by("cluster", "gpu_uuid").agg(pl.col("hour").min().alias("first"))
    fails = fails.join(seen, on=["cluster", "gpu_uuid"]).filter(pl.col("ts") > pl.col("first"))
    pairs = episodes.join(fails, on=["cluster", "gpu_uuid"], how="left").with_columns(
        ((pl.col("ts") - pl.col("detected_ts")).dt.total_seconds() / 3600.0).alias("lead_h")
    )
    good = pairs.filter((pl.col("lead_h") > 0) & (pl.col("lead_h") <= config.alarm_window_h))
    good_alarms = good.select("cluster", "gpu_uuid", "detected_ts").unique().height
    warned = (
        good.filter(pl.col("lead_h") >= config.min_lead_h)
        .select("cluster", "gpu_uuid", "ts")
        .unique()
        .height
    )
    return SelfCheck(
        threshold=threshold,
        failures=fails.height,
        warned=warned,
        alarms=episodes.height,
        false_alarms=episodes.height - good_alarms,
        gpu_days=gpu_days,
    )


def choose_threshold(
    scored: pl.DataFrame, failures: pl.DataFrame, config: FailingGpuConfig
) -> float | None:
    """The threshold that warns for the most failures within the false-alarm budget (ties: the
    highest threshold); None when none warns of any (no failure seen, or none caught in time):
    then there is no evidence for any threshold, and the model raises no findings."""
    best: tuple[int, float] = (-1, 0.99)
    for threshold in np.unique(np.round(np.linspace(0.05, 0.995, 64), 3)):
        check = self_check(scored, failures, float(threshold), config)
        rate = check.false_alarms_per_1000_gpu_days or 0.0
        if rate <= config.false_alarms_per_1000_gpu_days and check.warned >= best[0]:
            best = (check.warned, float(threshold))
    return best[1] if best[0] > 0 else None


def not_evaluated(card: ModelCard) -> str | None:
    """Why a stored model's alarms cannot be trusted, so `detect` raises none (None: they can).

    Its findings are critical (drain the GPU), so its threshold must have been chosen on
    failures it did not train on, and must have warned of at least one of them.
    """
    if not card.metrics.get("held_out_failures"):
        return (
            "no GPU failure fell in its held-out data, so its alarm threshold could not be "
            "chosen or checked"
        )
    if card.threshold is None:
        return "no alarm threshold warned of a held-out failure within the false-alarm budget"
    return None


def message(gpu_uuid: str, node: str, score_: float, horizon_h: float) -> str:
    """The finding's one line."""
    return (
        f"GPU {gpu_uuid} on {node}: {score_:.0%} chance of an uncorrectable error or XID "
        f"48/79/94/95 within {horizon_h:.0f} h; drain it after its current job"
    )
