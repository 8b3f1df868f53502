"""Run-time quantiles: the p50 and p90 of a job's run time from what is known at submission
(its time limit, GPUs, partition, and its user's and job name's past run times), fitted with
gradient boosting under quantile loss on log seconds. For time-limit right-sizing: a limit far
above the p90 holds back-fill; a p90 below the actual run time is a job a tighter limit kills.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from detectors import names
from detectors.models.history import with_history
from detectors.models.store import NotEnoughHistory

__all__ = ["DETECTOR", "FEATURES", "QUANTILES", "fit", "frame", "metrics", "predict_quantiles"]

DETECTOR = names.RUNTIME_QUANTILES
QUANTILES = (0.5, 0.9)
MIN_JOBS = 20
FEATURES = (
    "log_time_limit",
    "gpus",
    "interactive",
    "user_jobs_before",
    "user_last2_log_runtime",
    "user_mean_log_runtime",
    "name_mean_log_runtime",
)


def frame(jobs: pl.DataFrame) -> pl.DataFrame:
    """Started jobs with a time limit, with features; `log_runtime` is set for completed jobs
    (the training rows).

    Missing history falls back to the time limit, the only thing known about a newcomer. A job
    without a time limit (a trace from a scheduler that sets none: Philly) has no feature to
    start from and no limit to advise on: it is left out.
    """
    hist = with_history(jobs).filter(pl.col("time_limit_s").is_not_null())
    log_limit = pl.col("time_limit_s").cast(pl.Float64).clip(lower_bound=60.0).log()
    return hist.with_columns(
        log_limit.alias("log_time_limit"),
        pl.col("gpus").cast(pl.Float64),
        (pl.col("partition") == "interactive").cast(pl.Float64).alias("interactive"),
        pl.col("user_last2_log_runtime").fill_null(log_limit),
        pl.col("user_mean_log_runtime").fill_null(log_limit),
        pl.col("name_mean_log_runtime").fill_null(log_limit),
        pl.when(pl.col("state") == "COMPLETED")
        .then(pl.col("runtime_s").clip(lower_bound=1.0).log())
        .alias("log_runtime"),
    )


def _matrix(rows: pl.DataFrame) -> np.ndarray:
    return rows.select(FEATURES).to_numpy().astype(np.float64)


def fit(rows: pl.DataFrame, seed: int = 0) -> dict[float, Any]:
    """One GradientBoostingRegressor(loss="quantile") per quantile, on completed jobs."""
    from sklearn.ensemble import GradientBoostingRegressor

    known = rows.filter(pl.col("log_runtime").is_not_null())
    if known.height < MIN_JOBS:
        raise NotEnoughHistory(
            f"{DETECTOR}: needs at least {MIN_JOBS} completed jobs with a time limit, got "
            f"{known.height}"
        )
    x, y = _matrix(known), known["log_runtime"].to_numpy()
    return {
        q: GradientBoostingRegressor(
            loss="quantile",
            alpha=q,
            n_estimators=120,
            max_depth=3,
            learning_rate=0.08,
            random_state=seed,
        ).fit(x, y)
        for q in QUANTILES
    }


def predict_quantiles(models: dict[float, Any], rows: pl.DataFrame) -> pl.DataFrame:
    """Add `p50_s` and `p90_s` (seconds); p90 is never below p50."""
    if rows.is_empty():
        return rows.with_columns(
            pl.lit(None, pl.Float64).alias("p50_s"), pl.lit(None, pl.Float64).alias("p90_s")
        )
    x = _matrix(rows)
    p50 = np.exp(models[0.5].predict(x))
    p90 = np.maximum(np.exp(models[0.9].predict(x)), p50)
    return rows.with_columns(pl.Series("p50_s", p50), pl.Series("p90_s", p90))


def _pinball(y: np.ndarray, pred: np.ndarray, q: float) -> float:
    d = y - pred
    return float(np.mean(np.maximum(q * d, (q - 1) * d)))


def metrics(predicted: pl.DataFrame) -> dict[str, float | int | None]:
    """Scores on completed jobs: pinball losses and MAE (log s), p90 coverage, the
    underestimation rate (run time above p90: a limit at p90 would have killed it), the
    Tsafrir last-two baseline's MAE, and GPU-hours of time limit a p90 limit would free."""
    done = predicted.filter(pl.col("log_runtime").is_not_null())
    if done.is_empty():
        return {"jobs": 0}
    y = done["log_runtime"].to_numpy()
    p50, p90 = np.log(done["p50_s"].to_numpy()), np.log(done["p90_s"].to_numpy())
    last2 = done["user_last2_log_runtime"].to_numpy()
    limit_s = done["time_limit_s"].cast(pl.Float64).to_numpy()
    freed = np.clip(limit_s - done["p90_s"].to_numpy(), 0, None) * done["gpus"].to_numpy() / 3600
    return {
        "jobs": done.height,
        "pinball_p50_log": _pinball(y, p50, 0.5),
        "pinball_p90_log": _pinball(y, p90, 0.9),
        "mae_p50_log": float(np.mean(np.abs(y - p50))),
        "mae_baseline_last2_log": float(np.mean(np.abs(y - last2))),
        "p90_coverage": float(np.mean(y <= p90)),
        "underestimation_rate": float(np.mean(y > p90)),
        "limit_gpu_h_freed_at_p90": float(freed.sum()),
    }
