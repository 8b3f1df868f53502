"""The concrete change to make next time, for one job: --gres, --time, --cpus-per-gpu, MIG.

Pure: takes the job's record and usage (sql/jobs/job_detail.sql), its per-GPU activity
(sql/jobs/job_gpu_activity.sql) and its bottleneck diagnosis, and returns Slurm options with
the reason for each, in the spirit of jobstats' notes (thresholds as data, not eval'd code).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from detectors.recommend.mig_packing import PROFILES, profile_for, profile_name
from detectors.recommend.recommendation import hhmmss, round_up

__all__ = ["Advice", "AdviceThresholds", "advise"]


@dataclass(frozen=True, slots=True)
class Advice:
    """One option to change (`--time=01:30:00`), the same for a Kubernetes pod spec, and why."""

    option: str
    reason: str
    kubernetes: str = ""


@dataclass(frozen=True, slots=True)
class AdviceThresholds:
    """When each piece of advice is given (fractions 0-1)."""

    time_used_below: float = 0.5  # ask for less time when the run used less than this
    time_margin: float = 1.5  # the new --time is the run time × this, up to 15 minutes
    mig_busy_below: float = 0.2
    mig_fb_max_mib: float = 10240.0
    mig_fb_headroom: float = 1.2
    cpu_efficiency_below: float = 0.5
    input_cpus_per_gpu_min: int = 8


def _gpu_advice(job: Mapping[str, Any], gpus: Sequence[Mapping[str, Any]]) -> list[Advice]:
    allocated = int(job.get("gpus") or len(gpus) or 0)
    if not gpus or allocated == 0:
        return []
    active = sum(1 for g in gpus if (g.get("active_h") or 0) > 0)
    if active == 0:
        return [
            Advice(
                "--gres=gpu:1 --time=00:30:00",
                f"none of the {allocated} GPU(s) did any work: check in a short test job that "
                "the code uses the GPU (e.g. torch.cuda.is_available()) before asking for more",
                'limits: {nvidia.com/gpu: 1}; label kueue.x-k8s.io/max-exec-time-seconds: "1800"',
            )
        ]
    if active < allocated:
        return [
            Advice(
                f"--gres=gpu:{active}",
                f"{allocated - active} of {allocated} GPUs were never active; ask for the "
                f"{active} the job used (or make it use all it asks for)",
                f"limits: {{nvidia.com/gpu: {active}}}",
            )
        ]
    return []


def _mig_advice(
    job: Mapping[str, Any], gpus: Sequence[Mapping[str, Any]], t: AdviceThresholds
) -> list[Advice]:
    busy, fb = job.get("busy_mean"), job.get("fb_used_mib_max")
    if int(job.get("gpus") or 0) != 1 or busy is None or busy >= t.mig_busy_below:
        return []
    if (fb or 0.0) > t.mig_fb_max_mib or busy < 0.01:
        return []  # too much memory for a small slice; or idle (the GPU advice covers it)
    total = float(next((g["fb_total_mib"] for g in gpus if g.get("fb_total_mib")), 81920.0))
    g = profile_for(busy, fb or 0.0, total, t.mig_fb_headroom)
    if g >= 7:
        return []
    name = profile_name(g, dict(PROFILES)[g], total)
    return [
        Advice(
            f"--gres=gpu:{name}:1",
            f"busy {busy:.0%} with at most {(fb or 0) / 1024:.1f} GiB of GPU memory: a MIG "
            f"{name} slice ({g}/7 of the GPU) is enough and frees the rest",
            f"limits: {{nvidia.com/mig-{name}: 1}}",
        )
    ]


def _time_advice(job: Mapping[str, Any], t: AdviceThresholds) -> list[Advice]:
    limit, runtime, state = job.get("time_limit_s"), job.get("runtime_s"), job.get("state") or ""
    if not limit or runtime is None:
        return []
    if state.startswith("TIMEOUT"):
        return [
            Advice(
                f"--time={hhmmss(round_up(limit * t.time_margin, 900))}",
                f"the job hit its {hhmmss(limit)} limit: ask for more, and checkpoint so a "
                "limit costs minutes, not the run",
                "label kueue.x-k8s.io/max-exec-time-seconds: "
                f'"{int(round_up(limit * t.time_margin, 900))}"',
            )
        ]
    if state.startswith("COMPLETED") and runtime < t.time_used_below * limit:
        new = round_up(runtime * t.time_margin, 900)
        return [
            Advice(
                f"--time={hhmmss(new)}",
                f"it ran {hhmmss(runtime)} of a {hhmmss(limit)} limit "
                f"({runtime / limit:.0%}); a tighter limit starts sooner through backfill",
                f'label kueue.x-k8s.io/max-exec-time-seconds: "{int(new)}"',
            )
        ]
    return []


def _cpu_advice(job: Mapping[str, Any], diagnosis: str | None, t: AdviceThresholds) -> list[Advice]:
    cpus, gpus = job.get("cpus"), int(job.get("gpus") or 0)
    if not cpus or gpus == 0:
        return []
    per_gpu = math.ceil(cpus / gpus)
    if diagnosis == "input_bound":
        more = max(per_gpu * 2, t.input_cpus_per_gpu_min)
        return [
            Advice(
                f"--cpus-per-gpu={more}",
                f"the GPUs waited for input with {per_gpu} core(s) per GPU: more DataLoader "
                "workers need more cores",
                f'requests: {{cpu: "{more * gpus}"}}',
            )
        ]
    cpu_time, runtime = job.get("cpu_time_s"), job.get("runtime_s")
    if cpu_time is None or not runtime:
        return []
    used = cpu_time / runtime
    if used / cpus < t.cpu_efficiency_below:
        fewer = max(1, math.ceil(used * 1.25 / gpus))
        if fewer < per_gpu:
            return [
                Advice(
                    f"--cpus-per-gpu={fewer}",
                    f"it used {used:.1f} of {cpus} cores ({used / cpus:.0%}); idle cores "
                    "strand the node's other GPUs",
                    f'requests: {{cpu: "{fewer * gpus}"}}',
                )
            ]
    return []


def advise(
    job: Mapping[str, Any],
    gpus: Sequence[Mapping[str, Any]],
    diagnosis: str | None,
    thresholds: AdviceThresholds | None = None,
) -> list[Advice]:
    """Every change worth making next time, GPU count first; empty when the job was well sized."""
    t = thresholds or AdviceThresholds()
    return (
        _gpu_advice(job, gpus)
        + _mig_advice(job, gpus, t)
        + _time_advice(job, t)
        + _cpu_advice(job, diagnosis, t)
    )
