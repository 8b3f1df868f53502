"""Idle-cancel policy: replay "warn after X, cancel after Y minutes of full idleness" on history.

For each candidate (X, Y) a job is warned when some run of full idleness (every GPU of the job
idle) reaches X minutes and cancelled at the point its first such run reaches Y minutes. The
replay reports GPU-hours recovered (GPUs × time from the cancel point to the job's real end),
false kills (cancelled jobs that were active again afterwards) and the GPU-hours those false
kills would have lost; the gain is recovered minus disrupted.

Idle here is what the proposed Job Defense Shield rule sees: no GPU activity and no GPU
utilization (sql/recommend/idle_runs.sql). A hung job (GPU_UTIL high, SM activity ~0) shows
100 % utilization to JDS, which never cancels it, so the replay leaves it out rather than
credit the rule with GPU-hours it would not recover; the `hung_job` detector reports those.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.recommend.config import IdleCancelConfig
from detectors.recommend.recommendation import ClusterFacts, Recommendation
from detectors.wording import counted
from warehouse import queries
from warehouse.partitions import built_bucket_s

if TYPE_CHECKING:
    import duckdb

__all__ = ["KIND", "QUERY", "recommend", "replay"]

KIND = "idle_cancel_policy"
QUERY = "recommend/idle_runs"
IDLE_IS = (
    "every GPU of the job with no activity and GPU utilization under 1 %, as Job Defense "
    "Shield's cancel-zero-gpu-jobs sees it; hung GPUs (utilization high, no SM activity) are "
    "not idle to it and are not counted"
)


def replay(runs: pl.DataFrame, warn_min: int, cancel_min: int) -> dict[str, Any]:
    """The figures of one (warn, cancel) policy over the idle runs of one cluster."""
    length = pl.col("run_end_e") - pl.col("run_start_e")
    warned = runs.filter(length >= warn_min * 60)["job_id"].n_unique()
    cancelled = (
        runs.filter(length >= cancel_min * 60)
        .with_columns((pl.col("run_start_e") + cancel_min * 60).alias("cancel_e"))
        .sort("cancel_e")
        .unique("job_id", keep="first")
        .with_columns(
            (pl.col("gpus") * (pl.col("job_end_e") - pl.col("cancel_e")) / 3600.0).alias("freed"),
            (pl.col("last_active_e").fill_null(0) > pl.col("cancel_e")).alias("false_kill"),
        )
    )
    jobs = cancelled.height
    false_kills = int(cancelled["false_kill"].sum()) if jobs else 0
    recovered = float(cancelled["freed"].sum()) if jobs else 0.0
    disrupted = float(cancelled.filter(pl.col("false_kill"))["freed"].sum()) if jobs else 0.0
    return {
        "warn_minutes": warn_min,
        "cancel_minutes": cancel_min,
        "jobs_warned": warned,
        "jobs_cancelled": jobs,
        "interactive_cancelled": int(cancelled["interactive"].sum()) if jobs else 0,
        "false_kills": false_kills,
        "false_kill_rate": false_kills / jobs if jobs else 0.0,
        "gpu_h_recovered": recovered,
        "gpu_h_disrupted": disrupted,
        "gain_gpu_h": recovered - disrupted,
        "false_kill_jobs": sorted(cancelled.filter(pl.col("false_kill"))["job_id"].to_list()),
        "users_hit": cancelled["user"].n_unique() if jobs else 0,
    }


def _config(facts: ClusterFacts, best: dict[str, Any], partitions: list[str]) -> str:
    warn, cancel = best["warn_minutes"], best["cancel_minutes"]
    if facts.target == "kueue":
        return (
            "# Kueue has no idle timeout; gpuledger (or an external culler such as gpu-pruner)\n"
            f"# deactivates a Workload whose GPUs were all idle for {cancel} minutes:\n"
            "# gpuledger.toml\n"
            "[alerts]\n"
            f"idle_after_minutes = {warn}\n"
            f"# at {cancel} idle minutes:\n"
            "kubectl -n <namespace> patch workload <workload> --type=merge "
            '-p \'{"spec":{"active":false}}\'\n'
        )
    # Job Defense Shield reads `partitions` as a list of names (no wildcard) and, with a
    # sliding window, needs its two email files and a cache folder; gpu_frac_threshold 0.01
    # spares a job with any GPU at work, as the replay did (its default 1.0 cancels a job
    # with one idle GPU of eight).
    listed = "".join(f"    - {json.dumps(p)}\n" for p in partitions)
    return (
        "# Slurm has no idle timeout; notify at the warning, cancel at the limit.\n"
        "# gpuledger.toml\n"
        "[alerts]\n"
        f"idle_after_minutes = {warn}\n"
        "# Job Defense Shield config.yaml, run from cron every 5 minutes (its\n"
        "# sampling_period_minutes); its sliding window is what was replayed (any stretch of\n"
        "# full idleness, not only the first one):\n"
        "cancel-zero-gpu-jobs-1:\n"
        f"  cluster: {json.dumps(facts.cluster)}\n"
        "  partitions:\n"
        f"{listed}"
        "  sampling_period_minutes: 5\n"
        f"  sliding_warning_minutes: {warn}\n"
        f"  sliding_cancel_minutes: {cancel}\n"
        '  email_file_sliding_warning: "cancel_gpu_jobs_sliding_warning.txt"\n'
        '  email_file_sliding_cancel: "cancel_gpu_jobs_sliding_cancel.txt"\n'
        "  jobid_cache_path: /var/cache/job_defense_shield/\n"
        "  gpu_frac_threshold: 0.01\n"
        f"# what it runs at {cancel} idle minutes: scancel <jobid>\n"
    )


def recommend(
    con: duckdb.DuckDBPyConnection,
    facts: ClusterFacts,
    config: IdleCancelConfig,
) -> list[Recommendation]:
    """At most one idle-cancel recommendation for the cluster: the best admissible candidate."""
    runs = queries.run(
        con,
        QUERY,
        since=facts.window_start,
        until=facts.window_end,
        bucket_s=built_bucket_s(con, config.bucket_s),  # the marts', whatever configured
    ).filter(pl.col("cluster") == facts.cluster)
    if runs.is_empty():
        return []
    scores = [replay(runs, warn, cancel) for warn, cancel in config.candidates if warn < cancel]
    admissible = [
        s
        for s in scores
        if s["false_kill_rate"] <= config.max_false_kill_rate
        and s["gain_gpu_h"] >= config.min_gain_gpu_h
    ]
    if not admissible:
        return []
    best = max(admissible, key=lambda s: (s["gain_gpu_h"], -s["cancel_minutes"]))
    evidence = {
        "jobs_with_idle_runs": runs["job_id"].n_unique(),
        "chosen": best,
        "candidates": scores,
        "max_false_kill_rate": config.max_false_kill_rate,
        "idle_is": IDLE_IS,
    }
    one = best["false_kills"] == 1 or best["jobs_cancelled"] == 1  # "1 of 3 … was"
    risk = (
        f"{best['false_kills']} of {counted(best['jobs_cancelled'], 'cancelled job')} "
        f"{'was' if one else 'were'} active again "
        f"after {best['cancel_minutes']} idle minutes ({best['gpu_h_disrupted']:.1f} GPU-h "
        f"disrupted); {best['interactive_cancelled']} interactive"
    )
    return [
        Recommendation(
            cluster=facts.cluster,
            kind=KIND,
            scope="cluster",
            target=facts.target,
            evidence=evidence,
            expected_gain_gpu_h=best["gain_gpu_h"],
            gain_kind="saved",
            risk=risk,
            config=_config(facts, best, sorted(set(runs["partition"].drop_nulls().to_list()))),
        )
    ]
