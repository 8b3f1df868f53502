"""MIG packing: turn some whole GPUs into MIG slices for one-GPU jobs that use a fraction of one.

A one-GPU job with busy_mean below the threshold and small peak memory needs the smallest MIG
profile whose compute (g of 7 slices) covers its busy fraction and whose memory (1/8 of the
GPU per memory slice; 4/8 for 3g and 4g) holds its peak × headroom. Each such job frees
(1 − g/7) of its GPU-hours. The number of GPUs to convert is the average number of slices the
candidates held at once (Σ GPU-h × g over the span of the data), divided by 7, rounded up.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING

import polars as pl

from detectors.mig_profiles import PROFILES, profile_for, profile_name
from detectors.recommend.config import MigPackingConfig
from detectors.recommend.kueue import cluster_queue
from detectors.recommend.recommendation import ClusterFacts, Recommendation, sh
from detectors.wording import counted, noun_for
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["KIND", "PROFILES", "QUERY", "profile_for", "profile_name", "recommend"]

KIND = "mig_packing"
QUERY = "recommend/single_gpu_jobs"
# one GPU's layout for the profile most jobs need (valid NVIDIA MIG geometries)
LAYOUTS: dict[int, tuple[int, ...]] = {1: (1,) * 7, 2: (2, 2, 2, 1), 3: (3, 3), 4: (4, 3), 7: (7,)}


def _config(
    facts: ClusterFacts, g: int, gpus: int, fb_total_mib: float, mem: dict[int, int]
) -> str:
    layout = LAYOUTS[g]
    names = [profile_name(s, mem[s], fb_total_mib) for s in layout]
    counts = Counter(names)
    gres = ",".join(f"gpu:{n}:{c * gpus}" for n, c in counts.items())
    if facts.target == "kueue":
        return (
            f"# GPU operator (mixed strategy), {counted(gpus, 'GPU')} to convert: "
            "nvidia.com/mig.config\n"
            "# converts every GPU of the labelled node (a mig-parted config of your own can\n"
            "# select devices); set the ClusterQueue's quotas to the slices that result\n"
            f"kubectl label node <node> {sh(f'nvidia.com/mig.config=all-{names[0]}')} "
            "--overwrite\n"
            "---\n"
            + cluster_queue('"mig"', [(f"nvidia.com/mig-{n}", c * gpus) for n, c in counts.items()])
        )
    # node-side steps, not sacctmgr/scontrol commands: comments like every slurm.conf edit,
    # so the config stays a script an operator can paste (`<node>` is theirs to fill in)
    return (
        f"# on {counted(gpus, 'GPU')}, e.g. GPU 0 of <node> (drain the node first), run there:\n"
        "#   nvidia-smi -i 0 -mig 1\n"
        f"#   nvidia-smi mig -i 0 -cgi {sh(','.join(names))} -C\n"
        "# gres.conf on the node:\n"
        "#   AutoDetect=nvml\n"
        "# slurm.conf: on the existing NodeName=<node> line, count the converted "
        f"{noun_for(gpus, 'GPU')} as\n"
        f"# slices: Gres=gpu:<model>:<whole GPUs left>,{gres} (do not add a second\n"
        "# NodeName=<node> line: slurmctld ignores or rejects a duplicate node), then restart\n"
        "# slurmd on the node and slurmctld; and add the partition:\n"
        "#   PartitionName=mig Nodes=<node> DefaultTime=04:00:00\n"
        f"# users: sbatch --partition=mig {sh(f'--gres=gpu:{names[0]}:1')}\n"
    )


def recommend(
    con: duckdb.DuckDBPyConnection, facts: ClusterFacts, config: MigPackingConfig
) -> list[Recommendation]:
    """At most one recommendation per cluster: how many GPUs to convert, and to which slices."""
    jobs = queries.run(con, QUERY, since=facts.window_start, until=facts.window_end).filter(
        (pl.col("cluster") == facts.cluster)
        & (pl.col("busy_mean") < config.busy_below)
        & (pl.col("fb_used_mib_max").fill_null(0) <= config.fb_max_mib)
    )
    if jobs.is_empty() or facts.data_h <= 0:
        return []
    slices = [
        profile_for(b, f or 0.0, t, config.fb_headroom)
        for b, f, t in zip(
            jobs["busy_mean"], jobs["fb_used_mib_max"], jobs["fb_total_mib"], strict=True
        )
    ]
    jobs = jobs.with_columns(pl.Series("slices", slices, pl.Int64)).filter(pl.col("slices") < 7)
    gpu_h = float(jobs["alloc_gpu_h"].sum())
    if jobs.is_empty() or gpu_h < config.min_gpu_h:
        return []
    freed = float((jobs["alloc_gpu_h"] * (1 - jobs["slices"] / 7)).sum())
    slice_h = float((jobs["alloc_gpu_h"] * jobs["slices"]).sum())
    gpus = math.ceil(slice_h / 7 / facts.data_h - 1e-9)
    fb_total = float(jobs["fb_total_mib"].max())  # type: ignore[arg-type]
    mem = dict(PROFILES)
    per_profile = (
        jobs.group_by("slices")
        .agg(pl.len().alias("jobs"), pl.col("alloc_gpu_h").sum().alias("gpu_h"))
        .sort("slices")
        .with_columns(
            pl.col("slices")
            .replace_strict({g: profile_name(g, m, fb_total) for g, m in PROFILES})
            .alias("profile")
        )
    )
    common = int(per_profile.sort(["jobs", "slices"], descending=[True, False])["slices"][0])
    evidence = {
        "candidate_jobs": jobs.height,
        "candidate_gpu_h": gpu_h,
        "users": jobs["user"].n_unique(),
        "interactive_jobs": int(jobs["interactive"].sum()),
        "slice_gpu_h": slice_h,
        "data_h": facts.data_h,
        "gpus_to_convert": gpus,
        "gpu_h_freed": freed,
        "per_profile": per_profile.to_dicts(),
        "busy_below": config.busy_below,
        "fb_max_mib": config.fb_max_mib,
    }
    return [
        Recommendation(
            cluster=facts.cluster,
            kind=KIND,
            scope="cluster",
            target=facts.target,
            evidence=evidence,
            expected_gain_gpu_h=freed,
            gain_kind="saved",
            risk=(
                f"{counted(gpus, 'GPU')} {noun_for(gpus, 'leaves', 'leave')} the whole-GPU pool; "
                "jobs whose use grows beyond their "
                "slice run slower (MIG slices do not borrow idle compute)"
            ),
            config=_config(facts, common, gpus, fb_total, mem),
        )
    ]
