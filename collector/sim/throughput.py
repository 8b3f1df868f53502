"""What the simulated training jobs report through `collector.throughput`: tokens and model size.

Most pretraining jobs and some fine-tuning and input-bound jobs run the throughput callback
(`collector.throughput_callbacks`): one reporter per job flushes its cumulative counters every ten
minutes, from the end of its first step (after the start-up the telemetry shows) to its end, with
the model's parameter count. Their speed follows their telemetry: the job's model FLOPs utilisation
is its mean tensor activity (`collector.sim.telemetry`: SM activity by archetype and the job's
`level`, × the archetype's tensor share) times an efficiency drawn per job (the part of tensor-pipe
time that is model math), and a synchronous job with a straggler runs at its slow rank's pace. So
tokens/s = MFU × GPUs × the GPU model's peak dense BF16 FLOP/s (warehouse/data/gpu_models.csv) ÷ (6
× parameters), and the lake's `job_usage.mfu` recovers the drawn MFU within the reports' noise.
Input-bound jobs on eight GPUs are the demo's low-MFU findings.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib.resources import files

import numpy as np
import pyarrow as pa

from collector.sim.fleet import Fleet
from collector.sim.workload import Job
from warehouse.arrow_arrays import TIMESTAMP
from warehouse.schema import RAW_TABLES

__all__ = ["REPORT_EVERY_S", "TrainingProfile", "throughput_table", "training_profile"]

REPORT_EVERY_S = 600.0  # the callback's flush interval in the simulation
STARTUP_S = (60.0, 240.0)  # start-up as the telemetry draws it: 60 s + 240 s × the job's level
FIRST_STEP_S = 30.0  # the first report: at the end of the first step after start-up


@dataclass(frozen=True, slots=True)
class TrainingProfile:
    """How an archetype's jobs report: how many do, model sizes, and their MFU."""

    report_p: float  # the share of its jobs that run the callback
    params: tuple[int, ...]  # model sizes drawn from (parameters)
    sm_base: float  # mean SM activity at level 0 and its rise to level 1 (as telemetry draws)
    sm_spread: float
    tensor_share: float  # tensor-pipe activity per SM activity (as telemetry draws)
    efficiency: tuple[float, float]  # model math per tensor-pipe time, drawn uniformly
    tokens_per_sample: int
    samples_per_step: int


PROFILES: dict[str, TrainingProfile] = {
    "pretrain": TrainingProfile(
        0.9, (1_300_000_000, 7_000_000_000, 13_000_000_000, 70_000_000_000),
        0.6, 0.22, 0.72, (0.6, 0.9), 4096, 1024,
    ),
    "finetune": TrainingProfile(
        0.6, (350_000_000, 1_300_000_000, 7_000_000_000, 8_000_000_000),
        0.35, 0.3, 0.55, (0.5, 0.85), 2048, 64,
    ),
    # bursts of work between waits for data: SM activity ~0.14 on average
    "input_bound": TrainingProfile(
        0.6, (125_000_000, 350_000_000, 1_300_000_000), 0.12, 0.05, 0.5, (0.5, 0.8), 512, 256,
    ),
}  # fmt: skip
STRAGGLER_PACE = 0.45  # the slow rank's SM activity factor in the telemetry: everyone waits


def _peaks() -> dict[str, float]:
    """Peak dense BF16 FLOP/s per GPU model name, from the shipped table."""
    path = files("warehouse").joinpath("data", "gpu_models.csv")
    with path.open(encoding="utf-8") as handle:
        return {
            row["model"]: float(row["peak_bf16_dense_tflops"]) * 1e12
            for row in csv.DictReader(handle)
        }


def training_profile(job: Job) -> TrainingProfile | None:
    """The reporting profile of the job's archetype, or None when it does not train."""
    return PROFILES.get(job.archetype.name)


def throughput_table(
    cluster: str,
    jobs: list[Job],
    fleet: Fleet,
    t0_ms: int,
    horizon_s: float,
    rng: np.random.Generator,
) -> pa.Table:
    """The `app_throughput` rows of the jobs that report (deterministic for `rng`)."""
    peaks = _peaks()
    schema = RAW_TABLES["app_throughput"].schema
    rows: dict[str, list[object]] = {f.name: [] for f in schema}
    for job in jobs:
        profile = training_profile(job)
        if profile is None or job.start_s is None or job.end_s is None or not job.placement:
            continue
        # every job draws the same numbers, so one job's choice never shifts another's
        reports, pick, efficiency = rng.random(3).tolist()
        noise_seed = int(rng.integers(2**31))
        if reports >= profile.report_p:
            continue
        peak = peaks.get(fleet.model(job.placement[0]).name)
        first = job.start_s + STARTUP_S[0] + STARTUP_S[1] * job.level + FIRST_STEP_S
        end = min(job.end_s, horizon_s)
        if peak is None or end <= first:
            continue
        params = profile.params[int(pick * len(profile.params))]
        tensor = (profile.sm_base + profile.sm_spread * job.level) * profile.tensor_share
        lo, hi = profile.efficiency
        mfu = tensor * (lo + (hi - lo) * efficiency)
        if job.straggler >= 0:
            mfu *= STRAGGLER_PACE
        tokens_per_s = mfu * job.gpus * peak / (6.0 * params)
        times = np.append(np.arange(first, end, REPORT_EVERY_S), end)
        steps_noise = np.random.default_rng(noise_seed).uniform(0.95, 1.05, times.size - 1)
        tokens = np.concatenate([[0.0], np.cumsum(np.diff(times) * tokens_per_s * steps_noise)])
        tokens += profile.tokens_per_sample * profile.samples_per_step  # the first step's
        node = fleet.nodes[int(fleet.node_of[job.placement[0]])]
        for t, total in zip(times.tolist(), tokens.tolist(), strict=True):
            samples = total / profile.tokens_per_sample
            rows["cluster"].append(cluster)
            rows["job_id"].append(str(job.job_id))
            rows["ts"].append(t0_ms + round(t * 1000))
            rows["node"].append(node)
            rows["reporter"].append("rank0")
            rows["samples_total"].append(float(np.floor(samples)))
            rows["tokens_total"].append(float(np.floor(total)))
            rows["steps_total"].append(float(np.floor(samples / profile.samples_per_step)))
            rows["source"].append("sim")
            rows["model_params"].append(params)
    arrays = [
        pa.array(rows[f.name], pa.int64()).cast(TIMESTAMP)
        if f.name == "ts"
        else pa.array(rows[f.name], f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)
