"""Stranded GPUs: jobs whose CPU or host-memory request leaves their node's other GPUs unusable.

A free GPU is usable only with its share of the node's CPUs and memory (node size ÷ GPUs).
Reads single-node jobs with their requests and node sizes (sql/detectors/job_host_requests.sql).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.findings import Severity, as_frame
from detectors.rules.base import Rule, Window, evidence
from detectors.rules.thresholds import StrandedThresholds
from detectors.wording import counted_expr

if TYPE_CHECKING:
    from detectors.rules.config import RuleConfig

__all__ = ["RULES", "StrandedThresholds"]


def _params(config: RuleConfig, window: Window) -> dict[str, Any]:
    return {"since": window.since}


def _detect(jobs: pl.DataFrame, config: RuleConfig, window: Window) -> pl.DataFrame:
    t = config.stranded
    per_gpu_cpus = pl.col("node_cpus_seen") / pl.col("node_gpus")
    per_gpu_mem = pl.col("node_mem_mib_seen") / pl.col("node_gpus")
    free = (pl.col("node_gpus") - pl.col("gpus")).clip(0)
    by_cpu = ((pl.col("node_cpus_seen") - pl.col("cpus")) / per_gpu_cpus).floor()
    by_mem = ((pl.col("node_mem_mib_seen") - pl.col("mem_req_mib")) / per_gpu_mem).floor()
    usable = pl.min_horizontal(free, by_cpu.fill_nan(None), by_mem.fill_nan(None)).clip(0)
    runtime_h = pl.col("runtime_s") / 3600
    # a job still running is counted up to the end of its cluster's data (or `now`, if that is
    # earlier): a lake read a month later must not strand its GPUs for the month
    until = pl.min_horizontal(pl.col("data_end").fill_null(window.now), pl.lit(window.now))
    so_far = (until - pl.col("start_ts")).dt.total_milliseconds() / 1000
    jobs = jobs.with_columns(pl.col("runtime_s").fill_null(so_far.clip(0)))
    found = jobs.with_columns(
        (free - usable).cast(pl.Int64).alias("stranded_gpus"),
        (pl.col("cpus") / pl.col("gpus")).alias("cpus_per_gpu"),
        # the most of each resource per GPU that leaves the other GPUs their share; null
        # where that resource strands none of them (only what strands GPUs needs changing)
        pl.when(by_cpu.fill_nan(None) < free)
        .then(per_gpu_cpus.floor().cast(pl.Int64))
        .alias("max_cpus_per_gpu"),
        pl.when(by_mem.fill_nan(None) < free)
        .then((per_gpu_mem / 1024).floor().cast(pl.Int64))
        .alias("max_mem_per_gpu_gib"),
    ).filter(
        (pl.col("stranded_gpus") >= max(t.min_stranded_gpus, 1))
        & (pl.col("runtime_s") >= t.min_runtime_minutes * 60)
        # a share under 1 CPU or 1 GiB per GPU is no node's: its size is the most its jobs
        # held at once, seen too rarely to tell (2 CPUs of a 16-CPU node, 3 of its 8 GPUs),
        # which asked a 1-GPU job for "--cpus-per-gpu=0 or less"
        & ~(pl.col("max_cpus_per_gpu") < 1).fill_null(False)
        & ~(pl.col("max_mem_per_gpu_gib") < 1).fill_null(False)
    )
    return found.with_columns(
        pl.lit("stranded_gpus").alias("detector"),
        pl.lit(Severity.WARN.value).alias("severity"),
        pl.lit("job").alias("subject_kind"),
        pl.col("job_id").alias("subject_id"),
        pl.col("start_ts").alias("anchor_ts"),
        pl.lit(None, pl.String).alias("gpu_uuid"),
        pl.lit(False).alias("predicted"),
        (pl.col("stranded_gpus") / free).clip(0, 1).cast(pl.Float32).alias("score"),
        (pl.col("stranded_gpus") * runtime_h).alias("gpu_h_at_stake"),
        pl.format(
            "Job {} ({}): {} with {} and {} GiB on {} left {} of the node's {} GPUs "
            "unusable for {} h ({} GPU-h); ask for {}",
            "job_id",
            pl.col("user").fill_null("unknown user"),
            counted_expr("gpus", "GPU"),
            counted_expr("cpus", "CPU"),
            (pl.col("mem_req_mib") / 1024).round(0).cast(pl.Int64),
            "node",
            "stranded_gpus",
            pl.col("node_gpus").cast(pl.Int64),
            runtime_h.round(2),
            (pl.col("stranded_gpus") * runtime_h).round(2),
            pl.concat_str(
                pl.format("--cpus-per-gpu={} or less", "max_cpus_per_gpu"),
                pl.format("--mem-per-gpu={}G or less", "max_mem_per_gpu_gib"),
                separator=" and ",
                ignore_nulls=True,
            ),
        ).alias("message"),
        evidence(
            "gpus",
            "cpus",
            "mem_req_mib",
            "node_gpus",
            "node_cpus_seen",
            "node_mem_mib_seen",
            "stranded_gpus",
            "max_cpus_per_gpu",
            "max_mem_per_gpu_gib",
        ),
    ).pipe(as_frame)


RULES = (Rule("stranded_gpus", "detectors/job_host_requests", _params, _detect),)
