"""Hand-made model inputs: `gpu_health_hourly` rows of one GPU, jobs for the history features."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import polars as pl

T0 = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)
_TS = pl.Datetime("us", "UTC")

HOURLY_SCHEMA = {
    "cluster": pl.String,
    "gpu_uuid": pl.String,
    "node": pl.String,
    "hour": _TS,
    "samples": pl.Int64,
    "sbe_max": pl.Int64,
    "dbe_max": pl.Int64,
    "remap_pending": pl.Boolean,
    "remap_failure": pl.Boolean,
    "temp_mean": pl.Float64,
    "temp_max": pl.Float32,
    "throttle_frac": pl.Float64,
    "minor_xids": pl.Int64,
}
FAILURES_SCHEMA = {
    "cluster": pl.String,
    "gpu_uuid": pl.String,
    "node": pl.String,
    "ts": _TS,
    "kinds": pl.String,
}


def hour(h: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=h)


def hourly(
    sbe: Sequence[int | None],
    *,
    gpu: str = "GPU-a",
    node: str = "n1",
    cluster: str = "c",
    xids: Sequence[int] | None = None,
    pending: Sequence[bool] | None = None,
    temp: Sequence[float] | None = None,
) -> pl.DataFrame:
    """One GPU's hours from T0, with the given corrected-ECC counts (None: field missing)."""
    n = len(sbe)
    return pl.DataFrame(
        {
            "cluster": [cluster] * n,
            "gpu_uuid": [gpu] * n,
            "node": [node] * n,
            "hour": [hour(i) for i in range(n)],
            "samples": [120] * n,
            "sbe_max": list(sbe),
            "dbe_max": [0] * n,
            "remap_pending": list(pending or [False] * n),
            "remap_failure": [False] * n,
            "temp_mean": list(temp or [40.0] * n),
            "temp_max": [50.0] * n,
            "throttle_frac": [0.0] * n,
            "minor_xids": list(xids or [0] * n),
        },
        schema=HOURLY_SCHEMA,
    )


def failures(rows: Sequence[tuple[str, float]], cluster: str = "c") -> pl.DataFrame:
    """Failure events: (gpu, hours after T0)."""
    return pl.DataFrame(
        {
            "cluster": [cluster] * len(rows),
            "gpu_uuid": [g for g, _ in rows],
            "node": ["n1"] * len(rows),
            "ts": [hour(h) for _, h in rows],
            "kinds": ["xid 48"] * len(rows),
        },
        schema=FAILURES_SCHEMA,
    )


JOBS_SCHEMA = {
    "cluster": pl.String,
    "job_id": pl.String,
    "user": pl.String,
    "account": pl.String,
    "partition": pl.String,
    "job_name": pl.String,
    "state": pl.String,
    "submit_ts": _TS,
    "start_ts": _TS,
    "end_ts": _TS,
    "time_limit_s": pl.Int64,
    "gpus": pl.Int32,
    "runtime_s": pl.Float64,
    "observed_s": pl.Float64,
    "busy_mean": pl.Float64,
    "low_busy_frac": pl.Float64,
}


def job(
    job_id: str,
    start_h: float,
    end_h: float | None,
    *,
    user: str = "ann",
    low_busy_frac: float | None = 0.0,
    state: str = "COMPLETED",
    name: str = "train",
    gpus: int = 1,
    limit_h: float = 24.0,
) -> dict[str, object]:
    return {
        "cluster": "c",
        "job_id": job_id,
        "user": user,
        "account": "acct",
        "partition": "gpu",
        "job_name": name,
        "state": state,
        "submit_ts": hour(start_h),
        "start_ts": hour(start_h),
        "end_ts": None if end_h is None else hour(end_h),
        "time_limit_s": int(limit_h * 3600),
        "gpus": gpus,
        "runtime_s": None if end_h is None else (end_h - start_h) * 3600,
        "observed_s": 0.0,
        "busy_mean": None,
        "low_busy_frac": low_busy_frac if end_h is not None else None,
    }


def jobs(rows: Sequence[dict[str, object]]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=JOBS_SCHEMA)
