"""Lemon nodes: node-days whose health and job outcomes are unlike the rest of the fleet
(IsolationForest), the "drain and repair it" candidates Meta found in ~1-2 % of nodes."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import polars as pl

from detectors import names
from detectors.models.store import NotEnoughHistory

__all__ = ["CONTAMINATION", "DETECTOR", "FEATURES", "QUERY", "fit", "frame", "message", "score"]

DETECTOR = names.LEMON_NODE
QUERY = "models/node_day_health"
CONTAMINATION = 0.03  # share of node-days expected to be anomalous
MIN_NODE_DAYS = 10
REQUIRED_COLUMNS = frozenset(
    {
        "cluster",
        "node",
        "day",
        "sbe_max",
        "remap_pending_frac",
        "throttle_frac",
        "temp_mean",
        "xids",
        "jobs_ended",
        "jobs_failed",
    }
)
FEATURES = (
    "log_sbe_max",
    "remap_pending_frac",
    "throttle_frac",
    "temp_mean",
    "xids",
    "failed_frac",
    "jobs_failed",
)


def frame(node_days: pl.DataFrame) -> pl.DataFrame:
    """Add the model's features to `node_day_health` rows."""
    missing = REQUIRED_COLUMNS - set(node_days.columns)
    if missing:
        raise ValueError(f"{DETECTOR}: node_day_health lacks columns {sorted(missing)!r}")
    return node_days.with_columns(
        pl.col("sbe_max").cast(pl.Float64).fill_null(0.0).log1p().alias("log_sbe_max"),
        pl.col("remap_pending_frac").cast(pl.Float64).fill_null(0.0),
        pl.col("throttle_frac").cast(pl.Float64).fill_null(0.0),
        pl.col("temp_mean").cast(pl.Float64).fill_null(pl.col("temp_mean").median()),
        pl.col("xids").cast(pl.Float64),
        (pl.col("jobs_failed") / pl.col("jobs_ended").clip(lower_bound=1)).alias("failed_frac"),
        pl.col("jobs_failed").cast(pl.Float64),
    )


def fit(rows: pl.DataFrame, seed: int = 0) -> Any:
    """Fit an IsolationForest on node-days."""
    from sklearn.ensemble import IsolationForest

    if rows.height < MIN_NODE_DAYS:
        raise NotEnoughHistory(
            f"{DETECTOR}: needs at least {MIN_NODE_DAYS} node-days, got {rows.height}"
        )
    model = IsolationForest(n_estimators=200, contamination=CONTAMINATION, random_state=seed)
    model.fit(rows.select(FEATURES).to_numpy().astype(np.float64))
    return model


def score(model: Any, rows: pl.DataFrame) -> pl.DataFrame:
    """Add `anomaly` (0-1, higher is stranger) and `flagged` (the forest calls it an outlier)."""
    if rows.is_empty():
        return rows.with_columns(
            pl.lit(None, pl.Float64).alias("anomaly"), pl.lit(None, pl.Boolean).alias("flagged")
        )
    x = rows.select(FEATURES).to_numpy().astype(np.float64)
    decision = model.decision_function(x)  # < 0: outlier
    return rows.with_columns(
        pl.Series("anomaly", np.clip(0.5 - decision, 0.0, 1.0)),
        pl.Series("flagged", decision < 0),
    )


def message(
    node: str,
    day: dt.date,
    xids: float | None,
    jobs_failed: float | None,
    jobs_ended: float | None,
    sbe_max: float | None,
) -> str:
    """The finding's one line, with the reasons the node-day has data for (a node without ECC
    fields has no corrected-error count: that reason is left out, not the others)."""
    reasons = []
    if xids is not None:
        reasons.append(f"XIDs {xids:.0f}")
    if jobs_failed is not None and jobs_ended is not None:
        reasons.append(f"failed jobs {jobs_failed:.0f} of {jobs_ended:.0f}")
    if sbe_max is not None:
        reasons.append(f"corrected ECC {sbe_max:.0f}")
    said = f" ({', '.join(reasons)})" if reasons else ""
    return (
        f"Node {node} on {day.isoformat()}: unlike the rest of the fleet{said}; a lemon-node "
        "candidate to drain and test"
    )
