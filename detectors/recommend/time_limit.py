"""Time limits: partition DefaultTime/MaxTime and per-user `--time` hints from real run times.

Over-long limits hide free GPUs from backfill: a job asking 24 h for a 1-hour run blocks a
24-hour hole in the plan. From the window's completed GPU jobs this proposes, per partition,
DefaultTime = the run-time quantile × margin (rounded up) and MaxTime = the longest run of any
job that ended there, completed or not (a timed-out or failed job ran that long too), × margin
(rounded up to an hour); and per user whose median run uses a small fraction of the
limit, a `--time` value. The gain is reserved (not computed) GPU-hours released to backfill.

Slurm gives DefaultTime only to jobs submitted without `--time`, and the lake cannot tell
those from jobs that asked for the same limit, so a partition's gain counts only what MaxTime
takes back: GPUs × (old limit − MaxTime) for jobs that asked for more than it (every job that
ended ran within it). What DefaultTime would release if every job had taken the
default is evidence (`default_time_gpu_h_if_all_default`), not gain. A user's `--time` hint
is the user's own request, so its gain counts their jobs that ran within it:
GPUs × (old limit − hint).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.recommend.config import TimeLimitConfig
from detectors.recommend.recommendation import (
    ClusterFacts,
    Recommendation,
    hhmmss,
    round_up,
    sh,
    sh_comment,
)
from detectors.shell_words import scontrol_on
from detectors.wording import counted, noun_for
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["KIND", "QUERY", "recommend"]

KIND = "time_limit"
QUERY = "recommend/job_runtimes"
GAIN_IS = "GPU-hours of reservation released to backfill (jobs that ran within the new limit)"
PARTITION_GAIN_IS = (
    "GPU-hours of reservation released to backfill by MaxTime (jobs that asked for more than "
    "it); DefaultTime changes only jobs submitted without --time, which the lake cannot tell "
    "apart, so it adds nothing here"
)


def _quantile(values: pl.Series, q: float) -> float:
    """The `q` quantile taken as the next higher observation (an actual run time), 0 if none."""
    found = values.quantile(q, "higher")
    return float(found) if found is not None else 0.0


def _sum(values: pl.Series) -> float:
    return float(values.cast(pl.Float64).sum())


def _figures(jobs: pl.DataFrame, limit_s: float, quantile: float) -> dict[str, Any]:
    """Run-time statistics of `jobs` and what a limit of `limit_s` would have changed."""
    runtime = jobs["runtime_s"]
    limited = jobs.filter(pl.col("time_limit_s").is_not_null())
    within = limited.filter((pl.col("runtime_s") <= limit_s) & (pl.col("time_limit_s") > limit_s))
    return {
        "jobs": jobs.height,
        "runtime_p50_s": runtime.quantile(0.5, "higher"),
        f"runtime_p{round(quantile * 100)}_s": runtime.quantile(quantile, "higher"),
        "runtime_max_s": runtime.max(),
        "time_limit_median_s": limited["time_limit_s"].quantile(0.5, "higher"),
        "runtime_over_limit_ratio_median": (
            (limited["runtime_s"] / limited["time_limit_s"]).quantile(0.5, "higher")
            if limited.height
            else None
        ),
        "unused_limit_gpu_h": _sum(
            limited["gpus"] * (limited["time_limit_s"] - limited["runtime_s"]).clip(0)
        )
        / 3600.0,
        "released_gpu_h": _sum(within["gpus"] * (within["time_limit_s"] - limit_s)) / 3600.0,
        "jobs_over_new_limit": jobs.filter(pl.col("runtime_s") > limit_s).height,
    }


def _max_time_figures(jobs: pl.DataFrame, max_s: float) -> dict[str, Any]:
    """What MaxTime `max_s` takes back: the jobs that asked for more (none ran longer)."""
    over = jobs.filter(pl.col("time_limit_s").is_not_null() & (pl.col("time_limit_s") > max_s))
    return {
        "jobs_over_max_time": over.height,
        "max_time_released_gpu_h": _sum(over["gpus"] * (over["time_limit_s"] - max_s)) / 3600.0,
    }


def _partition_config(facts: ClusterFacts, partition: str, default_s: float, max_s: float) -> str:
    if facts.target == "kueue":
        return (
            f"# ClusterQueue {partition!r}: Kueue has no default run time; label each Job:\n"
            "metadata:\n"
            "  labels:\n"
            f'    kueue.x-k8s.io/max-exec-time-seconds: "{int(max_s)}"\n'
        )
    times = f"DefaultTime={hhmmss(default_s)} MaxTime={hhmmss(max_s)}"
    return (
        f"{scontrol_on(facts.cluster)} update {sh(f'PartitionName={partition}')} {times}\n"
        "# slurm.conf, to keep it after a restart: on the existing "
        f"PartitionName={sh_comment(partition)}\n"
        f"# line set {times} (do not add a second PartitionName={sh_comment(partition)} line:\n"
        "# slurmctld stops on a duplicate partition)\n"
    )


def _user_config(facts: ClusterFacts, user: str, time_s: float) -> str:
    if facts.target == "kueue":
        return (
            f"# for {sh_comment(user)}'s Jobs:\n"
            "metadata:\n"
            "  labels:\n"
            f'    kueue.x-k8s.io/max-exec-time-seconds: "{int(time_s)}"\n'
        )
    return f"# tell {sh_comment(user)}: in the batch script\n#SBATCH --time={hhmmss(time_s)}\n"


def recommend(
    con: duckdb.DuckDBPyConnection, facts: ClusterFacts, config: TimeLimitConfig
) -> list[Recommendation]:
    """One recommendation per partition with enough completed jobs, one per over-asking user.
    The default and the hints follow the completed jobs' run times; MaxTime is above every
    run that ended in the partition, whatever its state: a job that timed out, failed or was
    cancelled ran that long too (a NODE_FAIL job of 29.6 h was above a 16 h MaxTime whose risk
    said "none ran longer")."""
    ended = queries.run(con, QUERY, since=facts.window_start, until=facts.window_end).filter(
        pl.col("cluster") == facts.cluster
    )
    jobs = ended.filter(pl.col("state") == "COMPLETED")
    recs: list[Recommendation] = []
    q = config.quantile
    for (partition,), part in jobs.group_by(["partition"], maintain_order=True):
        if part.height < config.min_jobs or partition is None:
            continue
        every = ended.filter(pl.col("partition") == partition)
        default_s = round_up(_quantile(part["runtime_s"], q) * config.margin, config.round_s)
        max_s = round_up(_quantile(every["runtime_s"], 1.0) * config.margin, 3600)
        figures = _figures(part, default_s, q)
        default_if_all = figures.pop("released_gpu_h")
        figures |= _max_time_figures(every, max_s)
        if figures["max_time_released_gpu_h"] <= 0:
            continue
        recs.append(
            Recommendation(
                cluster=facts.cluster,
                kind=KIND,
                scope=f"partition={partition}",
                target=facts.target,
                evidence=figures
                | {
                    "default_time_s": default_s,
                    "max_time_s": max_s,
                    "default_time_gpu_h_if_all_default": default_if_all,
                    "gain_is": PARTITION_GAIN_IS,
                },
                expected_gain_gpu_h=figures["max_time_released_gpu_h"],
                gain_kind="backfill",
                risk=(
                    f"{figures['jobs_over_max_time']} of the {counted(every.height, 'job')} "
                    f"that ended asked for more than MaxTime {hhmmss(max_s)} and must ask "
                    "for less (none ran longer, whatever its end); "
                    f"{figures['jobs_over_new_limit']} ran longer than the new default "
                    f"{hhmmss(default_s)}: those submitted without --time must ask for more"
                ),
                config=_partition_config(facts, str(partition), default_s, max_s),
            )
        )
    for (user,), mine in jobs.group_by(["user"], maintain_order=True):
        limited = mine.filter(pl.col("time_limit_s").is_not_null())
        if limited.height < config.min_jobs or user is None:
            continue
        hint_s = round_up(_quantile(mine["runtime_s"], q) * config.margin, config.round_s)
        figures = _figures(mine, hint_s, q)
        ratio = figures["runtime_over_limit_ratio_median"]
        if (
            ratio is None
            or ratio > config.user_max_ratio
            or figures["unused_limit_gpu_h"] < config.user_min_unused_gpu_h
        ):
            continue
        recs.append(
            Recommendation(
                cluster=facts.cluster,
                kind=KIND,
                scope=f"user={user}",
                target=facts.target,
                evidence=figures | {"time_hint_s": hint_s, "gain_is": GAIN_IS},
                expected_gain_gpu_h=figures["released_gpu_h"],
                gain_kind="backfill",
                risk=(
                    f"{figures['jobs_over_new_limit']} of {mine.height} of {user}'s "
                    f"{noun_for(mine.height, 'job')} ran "
                    f"longer than {hhmmss(hint_s)}"
                ),
                config=_user_config(facts, str(user), hint_s),
            )
        )
    return recs
