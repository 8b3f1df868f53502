"""The concrete fix a message proposes, from the finding's detector, evidence and job.

A detector may state its own fix as `evidence["fix"]` (text) — that wins. Otherwise the fix is
derived here: a `--gres`, `--time` or MIG directive, `scancel`, or draining a node. Each fits
its finding: a hang is told to fail fast (the Job page's words, `detectors/job_advice.py`), not
to change its request; stranded GPUs get an option for each resource that stranded them; a MIG
slice is proposed only where one slice holds all the job used, on all its GPUs together.
"""

from __future__ import annotations

import math
import shlex

from app.alerts.findings import FindingContext
from detectors.job_advice import HANG_FIX, host_request_options
from detectors.mig_profiles import PROFILES, profile_for, profile_name
from detectors.shell_words import sh

__all__ = ["concrete_fix", "slurm_time", "state_phrase"]

DEFAULT_FB_TOTAL_MIB = 81920.0  # an 80 GB GPU, where the finding does not say
MIG_HEADROOM = 1.2  # a slice must hold 1.2 x the job's peak memory and mean activity


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


def state_phrase(state: str | None) -> str:
    """A Slurm state as a reader says it: `CANCELLED by 2003` → "cancelled by user id 2003"
    (sacct names the canceller by UID only, and the lake holds no UID → user name mapping)."""
    if not state:
        return "ended"
    word, _, rest = state.strip().partition(" ")
    by, _, who = rest.partition(" ")
    if by.lower() == "by" and who.isdigit():
        return f"{word.rstrip('+').lower()} by user id {who}"
    return state.strip().lower()


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _one_slice(f: FindingContext) -> str | None:
    """The MIG profile of one slice that holds the whole job's memory and compute, or None.

    All its GPUs' peak memory and mean activity added up: a job that needs more than one
    slice is no MIG job (a multi-GPU job cannot spread NCCL across MIG instances).
    """
    fb = _num(f.fb_used_mib_max)
    frac = _num(f.evidence.get("fb_frac_max"))
    if fb is None and frac is None:
        return None
    total = fb / frac if fb is not None and frac else DEFAULT_FB_TOTAL_MIB
    gpus = max(f.gpus or 1, 1)
    used = fb if fb is not None else (frac or 0.0) * total
    busy = _num(f.sm_active_mean)
    busy = busy if busy is not None else (_num(f.busy_mean) or 0.0)
    g = profile_for(busy * gpus, used * gpus, total, MIG_HEADROOM)
    return None if g >= 7 else profile_name(g, dict(PROFILES)[g], total)


def _on(f: FindingContext) -> str:
    """The Slurm command's `-M CLUSTER` where the finding's cluster maps to one, else ""."""
    return f" -M {sh(f.slurm_name)}" if f.slurm_name else ""


def _running(f: FindingContext) -> bool:
    return not f.job_ended and f.job_id is not None


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
            f"Drain the node and check the GPU: `scontrol{_on(f)} update {sh(f'NodeName={node}')} "
            f"State=DRAIN {sh(f'Reason=gpuledger {f.detector}')}`, then run `dcgmi diag -r 3` "
            "on it."
        )
    if name == "hung_job":
        now = (
            f"If it is still hung, cancel it: `scancel{_on(f)} {sh(job)}`. " if _running(f) else ""
        )
        return f"{now}A hang is not a sizing problem; make it fail fast next time. {HANG_FIX}"
    if name == "stranded_gpus":
        options = host_request_options(f.evidence)
        if options:
            return (
                f"Ask for no more than each GPU's share of the node: `{shlex.join(options)}` "
                "(one option for each resource whose request left the node's other GPUs "
                "unusable)."
            )
    if "time" in name:
        used = f.evidence.get("suggested_time_s") or f.evidence.get("runtime_p95_s")
        if isinstance(used, int | float):
            return f"Request the time your jobs need: `{sh(f'--time={slurm_time(float(used))}')}`."
        return "Request a time limit close to your jobs' real run time (`--time=HH:MM:SS`)."
    if "mig" in name or "too_powerful" in name or "low_util" in name:
        profile = f.evidence.get("mig_profile", "1g.10gb")
        return f"This fits a MIG slice: `{sh(f'--gres=gpu:{profile}:1')}` (or a smaller GPU model)."
    if f.detector in idle_detectors or "idle" in name:
        used = _gpus_used(f)
        if used is not None and f.gpus is not None and used < f.gpus:
            return (
                f"Request only the GPUs the job uses: `{sh(f'--gres=gpu:{used}')}` "
                f"({f.gpus - used} of {f.gpus} never became active)."
            )
        if f.job_ended:
            # nothing left to cancel: say so, and what to do before the next run
            return (
                f"Job {job} has ended ({state_phrase(f.job_state)}), so there is "
                "nothing to cancel. Next time, try the job on one GPU with a short `--time` "
                "first and check that your code sees the GPUs (`nvidia-smi` and "
                "`torch.cuda.is_available()` in the job script)."
            )
        if f.interactive:
            return f"End the session when you step away: `exit`, or `scancel{_on(f)} {sh(job)}`."
        return (
            f"If the job is stuck, cancel it: `scancel{_on(f)} {sh(job)}`; check that your code "
            "sees the GPUs (`nvidia-smi` and `torch.cuda.is_available()` in the job script)."
        )
    if "overalloc" in name or "partial" in name:
        used = _gpus_used(f)
        if used is not None and (f.gpus is None or used < f.gpus):
            return f"Request only the GPUs the job uses: `{sh(f'--gres=gpu:{used}')}`."
        needed = _num(f.evidence.get("gpus_needed"))
        if needed is not None and needed >= 1:
            return (
                f"Its GPUs were lightly used: together {int(needed)} would do. Request "
                f"`{sh(f'--gres=gpu:{int(needed)}')}`."
            )
        profile = f.evidence.get("mig_profile")
        if isinstance(profile, str) and profile:
            return f"One MIG slice holds all of this job's work: `{sh(f'--gres=gpu:{profile}:1')}`."
    if "memory" in name:
        release = (
            f"If its work is done, end it (`scancel{_on(f)} {sh(job)}`); otherwise free"
            if _running(f)
            else "Free"
        )
        slice_ = _one_slice(f)
        fit = (
            f", or run it on one MIG slice: `{sh(f'--gres=gpu:{slice_}:1')}` holds all it used"
            if slice_
            else ""
        )
        return (
            f"{release} the GPU memory it holds while nothing computes (release GPUs between "
            f"compute phases, or run CPU-only steps as separate jobs without GPUs){fit}."
        )
    return "See the finding's details in the dashboard and adjust the job's request."
