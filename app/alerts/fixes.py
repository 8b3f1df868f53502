"""The concrete fix a message proposes, from the finding's detector, evidence and job.

A detector may state its own fix as `evidence["fix"]` (text) — that wins. Otherwise the fix is
derived here: a `--gres`, `--time` or MIG directive, `scancel`, or draining a node.
"""

from __future__ import annotations

import math

from app.alerts.findings import FindingContext

__all__ = ["concrete_fix", "slurm_time"]


def slurm_time(seconds: float) -> str:
    """Seconds as Slurm's `--time` value, HH:MM:SS (days folded into hours)."""
    total = max(int(math.ceil(seconds)), 60)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def _gpus_used(f: FindingContext) -> int | None:
    used = f.evidence.get("gpus_used")
    if isinstance(used, int | float):
        return max(int(used), 1)
    if f.gpus is not None and f.gpus_never_active is not None:
        if f.gpus_never_active >= f.gpus:
            return None  # nothing ran at all: fewer GPUs is not the fix
        return f.gpus - f.gpus_never_active
    return None


def concrete_fix(f: FindingContext, idle_detectors: tuple[str, ...]) -> str:
    """One or two sentences an operator or user can act on right away."""
    stated = f.evidence.get("fix")
    if isinstance(stated, str) and stated.strip():
        return stated.strip()
    name = f.detector.lower()
    job = f.job_id or "JOBID"
    if f.is_hardware or any(k in name for k in ("xid", "ecc", "remap", "thermal", "failing")):
        node = f.node or f.subject_id
        return (
            f"Drain the node and check the GPU: `scontrol update NodeName={node} State=DRAIN "
            f'Reason="gpuledger {f.detector}"`, then run `dcgmi diag -r 3` on it.'
        )
    if "time" in name:
        used = f.evidence.get("suggested_time_s") or f.evidence.get("runtime_p95_s")
        if isinstance(used, int | float):
            return f"Request the time your jobs need: `--time={slurm_time(float(used))}`."
        return "Request a time limit close to your jobs' real run time (`--time=HH:MM:SS`)."
    if "mig" in name or "too_powerful" in name or "low_util" in name:
        profile = f.evidence.get("mig_profile", "1g.10gb")
        return f"This fits a MIG slice: `--gres=gpu:{profile}:1` (or a smaller GPU model)."
    if f.detector in idle_detectors or "idle" in name:
        used = _gpus_used(f)
        if used is not None and f.gpus is not None and used < f.gpus:
            return (
                f"Request only the GPUs the job uses: `--gres=gpu:{used}` "
                f"({f.gpus - used} of {f.gpus} never became active)."
            )
        if f.job_ended:
            # nothing left to cancel: say so, and what to do before the next run
            return (
                f"Job {job} has ended ({(f.job_state or 'ended').lower()}), so there is "
                "nothing to cancel. Next time, try the job on one GPU with a short `--time` "
                "first and check that your code sees the GPUs (`nvidia-smi` and "
                "`torch.cuda.is_available()` in the job script)."
            )
        if f.interactive:
            return f"End the session when you step away: `exit`, or `scancel {job}`."
        return (
            f"If the job is stuck, cancel it: `scancel {job}`; check that your code sees the "
            "GPUs (`nvidia-smi` and `torch.cuda.is_available()` in the job script)."
        )
    if "overalloc" in name or "partial" in name:
        used = _gpus_used(f)
        if used is not None:
            return f"Request only the GPUs the job uses: `--gres=gpu:{used}`."
    if "memory" in name:
        return "Free GPU memory you no longer use, or run on a MIG slice of the size you need."
    return "See the finding's details in the dashboard and adjust the job's request."
