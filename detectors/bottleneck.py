"""What limited each job, from its DCGM counters: compute, memory, input, communication, or nothing.

Reads the signals of sql/detectors/bottleneck_signals.sql (time-weighted SM, tensor and DRAM
activity, NVLink rate, and how bursty the job's busy fraction is) and names one bottleneck per
job with the advice that fits it. The rules are ordered; the first that matches wins:

1. `unobserved`: no attributed samples (nothing to diagnose).
2. `idle`: busy_mean below `idle_busy_below` — the GPUs did (almost) nothing.
3. `stalled`: idle by activity, but GPU_UTIL says a kernel was resident (a hung collective);
   also a job idle by activity for at least `stalled_idle_frac_above` of its time whose idle
   samples' GPU_UTIL must have been at least `stalled_util_pct_above` (its mean GPU_UTIL, less
   100 % for every sample that was not idle): one that trained, then hung for hours.
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from warehouse import queries

if TYPE_CHECKING:
    import duckdb
    import polars as pl
    import pyarrow as pa

__all__ = [
    "ADVICE",
    "QUERY",
    "BottleneckThresholds",
    "classify",
    "device_params",
    "diagnose",
    "diagnose_rows",
    "diagnosis_of",
]

QUERY = "detectors/bottleneck_signals"
# what QUERY reads: each job's GPUs' partial sums, from the owned samples or as the lake keeps
# them a day at a time (`gpuledger detect`, warehouse/detector_days.py)
DEVICES = "detectors/bottleneck_devices"
DEVICES_STORED = "detectors/bottleneck_devices_stored"

ADVICE: dict[str, str] = {
    "unobserved": (
        "No telemetry was attributed to this job: where its cluster's GPUs report "
        "telemetry, check the GPU-to-job mapping."
    ),
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
    stalled_idle_frac_above: float = 0.5
    compute_sm_above: float = 0.6
    compute_tensor_above: float = 0.3
    low_sm_below: float = 0.4
    nvlink_gbps_above: float = 20.0
    dram_above: float = 0.5
    input_gap_frac_above: float = 0.3
    input_burst_frac_above: float = 0.1
    input_bursts_per_h_above: float = 6.0
    underutilized_sm_below: float = 0.3


def _at_least(value: float | None, bound: float) -> bool:
    return value is not None and value >= bound


def _hung_most_of_the_time(signals: Mapping[str, Any], t: BottleneckThresholds) -> bool:
    """Idle by activity for most of its time, with a kernel resident in those samples: the
    least their GPU_UTIL can have been is the job's mean less 100 % for each sample that was
    not idle. (A job that trained 1.7 h, then hung 11.3 h read "underutilized: raise the batch
    size" beside its critical hung_job finding.)"""
    idle, util = signals.get("idle_frac"), signals.get("gpu_util_pct_mean")
    if idle is None or util is None or idle < t.stalled_idle_frac_above or idle <= 0:
        return False
    least: float = (util - 100.0 * (1.0 - idle)) / idle
    return least >= t.stalled_util_pct_above


def diagnosis_of(signals: Mapping[str, Any], t: BottleneckThresholds) -> str:
    """The diagnosis of one job's signals (a row of QUERY): the first rule of the module's list
    that matches. A signal that is missing (None) matches no rule that compares it."""
    busy, sm = signals.get("busy_mean"), signals.get("sm_active_mean")
    if not signals.get("samples"):
        return "unobserved"
    if busy is not None and busy < t.idle_busy_below:
        stalled = (signals.get("gpu_util_pct_mean") or 0) >= t.stalled_util_pct_above
        return "stalled" if stalled else "idle"
    if busy is None and 0 < t.idle_busy_below:
        return "idle"
    if _hung_most_of_the_time(signals, t):
        return "stalled"
    if sm is None:
        return "unprofiled"
    if sm >= t.compute_sm_above or _at_least(
        signals.get("tensor_active_mean"), t.compute_tensor_above
    ):
        return "compute_bound"
    low_sm = sm < t.low_sm_below
    if low_sm and _at_least(signals.get("nvlink_gbps_mean"), t.nvlink_gbps_above):
        return "communication_bound"
    if low_sm and _at_least(signals.get("dram_active_mean"), t.dram_above):
        return "memory_bound"
    if (
        _at_least(signals.get("gap_frac"), t.input_gap_frac_above)
        and _at_least(signals.get("burst_frac"), t.input_burst_frac_above)
        and _at_least(signals.get("bursts_per_h"), t.input_bursts_per_h_above)
    ):
        return "input_bound"
    if sm < t.underutilized_sm_below:
        return "underutilized"
    return "mixed"


def classify(signals: pl.DataFrame, t: BottleneckThresholds) -> pl.DataFrame:
    """Add `diagnosis` and `advice` to a frame of bottleneck signals (one row per job)."""
    import polars as pl

    found = [diagnosis_of(row, t) for row in signals.iter_rows(named=True)]
    return signals.with_columns(
        pl.Series("diagnosis", found, dtype=pl.String),
        pl.Series("advice", [ADVICE[d] for d in found], dtype=pl.String),
    )


def _filler(job_ids: Sequence[str], seen: set[str]) -> list[str]:
    """The jobs of `job_ids` (once each, in order) that have no signals: `unobserved`."""
    return [j for j in dict.fromkeys(job_ids) if j not in seen]


def diagnose(
    con: duckdb.DuckDBPyConnection,
    job_ids: Sequence[str] | None = None,
    thresholds: BottleneckThresholds | None = None,
    *,
    stored: bool = False,
) -> pa.Table:
    """One row per job (all, or those in `job_ids` that have samples): signals, diagnosis, advice.

    Jobs in `job_ids` without any attributed sample are returned as `unobserved`. `stored`:
    the lake's stored bottleneck rows (`bottleneck_device_days`, computed with the default
    thresholds) are up to date: they are read instead of every owned sample.
    """
    import polars as pl

    t = thresholds or BottleneckThresholds()
    if stored and t != BottleneckThresholds():
        # the kept days' sums were computed with the default lines (app.pipeline.detect)
        raise ValueError("the stored bottleneck rows are those of the default thresholds")
    _devices(con, t, stored=stored)
    signals = queries.run(con, QUERY, **_params(job_ids, t))
    if job_ids is not None:
        missing = _filler(job_ids, set(signals["job_id"].to_list()))
        if missing:
            filler = pl.DataFrame(
                {"cluster": [None] * len(missing), "job_id": missing, "samples": [0] * len(missing)}
            ).cast({"cluster": pl.String, "samples": signals.schema["samples"]})
            signals = pl.concat([signals, filler], how="diagonal_relaxed")
    return classify(signals, t).to_arrow()


def diagnose_rows(
    con: duckdb.DuckDBPyConnection,
    job_ids: Sequence[str],
    thresholds: BottleneckThresholds | None = None,
) -> list[dict[str, Any]]:
    """`diagnose` for a few jobs as plain rows, without polars or Arrow (`gpuledger job`)."""
    t = thresholds or BottleneckThresholds()
    _devices(con, t)
    columns, signals = queries.fetch(con, QUERY, **_params(job_ids, t))
    for job_id in _filler(job_ids, {row["job_id"] for row in signals}):
        signals.append({c: {"job_id": job_id, "samples": 0}.get(c) for c in columns})
    return [
        {**row, "diagnosis": (d := diagnosis_of(row, t)), "advice": ADVICE[d]} for row in signals
    ]


def device_params(t: BottleneckThresholds) -> dict[str, float]:
    """The parameters of DEVICES: the lines a sample is idle, in a gap or in a burst by."""
    return {"idle_below": t.idle_below, "gap_below": t.gap_below, "burst_above": t.burst_above}


def _devices(
    con: duckdb.DuckDBPyConnection, t: BottleneckThresholds, *, stored: bool = False
) -> None:
    """Define the view `bottleneck_devices` QUERY reads (its thresholds written in)."""
    if stored:
        text = queries.view_text(con, DEVICES_STORED, {})
    else:
        text = queries.view_text(con, DEVICES, device_params(t))
    queries.define_view(con, "bottleneck_devices", text)


def _params(job_ids: Sequence[str] | None, t: BottleneckThresholds) -> dict[str, Any]:
    return {
        "job_ids": None if job_ids is None else list(job_ids),
        "gap_below": t.gap_below,
        "burst_above": t.burst_above,
    }
