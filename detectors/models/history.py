"""What each job's user, account and job name had done before it started: waste rates and
run times of their jobs that had ended by then (no look-ahead), and a time split for training."""

from __future__ import annotations

import polars as pl

__all__ = ["PRIOR_WASTE_RATE", "REQUIRED_COLUMNS", "time_split", "with_history"]

REQUIRED_COLUMNS = frozenset(
    {
        "cluster",
        "job_id",
        "user",
        "account",
        "job_name",
        "state",
        "start_ts",
        "end_ts",
        "runtime_s",
        "low_busy_frac",
    }
)
PRIOR_WASTE_RATE = 0.3  # what a newcomer is assumed to waste, worth PRIOR_WEIGHT jobs
PRIOR_WEIGHT = 2.0
WASTED_ABOVE = 0.5  # a job is wasteful when most of its run was below the busy threshold


def _ended(jobs: pl.DataFrame) -> pl.DataFrame:
    return jobs.filter(pl.col("end_ts").is_not_null()).with_columns(
        (pl.col("low_busy_frac") > WASTED_ABOVE).cast(pl.Float64).alias("_wasted"),
        pl.when(pl.col("state") == "COMPLETED")
        .then(pl.col("runtime_s").clip(lower_bound=1.0).log())
        .alias("_log_rt"),
    )


def _asof(left: pl.DataFrame, right: pl.DataFrame, key: str) -> pl.DataFrame:
    return left.sort("start_ts").join_asof(
        right.sort("end_ts"),
        left_on="start_ts",
        right_on="end_ts",
        by=["cluster", key],
        strategy="backward",
        check_sortedness=False,
    )


def with_history(jobs: pl.DataFrame) -> pl.DataFrame:
    """Add, for each job, what had ended before its start:

    `user_jobs_before`, `user_waste_rate`, `account_waste_rate`, `name_waste_rate` (smoothed
    towards PRIOR_WASTE_RATE), `user_last2_log_runtime` (Tsafrir et al.: the mean of the user's
    last two completed run times, log seconds), `user_mean_log_runtime`, `name_mean_log_runtime`.
    """
    missing = REQUIRED_COLUMNS - set(jobs.columns)
    if missing:
        raise ValueError(f"job history: jobs lack columns {sorted(missing)!r}")
    ended = _ended(jobs).sort("end_ts")
    out = jobs
    for key, prefix in (("user", "user"), ("account", "account"), ("job_name", "name")):
        grp = ["cluster", key]
        cum = ended.select(
            "cluster",
            key,
            "end_ts",
            pl.col("_wasted").is_not_null().cast(pl.Float64).cum_sum().over(grp).alias("n"),
            pl.col("_wasted").fill_null(0.0).cum_sum().over(grp).alias("w"),
            pl.col("_log_rt").is_not_null().cast(pl.Float64).cum_sum().over(grp).alias("rn"),
            pl.col("_log_rt").fill_null(0.0).cum_sum().over(grp).alias("rs"),
            pl.col("_log_rt")
            .forward_fill()
            .rolling_mean(2, min_samples=1)
            .over(grp)
            .alias("last2"),
        )
        joined = _asof(out.select("cluster", "job_id", key, "start_ts"), cum, key)
        cols = [
            (
                (pl.col("w").fill_null(0.0) + PRIOR_WASTE_RATE * PRIOR_WEIGHT)
                / (pl.col("n").fill_null(0.0) + PRIOR_WEIGHT)
            ).alias(f"{prefix}_waste_rate"),
            pl.when(pl.col("rn") > 0)
            .then(pl.col("rs") / pl.col("rn"))
            .alias(f"{prefix}_mean_log_runtime"),
        ]
        if prefix == "user":
            cols += [
                pl.col("n").fill_null(0.0).alias("user_jobs_before"),
                pl.col("last2").alias("user_last2_log_runtime"),
            ]
        out = out.join(
            joined.select("cluster", "job_id", *cols), on=["cluster", "job_id"], how="left"
        )
    return out.sort("cluster", "start_ts", "job_id")


def time_split(frame: pl.DataFrame, column: str, train_frac: float) -> pl.Series:
    """True for rows in the first `train_frac` of each cluster's time span (the training part)."""
    t = pl.col(column).cast(pl.Int64)
    lo, hi = t.min().over("cluster"), t.max().over("cluster")
    return frame.select((t <= lo + (hi - lo) * train_frac).alias("train"))["train"]
