"""Early-waste model: at 15 or 30 minutes into a job, P(it will be idle or below 20 % busy for
most of its run), from its user's, account's and job name's history, its request (GPUs,
partition, time limit) and its first minutes of telemetry. A user-history-only baseline is
scored alongside, so the model's worth is measured, not assumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from detectors import names
from detectors.models.history import WASTED_ABOVE, with_history
from detectors.models.store import ModelCard, NotEnoughHistory

__all__ = [
    "BASELINE_FEATURE",
    "DETECTOR",
    "EarlyWasteConfig",
    "FEATURES",
    "QUERY_EARLY",
    "QUERY_JOBS",
    "fit",
    "frame",
    "message",
    "not_evaluated",
    "precision_at_recall",
    "score",
    "threshold_for_recall",
]

DETECTOR = names.EARLY_WASTE
QUERY_JOBS = "models/job_features"
QUERY_EARLY = "models/job_early_usage"
BASELINE_FEATURE = "user_waste_rate"
# Fewer finished jobs teach nothing a threshold can be chosen on: 12 jobs (3 to test) gave a
# stored model less precise than the user-history baseline
MIN_JOBS = 20
FEATURES = (
    "gpus",
    "log_time_limit",
    "interactive",
    "user_waste_rate",
    "user_jobs_before",
    "account_waste_rate",
    "name_waste_rate",
    "early_busy",
    "early_idle_frac",
    "early_sm",
    "early_fb_mib_max",
    "early_active_frac",
)


@dataclass(frozen=True, slots=True)
class EarlyWasteConfig:
    """When predictions are made, what counts as wasteful, and the recall the alarm threshold
    is set for (on out-of-fold predictions of the training data)."""

    minutes: tuple[int, ...] = (15, 30)
    busy_below: float = 0.2
    target_recall: float = 0.8


def frame(jobs: pl.DataFrame, early: pl.DataFrame, minutes: int) -> pl.DataFrame:
    """Jobs still running `minutes` after their start, with features and `label` (null while
    the job runs). `jobs` is `job_features`, `early` is `job_early_usage` at `minutes`."""
    hist = with_history(jobs)
    rows = hist.join(early, on=["cluster", "job_id"], how="inner").filter(
        pl.col("runtime_s").is_null() | (pl.col("runtime_s") >= minutes * 60 + 300)
    )
    return rows.with_columns(
        pl.col("gpus").cast(pl.Float64),
        pl.col("time_limit_s")
        .cast(pl.Float64)
        .clip(lower_bound=60.0)
        .log()
        .alias("log_time_limit"),
        (pl.col("partition") == "interactive").cast(pl.Float64).alias("interactive"),
        pl.col("early_sm").fill_null(pl.col("early_busy")),
        (pl.col("early_devices_active") / pl.col("early_devices")).alias("early_active_frac"),
        pl.when(pl.col("end_ts").is_null())
        .then(None)
        .otherwise(pl.col("low_busy_frac") > WASTED_ABOVE)
        .alias("label"),
        pl.lit(minutes).alias("minutes"),
    )


def _matrix(rows: pl.DataFrame) -> np.ndarray:
    return rows.select(FEATURES).to_numpy().astype(np.float64)


def fit(rows: pl.DataFrame, seed: int = 0) -> Any:
    """Fit a gradient-boosted classifier on rows with a label."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    known = rows.filter(pl.col("label").is_not_null())
    model = HistGradientBoostingClassifier(
        max_iter=150, learning_rate=0.08, max_leaf_nodes=15, random_state=seed
    )
    labels = known["label"].to_numpy().astype(int)
    if len(labels) < MIN_JOBS:
        raise NotEnoughHistory(
            f"{DETECTOR}: needs at least {MIN_JOBS} finished jobs to learn from, got {len(labels)}"
        )
    if labels.all() or not labels.any():
        raise NotEnoughHistory(
            f"{DETECTOR}: needs both wasteful and useful finished jobs; got {len(labels)} jobs, "
            f"{int(labels.sum())} wasteful"
        )
    model.fit(_matrix(known), labels)
    return model


def score(model: Any, rows: pl.DataFrame) -> pl.DataFrame:
    """Add `score` (the model) and `baseline` (the user's smoothed waste rate)."""
    p = model.predict_proba(_matrix(rows))[:, 1] if rows.height else np.zeros(0)
    return rows.with_columns(
        pl.Series("score", p, pl.Float64), pl.col(BASELINE_FEATURE).alias("baseline")
    )


def precision_at_recall(labels: np.ndarray, scores: np.ndarray, recall: float) -> float | None:
    """The best precision among thresholds whose recall is at least `recall` (None: no
    positives). Ties in `scores` are taken together, as a threshold would."""
    positives = int(labels.sum())
    if positives == 0:
        return None
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order]
    tp = np.cumsum(y)
    n = np.arange(1, len(y) + 1)
    last = np.r_[s[1:] != s[:-1], True]  # only cut between distinct scores
    ok = last & (tp / positives >= recall)
    return float((tp[ok] / n[ok]).max()) if ok.any() else None


def threshold_for_recall(labels: np.ndarray, scores: np.ndarray, recall: float) -> float | None:
    """The highest threshold whose recall is at least `recall`; None without positives (no
    wasteful job to choose it on: a default would be a threshold nothing checked)."""
    positives = int(labels.sum())
    if positives == 0:
        return None
    order = np.argsort(-scores, kind="stable")
    s, tp = scores[order], np.cumsum(labels[order])
    reach = np.nonzero(tp / positives >= recall)[0]
    return float(s[reach[0]]) if reach.size else float(s[-1])


def not_evaluated(card: ModelCard) -> str | None:
    """Why a stored model's alarms cannot be trusted, so `detect` raises none (None: they can):
    its threshold is chosen for a recall on wasteful jobs it did not train on, and with none in
    its held-out data there was nothing to choose it on."""
    if not card.metrics.get("held_out_wasteful") or card.threshold is None:
        return (
            "no wasteful job fell in its held-out data, so its alarm threshold could not be "
            "chosen or checked"
        )
    return None


def message(
    job_id: str, user: str, minutes: int, score_: float, held_after_gpu_h: float | None = None
) -> str:
    """The finding's one line; `held_after_gpu_h` is what a job that has ended held after the
    prediction (None while it runs)."""
    said = (
        f"Job {job_id} ({user}), {minutes} min in: {score_:.0%} chance it stays idle or under "
        "20 % busy for most of its run; "
    )
    if held_after_gpu_h is None:
        return said + "check it before it holds its GPUs for hours"
    return said + f"it has ended, holding {held_after_gpu_h:.1f} GPU-h after that"
