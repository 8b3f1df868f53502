"""Per-user GPU caps (Slurm GrpTRES on the user's association; Kueue a capped ClusterQueue).

Replays each (user, account) association's running GPU count over the window. The cap is a
share of the cluster's GPUs, never below the association's largest job (so no job becomes
unschedulable). The gain is the GPU-hours the association held above the cap, which jobs of
other users waiting at those times could have had; the risk is the same hours of its own
work delayed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import polars as pl

from detectors.recommend.config import GpuCapConfig
from detectors.recommend.recommendation import ClusterFacts, Recommendation
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["KIND", "QUERY", "running_gpus", "recommend"]

KIND = "gpu_cap"
QUERY = "recommend/window_jobs"


def running_gpus(jobs: pl.DataFrame) -> pl.DataFrame:
    """Step function of GPUs held: one row per (seg_start_e, seg_end_e) with `running` GPUs."""
    events = (
        pl.concat(
            [
                jobs.select(pl.col("start_e").alias("t"), pl.col("gpus").alias("delta")),
                jobs.select(pl.col("end_e").alias("t"), (-pl.col("gpus")).alias("delta")),
            ]
        )
        .group_by("t")
        .agg(pl.col("delta").sum())
        .sort("t")
    )
    return (
        events.with_columns(
            pl.col("delta").cum_sum().alias("running"),
            pl.col("t").shift(-1).alias("seg_end_e"),
        )
        .rename({"t": "seg_start_e"})
        .drop_nulls("seg_end_e")
        .select("seg_start_e", "seg_end_e", "running")
    )


def _waiting(others: pl.DataFrame, above: pl.DataFrame) -> tuple[int, float]:
    """Other users' jobs pending while the association was above its cap, and their GPU-hours."""
    if others.is_empty() or above.is_empty():
        return 0, 0.0
    overlap = (
        others.join(above, how="cross")
        .with_columns(
            (
                pl.min_horizontal("start_e", "seg_end_e")
                - pl.max_horizontal("submit_e", "seg_start_e")
            ).alias("overlap_s")
        )
        .filter(pl.col("overlap_s") > 0)
    )
    gpu_h = float((overlap["gpus"] * overlap["overlap_s"]).sum()) / 3600.0
    return overlap["job_id"].n_unique(), gpu_h


def _config(facts: ClusterFacts, user: str, account: str, cap: int) -> str:
    if facts.target == "kueue":
        name = f"{account}-{user}"
        return (
            "apiVersion: kueue.x-k8s.io/v1beta1\n"
            "kind: ClusterQueue\n"
            "metadata:\n"
            f"  name: {name}\n"
            "spec:\n"
            f"  cohort: {account}\n"
            "  namespaceSelector: {}\n"
            "  resourceGroups:\n"
            '  - coveredResources: ["nvidia.com/gpu"]\n'
            "    flavors:\n"
            "    - name: default-flavor\n"
            "      resources:\n"
            '      - name: "nvidia.com/gpu"\n'
            f"        nominalQuota: {cap}\n"
            "        borrowingLimit: 0\n"
            "---\n"
            "apiVersion: kueue.x-k8s.io/v1beta1\n"
            "kind: LocalQueue\n"
            "metadata:\n"
            f"  namespace: {account}\n"
            f"  name: {user}\n"
            "spec:\n"
            f"  clusterQueue: {name}\n"
        )
    return (
        f"sacctmgr -i modify user where name={user} account={account} cluster={facts.cluster} "
        f"set GrpTRES=gres/gpu={cap}\n"
        f"# or for every user of a QOS: sacctmgr -i modify qos normal set "
        f"MaxTRESPerUser=gres/gpu={cap}\n"
    )


def recommend(
    con: duckdb.DuckDBPyConnection, facts: ClusterFacts, config: GpuCapConfig
) -> list[Recommendation]:
    """A cap for each association that held GPUs above it while other users' jobs waited."""
    jobs = queries.run(con, QUERY, since=facts.window_start, until=facts.window_end).filter(
        pl.col("cluster") == facts.cluster
    )
    if jobs.is_empty() or facts.gpus_total <= 0:
        return []
    base_cap = math.ceil(facts.gpus_total * config.cap_share - 1e-9)
    total_gpu_h = float(((jobs["end_e"] - jobs["start_e"]) * jobs["gpus"]).sum()) / 3600.0
    recs: list[Recommendation] = []
    for (user, account), mine in jobs.group_by(["user", "account"], maintain_order=True):
        if user is None:
            continue
        cap = max(base_cap, int(mine["gpus"].max()))  # type: ignore[arg-type]
        steps = running_gpus(mine).with_columns(
            (pl.col("seg_end_e") - pl.col("seg_start_e")).alias("dur_s")
        )
        above = steps.filter(pl.col("running") > cap)
        excess = float(((above["running"] - cap) * above["dur_s"]).sum()) / 3600.0
        if excess < config.min_excess_gpu_h:
            continue
        waiting, waited_gpu_h = _waiting(jobs.filter(pl.col("user") != user), above)
        if waiting < config.min_waiting_jobs:
            continue
        gpu_h = float(((mine["end_e"] - mine["start_e"]) * mine["gpus"]).sum()) / 3600.0
        evidence = {
            "cluster_gpus": facts.gpus_total,
            "cap_gpus": cap,
            "peak_gpus": int(steps["running"].max()),  # type: ignore[arg-type]
            "largest_job_gpus": int(mine["gpus"].max()),  # type: ignore[arg-type]
            "gpu_h": gpu_h,
            "share_of_cluster_gpu_h": gpu_h / total_gpu_h if total_gpu_h else None,
            "hours_above_cap": float(above["dur_s"].sum()) / 3600.0,
            "gpu_h_above_cap": excess,
            "other_jobs_waiting_meanwhile": waiting,
            "other_waiting_gpu_h_meanwhile": waited_gpu_h,
        }
        recs.append(
            Recommendation(
                cluster=facts.cluster,
                kind=KIND,
                scope=f"user={user},account={account}",
                target=facts.target,
                evidence=evidence,
                expected_gain_gpu_h=excess,
                risk=f"{excess:.1f} GPU-h of {user}'s work would have waited for the cap",
                config=_config(facts, str(user), str(account), cap),
            )
        )
    return recs
