"""GPU billing weights (Slurm TRESBillingWeights; Kueue admission fair sharing resourceWeights).

Without a GRES/gpu weight Slurm bills jobs for CPUs only, so fair-share cannot see who holds
the GPUs. Per account this compares its share of CPU-only billing with its share of GPU-hours
and with the billing a GPU weight W (in CPUs) would give; W is configured, or the median CPUs
per GPU of the window's jobs (at least 1). Proposed when some account's CPU-only billing
share misses its GPU-hour share by `min_share_gap` or more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from detectors.recommend.config import BillingConfig
from detectors.recommend.recommendation import ClusterFacts, Recommendation, sh
from detectors.shell_words import scontrol_on
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["KIND", "QUERY", "recommend"]

KIND = "gpu_billing"
QUERY = "recommend/window_jobs"


def _weight(jobs: pl.DataFrame, config: BillingConfig) -> float:
    if config.gpu_weight is not None:
        return config.gpu_weight
    ratios = jobs.filter(pl.col("cpus").is_not_null() & (pl.col("gpus") > 0)).select(
        pl.col("cpus") / pl.col("gpus")
    )
    if ratios.is_empty():
        return 1.0
    return max(1.0, float(ratios.to_series().quantile(0.5, "higher")))  # type: ignore[arg-type]


def _format(weight: float) -> str:
    return f"{weight:g}"


def _config(facts: ClusterFacts, partitions: list[str], weight: float) -> str:
    w = _format(weight)
    if facts.target == "kueue":
        return (
            "# Kueue's Configuration (the kueue-manager-config ConfigMap,\n"
            "# controller_manager_config.yaml); admission fair sharing is alpha (Kueue >= 0.12,\n"
            "# feature gate AdmissionFairSharing) and ClusterQueues opt in with\n"
            "# spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing\n"
            "apiVersion: config.kueue.x-k8s.io/v1beta1\n"
            "kind: Configuration\n"
            "admissionFairSharing:\n"
            '  usageHalfLifeTime: "168h"\n'
            '  usageSamplingInterval: "5m"\n'
            "  resourceWeights:\n"
            "    cpu: 1\n"
            f"    nvidia.com/gpu: {w}\n"
        )
    weights = f'TRESBillingWeights="CPU=1.0,GRES/gpu={w}"'
    scontrol = scontrol_on(facts.cluster)
    lines = [f"{scontrol} update {sh(f'PartitionName={p}')} {weights}" for p in partitions]
    lines += [
        "# slurm.conf, to keep it after a restart: on each of these PartitionName= lines set",
        f"# {weights} (do not add a second line for a partition: slurmctld stops on a",
        "# duplicate partition). GPUs are billed only when AccountingStorageTRES lists gres/gpu:",
        "# add it to that line if missing and restart slurmctld (it sets TRES up at start).",
    ]
    return "\n".join(lines) + "\n"


def recommend(
    con: duckdb.DuckDBPyConnection, facts: ClusterFacts, config: BillingConfig
) -> list[Recommendation]:
    """At most one recommendation per cluster: bill GPUs at W CPUs each."""
    jobs = queries.run(con, QUERY, since=facts.window_start, until=facts.window_end).filter(
        (pl.col("cluster") == facts.cluster) & pl.col("account").is_not_null()
    )
    if jobs.is_empty():
        return []
    weight = _weight(jobs, config)
    hours = (pl.col("end_e") - pl.col("start_e")) / 3600.0
    accounts = (
        jobs.group_by("account")
        .agg(
            (hours * pl.col("cpus").fill_null(0)).sum().alias("cpu_h"),
            (hours * pl.col("gpus")).sum().alias("gpu_h"),
        )
        .sort("account")
        .with_columns((pl.col("cpu_h") + weight * pl.col("gpu_h")).alias("billed_h"))
        .with_columns(
            (pl.col("cpu_h") / pl.col("cpu_h").sum()).alias("cpu_only_share"),
            (pl.col("gpu_h") / pl.col("gpu_h").sum()).alias("gpu_share"),
            (pl.col("billed_h") / pl.col("billed_h").sum()).alias("proposed_share"),
        )
    )
    if float(accounts["cpu_h"].sum()) <= 0 or float(accounts["gpu_h"].sum()) <= 0:
        return []
    gaps = (accounts["cpu_only_share"] - accounts["gpu_share"]).abs()
    gap = float(gaps.max())  # type: ignore[arg-type]
    if gap < config.min_share_gap:
        return []
    rising = accounts.filter(pl.col("proposed_share") > pl.col("cpu_only_share"))["account"]
    partitions = sorted({p for p in jobs["partition"].to_list() if p is not None})
    return [
        Recommendation(
            cluster=facts.cluster,
            kind=KIND,
            scope="cluster",
            target=facts.target,
            evidence={
                "gpu_weight_cpus": weight,
                "largest_share_gap": gap,
                "accounts": accounts.to_dicts(),
            },
            expected_gain_gpu_h=None,
            risk="billed usage (and so fair-share priority cost) rises for "
            + ", ".join(rising.to_list()),
            config=_config(facts, partitions, weight),
        )
    ]
