"""GPU power caps for partitions that mostly run low-activity work.

A job whose SMs are mostly idle (SM activity below `sm_below`) but draws high power loses
little speed under a power cap. Per partition: the share of GPU-hours in such jobs, and the
energy a cap at `cap_frac` of the board limit would have saved — each low-activity job's mean
draw above the cap × its GPU-hours (a lower bound: draw above the cap in its peaks is not
counted). The gain is energy (`kwh_saved` in the evidence), so expected_gain_gpu_h is null.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from detectors.recommend.config import PowerCapConfig
from detectors.recommend.recommendation import ClusterFacts, Recommendation, sh, sh_comment
from detectors.wording import counted
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["KIND", "QUERY", "recommend"]

KIND = "power_cap"
QUERY = "recommend/job_power"


def _config(facts: ClusterFacts, partition: str, nodes: list[str], cap_w: int) -> str:
    hosts = ",".join(nodes)
    if facts.target == "kueue":
        return (
            f"# nodes of ClusterQueue {sh_comment(partition)}: {sh_comment(hosts)}\n"
            f"# GPU operator: a DCGM config per node, or on each node:\n"
            f"nvidia-smi -pl {sh(cap_w)}\n"
            f"kubectl label node {' '.join(sh(n) for n in nodes)} "
            f"{sh(f'gpuledger.io/power-cap-w={cap_w}')} --overwrite\n"
        )
    return (
        f"# on every node of partition {sh_comment(partition)} ({sh_comment(hosts)}), e.g. from "
        "the Slurm node Prolog:\n"
        f"pdsh -w {sh(hosts)} nvidia-smi -pl {sh(cap_w)}\n"
        f"# or with DCGM: dcgmi config --set -P {sh(cap_w)}\n"
    )


def recommend(
    con: duckdb.DuckDBPyConnection, facts: ClusterFacts, config: PowerCapConfig
) -> list[Recommendation]:
    """One recommendation per partition whose low-activity GPU-hours a cap would make cheaper."""
    jobs = queries.run(con, QUERY, since=facts.window_start, until=facts.window_end).filter(
        (pl.col("cluster") == facts.cluster) & pl.col("partition").is_not_null()
    )
    recs = []
    for (partition,), part in jobs.group_by(["partition"], maintain_order=True):
        limit_w = float(part["power_limit_w"].max())  # type: ignore[arg-type]
        cap_w = int(round(config.cap_frac * limit_w))
        low = part.filter(pl.col("sm_active_mean") < config.sm_below)
        total_h = float(part["observed_gpu_h"].sum())
        low_h = float(low["observed_gpu_h"].sum())
        if total_h <= 0 or low_h / total_h < config.min_low_share:
            continue
        kwh = (
            float(
                ((low["power_w_mean"].fill_null(0) - cap_w).clip(0) * low["observed_gpu_h"]).sum()
            )
            / 1000.0
        )
        if kwh < config.min_kwh:
            continue
        busy = part.filter(pl.col("sm_active_mean") >= config.sm_below)
        nodes = sorted({n for ns in part["nodes"].drop_nulls() for n in ns.split(",")})
        recs.append(
            Recommendation(
                cluster=facts.cluster,
                kind=KIND,
                scope=f"partition={partition}",
                target=facts.target,
                evidence={
                    "power_limit_w": limit_w,
                    "cap_w": cap_w,
                    "gpu_h": total_h,
                    "low_activity_gpu_h": low_h,
                    "low_activity_share": low_h / total_h,
                    "low_activity_jobs": low.height,
                    "energy_kwh": float(part["energy_kwh"].sum()),
                    "kwh_saved": kwh,
                    "nodes": nodes,
                },
                expected_gain_gpu_h=None,
                risk=(
                    f"{counted(busy.height, 'job')} with SM activity >= {config.sm_below} "
                    f"({float(busy['observed_gpu_h'].sum()):.1f} GPU-h) may run slower under "
                    f"{cap_w} W"
                ),
                config=_config(facts, str(partition), nodes, cap_w),
            )
        )
    return recs
