"""Drain "lemon" nodes: hardware errors, critical hardware findings, or failures far above normal.

Per node over the window: hardware events (fatal XIDs, ECC DBE, row-remap failure, GPU
offline), critical findings of the hardware detectors when the lake has them, and its job
failure rate against the cluster's (Meta's lemon-node signals). The gain is the GPU time failed
jobs held on the node in the window: what the next window loses if the node stays in service.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.recommend.config import DrainConfig
from detectors.recommend.recommendation import ClusterFacts, Recommendation
from detectors.wording import counted
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["KIND", "QUERY", "drain_command", "recommend"]

KIND = "drain_node"
QUERY = "recommend/node_health"


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


def drain_command(node: str, reason: str) -> str:
    """`scontrol update … State=DRAIN` with the reason quoted for the shell whatever it holds
    (it is data: event kinds, counts) and without double quotes, which scontrol strips from a
    reason's end (seen on Slurm 22.05)."""
    reason = "gpuledger: " + reason.replace('"', "'")
    return f"scontrol update NodeName={shlex.quote(node)} State=DRAIN Reason={shlex.quote(reason)}"


def _config(facts: ClusterFacts, node: str, reason: str) -> str:
    reason = reason.replace('"', "'")
    if facts.target == "kueue":
        return (
            f"kubectl cordon {shlex.quote(node)}\n"
            f"kubectl taint nodes {shlex.quote(node)} gpuledger.io/lemon=true:NoSchedule\n"
            f"kubectl annotate node {shlex.quote(node)} "
            f"{shlex.quote('gpuledger.io/drain-reason=' + reason)}\n"
        )
    return drain_command(node, reason) + "\n"


def recommend(
    con: duckdb.DuckDBPyConnection, facts: ClusterFacts, config: DrainConfig
) -> list[Recommendation]:
    """One recommendation per node with hardware trouble or a lemon's failure rate."""
    nodes = queries.run(con, QUERY, since=facts.window_start, until=facts.window_end).filter(
        pl.col("cluster") == facts.cluster
    )
    jobs = int(nodes["jobs"].sum())
    rate = float(nodes["failed_jobs"].sum()) / jobs if jobs else 0.0
    lemon = (pl.col("failed_jobs") >= config.min_failures) & (
        pl.col("failed_jobs") >= config.lemon_ratio * rate * pl.col("jobs")
    )
    hardware = (pl.col("hw_events") >= config.min_hw_events) | (pl.col("critical_findings") > 0)
    recs = []
    for row in nodes.filter(hardware | lemon).iter_rows(named=True):
        reason = _reason(row, rate)
        node_rate = row["failed_jobs"] / row["jobs"] if row["jobs"] else None
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
                },
                expected_gain_gpu_h=float(row["failed_gpu_h"]),
                gain_kind="failures_avoided",
                risk=(
                    f"{counted(int(row['gpus']), 'GPU')} out of service until the node is repaired "
                    f"({row['gpus']} GPU-h per hour drained)"
                ),
                config=_config(facts, row["node"], reason),
            )
        )
    return recs
