"""Drain "lemon" nodes: hardware errors, critical hardware findings, or failures far above normal.

Per node over the window: hardware events (fatal XIDs, ECC DBE, row-remap failure, GPU
offline), critical findings of the hardware detectors when the lake has them, and its job
failure rate against the cluster's (Meta's lemon-node signals). Hardware trouble drains a
node only while it has not come back from it: a node that has run `healthy_jobs` jobs to a
successful end since its last hardware event or critical finding was repaired (or the fault
was transient), and only its failure rate can still make it a lemon.

The gain is the GPU time failed jobs held on the node beyond what the cluster's own failure
share would lose on the same GPU time: failed GPU-h − (cluster failed GPU-h / cluster held
GPU-h) × the node's held GPU-h, at least 0. Failures at the cluster's base rate would happen
on any node, so draining this one does not avoid them.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.recommend.config import DrainConfig
from detectors.recommend.recommendation import ClusterFacts, Recommendation
from detectors.shell_words import scontrol_on
from detectors.wording import counted
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["KIND", "QUERY", "drain_command", "recommend"]

KIND = "drain_node"
QUERY = "recommend/node_health"
GAIN_IS = (
    "GPU time failed jobs held on the node beyond the cluster's failure share of the same "
    "GPU time (failures at the base rate happen on any node)"
)


def _reason(row: dict[str, Any], rate: float) -> str:
    parts = []
    if row["hw_events"]:
        events = counted(int(row["hw_events"]), "hardware event")
        parts.append(f"{events}: {row['hw_event_kinds']}")
    if row["critical_findings"]:
        parts.append(counted(int(row["critical_findings"]), "critical finding"))
    if row["failed_jobs"]:
        jobs = counted(int(row["jobs"]), "job")
        parts.append(f"{row['failed_jobs']} of {jobs} failed (cluster rate {rate:.0%})")
    return "; ".join(parts)


def drain_command(cluster: str, node: str, reason: str) -> str:
    """`scontrol -M <cluster> update … State=DRAIN` (node names repeat across clusters) with
    the reason quoted for the shell whatever it holds (it is data: event kinds, counts) and
    without double quotes, which scontrol strips from a reason's end (seen on Slurm 22.05)."""
    reason = "gpuledger: " + reason.replace('"', "'")
    return (
        f"{scontrol_on(cluster)} update NodeName={shlex.quote(node)} State=DRAIN "
        f"Reason={shlex.quote(reason)}"
    )


def _config(facts: ClusterFacts, node: str, reason: str) -> str:
    reason = reason.replace('"', "'")
    if facts.target == "kueue":
        return (
            f"kubectl cordon {shlex.quote(node)}\n"
            f"kubectl taint nodes {shlex.quote(node)} gpuledger.io/lemon=true:NoSchedule\n"
            f"kubectl annotate node {shlex.quote(node)} "
            f"{shlex.quote('gpuledger.io/drain-reason=' + reason)}\n"
        )
    return drain_command(facts.cluster, node, reason) + "\n"


def recommend(
    con: duckdb.DuckDBPyConnection, facts: ClusterFacts, config: DrainConfig
) -> list[Recommendation]:
    """One recommendation per node with hardware trouble or a lemon's failure rate."""
    nodes = queries.run(con, QUERY, since=facts.window_start, until=facts.window_end).filter(
        pl.col("cluster") == facts.cluster
    )
    jobs = int(nodes["jobs"].sum())
    rate = float(nodes["failed_jobs"].sum()) / jobs if jobs else 0.0
    held = float(nodes["held_gpu_h"].sum())
    failed_share = float(nodes["failed_gpu_h"].sum()) / held if held else 0.0
    lemon = (pl.col("failed_jobs") >= config.min_failures) & (
        pl.col("failed_jobs") >= config.lemon_ratio * rate * pl.col("jobs")
    )
    hardware = (
        (pl.col("hw_events") >= config.min_hw_events) | (pl.col("critical_findings") > 0)
    ) & (pl.col("healthy_jobs_since") < config.healthy_jobs)
    recs = []
    for row in nodes.filter(hardware | lemon).iter_rows(named=True):
        reason = _reason(row, rate)
        node_rate = row["failed_jobs"] / row["jobs"] if row["jobs"] else None
        expected = failed_share * float(row["held_gpu_h"])
        avoidable = max(float(row["failed_gpu_h"]) - expected, 0.0)
        recs.append(
            Recommendation(
                cluster=facts.cluster,
                kind=KIND,
                scope=f"node={row['node']}",
                target=facts.target,
                evidence={
                    "hw_events": row["hw_events"],
                    "hw_event_kinds": row["hw_event_kinds"],
                    "critical_findings": row["critical_findings"],
                    "jobs": row["jobs"],
                    "failed_jobs": row["failed_jobs"],
                    "node_failure_rate": node_rate,
                    "cluster_failure_rate": rate,
                    "failed_gpu_h": row["failed_gpu_h"],
                    "held_gpu_h": row["held_gpu_h"],
                    "cluster_failed_gpu_h_share": failed_share,
                    "failed_gpu_h_at_cluster_rate": expected,
                    "healthy_jobs_since_trouble": row["healthy_jobs_since"],
                    "gain_is": GAIN_IS,
                },
                expected_gain_gpu_h=avoidable,
                gain_kind="failures_avoided",
                risk=(
                    f"{counted(int(row['gpus']), 'GPU')} out of service until the node is repaired "
                    f"({row['gpus']} GPU-h per hour drained)"
                ),
                config=_config(facts, row["node"], reason),
            )
        )
    return recs
