"""What limited each job, from its DCGM counters: compute, memory, input, communication, or nothing.

Reads the signals of sql/detectors/bottleneck_signals.sql (time-weighted SM, tensor and DRAM
activity, NVLink rate, and how bursty the job's busy fraction is) and names one bottleneck per
job with the advice that fits it. The rules are ordered; the first that matches wins:

1. `unobserved`: no attributed samples (nothing to diagnose).
2. `idle`: busy_mean below `idle_busy_below` — the GPUs did (almost) nothing.
3. `stalled`: idle by activity, but GPU_UTIL says a kernel was resident (a hung collective).
4. `unprofiled`: active, but no SM-activity field (DCGM profiling off): the limiter is unknown.
5. `compute_bound`: SM activity ≥ `compute_sm_above` or tensor activity ≥ `compute_tensor_above`.
6. `communication_bound`: NVLink ≥ `nvlink_gbps_above` per GPU while SM < `low_sm_below`.
7. `memory_bound`: DRAM activity ≥ `dram_above` while SM < `low_sm_below`.
8. `input_bound`: busy in bursts with idle gaps — gaps ≥ `input_gap_frac_above` of the time,
   bursts ≥ `input_burst_frac_above`, ≥ `input_bursts_per_h_above` bursts per GPU-hour.
9. `underutilized`: SM < `low_sm_below` with none of the above (small kernels or batches).
10. `mixed`: moderate activity without a single limiter.

Pure classification over a query result; the only I/O is the one query run through
`warehouse.queries`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from warehouse import queries

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

__all__ = ["ADVICE", "QUERY", "BottleneckThresholds", "classify", "diagnose"]

QUERY = "detectors/bottleneck_signals"

ADVICE: dict[str, str] = {
    "unobserved": "No telemetry was attributed to this job; check the GPU-to-job mapping.",
    "idle": "The GPUs did no work: cancel idle jobs and release GPUs you do not use; "
    "test interactively with a short --time first.",
    "stalled": "Kernels were resident but the SMs did nothing (a hung collective or deadlock): "
    "set NCCL_TIMEOUT / a watchdog so the job fails fast instead of holding GPUs.",
    "unprofiled": "Busy, but DCGM profiling fields (SM activity) are missing on these GPUs, so "
    "the limiter is unknown: enable the DCP metrics in dcgm-exporter.",
    "compute_bound": "Compute-bound: the GPUs are well used. If tensor activity is low, use "
    "BF16/TF32 mixed precision so the tensor cores do the math.",
    "communication_bound": "Communication-bound: overlap gradient all-reduce with compute "
    "(bucketed DDP/FSDP), use gradient accumulation, or pack the job on fewer nodes.",
    "memory_bound": "Memory-bound: DRAM is busy while SMs wait; use fused kernels "
    "(e.g. FlashAttention), larger batches, or lower-precision weights and activations.",
    "input_bound": "Input-bound: the GPUs wait for data between bursts; raise DataLoader "
    "num_workers (and --cpus-per-gpu), pin memory, prefetch, and stage data on local disk.",
    "underutilized": "Low SM activity without a clear limiter (small kernels or batches): raise "
    "the batch size, use CUDA graphs, or run on a MIG slice.",
    "mixed": "No single limiter dominates; profile a few steps with Nsight Systems.",
}


@dataclass(frozen=True, slots=True)
class BottleneckThresholds:
    """Where each diagnosis begins (fractions are 0-1 of time or of activity)."""

    idle_below: float = 0.01
    gap_below: float = 0.1
    burst_above: float = 0.25
    idle_busy_below: float = 0.05
    stalled_util_pct_above: float = 50.0
    compute_sm_above: float = 0.6
    compute_tensor_above: float = 0.3
    low_sm_below: float = 0.4
    nvlink_gbps_above: float = 20.0
    dram_above: float = 0.5
    input_gap_frac_above: float = 0.3
    input_burst_frac_above: float = 0.1
    input_bursts_per_h_above: float = 6.0
    underutilized_sm_below: float = 0.3


def classify(signals: pl.DataFrame, t: BottleneckThresholds) -> pl.DataFrame:
    """Add `diagnosis` and `advice` to a frame of bottleneck signals (one row per job)."""
    sm = pl.col("sm_active_mean")
    low_sm = sm < t.low_sm_below
    diagnosis = (
        pl.when(pl.col("samples").fill_null(0) == 0)
        .then(pl.lit("unobserved"))
        .when(
            (pl.col("busy_mean") < t.idle_busy_below)
            & (pl.col("gpu_util_pct_mean").fill_null(0) >= t.stalled_util_pct_above)
        )
        .then(pl.lit("stalled"))
        .when(pl.col("busy_mean").fill_null(0) < t.idle_busy_below)
        .then(pl.lit("idle"))
        .when(sm.is_null())
        .then(pl.lit("unprofiled"))
        .when((sm >= t.compute_sm_above) | (pl.col("tensor_active_mean") >= t.compute_tensor_above))
        .then(pl.lit("compute_bound"))
        .when(low_sm & (pl.col("nvlink_gbps_mean") >= t.nvlink_gbps_above))
        .then(pl.lit("communication_bound"))
        .when(low_sm & (pl.col("dram_active_mean") >= t.dram_above))
        .then(pl.lit("memory_bound"))
        .when(
            (pl.col("gap_frac") >= t.input_gap_frac_above)
            & (pl.col("burst_frac") >= t.input_burst_frac_above)
            & (pl.col("bursts_per_h") >= t.input_bursts_per_h_above)
        )
        .then(pl.lit("input_bound"))
        .when(sm < t.underutilized_sm_below)
        .then(pl.lit("underutilized"))
        .otherwise(pl.lit("mixed"))
    )
    return signals.with_columns(diagnosis.alias("diagnosis")).with_columns(
        pl.col("diagnosis").replace_strict(ADVICE, return_dtype=pl.String).alias("advice")
    )


def diagnose(
    con: duckdb.DuckDBPyConnection,
    job_ids: Sequence[str] | None = None,
    thresholds: BottleneckThresholds | None = None,
) -> pa.Table:
    """One row per job (all, or those in `job_ids` that have samples): signals, diagnosis, advice.

    Jobs in `job_ids` without any attributed sample are returned as `unobserved`.
    """
    t = thresholds or BottleneckThresholds()
    signals = queries.run(
        con,
        QUERY,
        job_ids=None if job_ids is None else list(job_ids),
        idle_below=t.idle_below,
        gap_below=t.gap_below,
        burst_above=t.burst_above,
    )
    if job_ids is not None:
        seen = set(signals["job_id"].to_list())
        missing = [j for j in dict.fromkeys(job_ids) if j not in seen]
        if missing:
            filler = pl.DataFrame(
                {"cluster": [None] * len(missing), "job_id": missing, "samples": [0] * len(missing)}
            ).cast({"cluster": pl.String, "samples": signals.schema["samples"]})
            signals = pl.concat([signals, filler], how="diagonal_relaxed")
    return classify(signals, t).to_arrow()
