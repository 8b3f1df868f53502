"""What a job's owner should change next time, from its usage row (the job page's advice).

Pure: takes the row `sql/dashboard/job_detail.sql` returns and gives plain-language advice
with the exact Slurm option where there is one. Thresholds are named constants.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Advice", "advise"]

IDLE_SHARE_WARN = 0.5  # half of the observed time idle
LOW_BUSY = 0.3  # mean busy below this while active: the GPU waits for something
LOW_TENSOR = 0.05  # tensor pipes almost unused although the GPU is busy
TIME_LIMIT_SLACK = 2.0  # a limit more than twice the run time is too long
TIME_LIMIT_MARGIN = 1.5  # suggest 1.5 × the run time, rounded up to a quarter hour
MIG_MEMORY_GIB = 9.5  # fits the smallest H100/A100 MIG slice (1g.10gb)


@dataclass(frozen=True, slots=True)
class Advice:
    """One change: a short headline and why, with the option to use when there is one."""

    headline: str
    why: str
    option: str | None = None


def _num(job: Mapping[str, object], key: str) -> float | None:
    value = job.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _slurm_time(hours: float) -> str:
    quarter_hours = max(1, math.ceil(hours * 4))
    minutes = quarter_hours * 15
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def advise(job: Mapping[str, object]) -> list[Advice]:
    """The changes that would have saved this job's GPU-hours, most valuable first."""
    out: list[Advice] = []
    gpus = int(_num(job, "gpus") or 0)
    never = int(_num(job, "gpus_never_active") or 0)
    observed = _num(job, "observed_gpu_h") or 0.0
    idle = _num(job, "idle_gpu_h") or 0.0
    busy = _num(job, "busy_mean")
    tensor = _num(job, "tensor_active_mean")
    runtime = _num(job, "runtime_h")
    limit = _num(job, "time_limit_h")
    memory_mib = _num(job, "fb_used_mib_max")
    if gpus > 1 and 0 < never < gpus:
        keep = gpus - never
        out.append(
            Advice(
                f"Ask for {keep} GPU{'s' if keep > 1 else ''}, not {gpus}",
                f"{never} of the {gpus} GPUs were never active during the job.",
                f"--gres=gpu:{keep}",
            )
        )
    if observed > 0 and idle / observed >= IDLE_SHARE_WARN:
        out.append(
            Advice(
                "Release GPUs you are not using",
                f"The GPUs sat idle {100 * idle / observed:.0f} % of the time ({idle:,.1f} "
                "GPU-hours). End interactive sessions when done, or run the work as a batch job.",
            )
        )
    # busy of the GPUs that did work: never-active GPUs are advice of their own (above)
    busy_active = busy * gpus / (gpus - never) if busy is not None and gpus > never else busy
    if busy_active is not None and 0.01 <= busy_active < LOW_BUSY:
        out.append(
            Advice(
                "Feed the GPU faster",
                f"The GPUs that worked were busy only {100 * busy_active:.0f} % of the time: "
                "they wait on data loading or the CPU. Use more data-loader workers and ask for "
                "more CPUs per GPU.",
                "--cpus-per-gpu=8",
            )
        )
    if tensor is not None and busy is not None and busy >= LOW_BUSY and tensor < LOW_TENSOR:
        out.append(
            Advice(
                "Use the tensor cores",
                f"Tensor pipes were active {100 * tensor:.1f} % of the time although the GPUs "
                "were busy: train in bf16/fp16 mixed precision.",
            )
        )
    if (
        runtime is not None
        and limit is not None
        and runtime > 0
        and job.get("end_ts") is not None
        and limit > TIME_LIMIT_SLACK * runtime
    ):
        out.append(
            Advice(
                "Ask for a shorter time limit",
                f"It ran {runtime:.1f} h of a {limit:.1f} h limit; a tighter limit lets the "
                "scheduler backfill it sooner.",
                f"--time={_slurm_time(runtime * TIME_LIMIT_MARGIN)}",
            )
        )
    if (
        gpus == 1
        and memory_mib is not None
        and memory_mib / 1024 < MIG_MEMORY_GIB
        and busy is not None
        and busy < LOW_BUSY
    ):
        out.append(
            Advice(
                "Use a MIG slice",
                f"Peak memory {memory_mib / 1024:.1f} GiB and {100 * busy:.0f} % busy fit a "
                "1g.10gb slice, a seventh of the GPU.",
                "--gres=gpu:1g.10gb:1",
            )
        )
    if job.get("hw_event_before_end") is True:
        out.append(
            Advice(
                "Resubmit: a hardware fault ended it",
                "A GPU of this job reported an XID, ECC or row-remap event before it ended. "
                "Checkpoint often enough that a node failure costs little.",
            )
        )
    return out
