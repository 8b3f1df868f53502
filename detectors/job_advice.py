"""What a job's owner should change next time: the one advice engine of the Job page and `job`.

Pure: takes the job's record and usage (sql/jobs/job_detail.sql), its per-GPU activity
(sql/jobs/job_gpu_activity.sql), its bottleneck diagnosis (detectors/bottleneck.py) and its
findings (sql/jobs/job_findings.sql), and returns plain-language advice, most valuable first,
each with the Slurm option (and the Kubernetes equivalent) where there is one. Thresholds are
data (`AdviceThresholds`), in the spirit of jobstats' notes.

How the job ended comes first, because it decides which usual advice still holds:

- hung (diagnosis `stalled` or a `hung_job` finding): make the hang fail fast (collective
  timeout, watchdog, checkpoints). The idle GPUs, idle cores and a time limit reached are the
  hang's doing, so no --gres, --cpus-per-gpu, MIG or --time advice follows from them;
- ended by a hardware fault (NODE_FAIL, or failed after an XID/ECC event on its GPUs):
  resubmit (--requeue) and checkpoint; a run cut short is no reason to change --time, and
  the accounting of a failed node's cores is incomplete, so no --cpus-per-gpu either. After
  a NODE_FAIL Slurm requeues a batch job itself (unless --no-requeue, or JobRequeue=0), so
  the owner is told to check that it was not before resubmitting (else it runs twice);
- out of memory (OUT_OF_MEMORY: the job's host memory, its cgroup's limit): ask for more
  (--mem), citing its largest task's peak (MaxRSS) beside what it asked for; where its
  memory request also stranded GPUs (`stranded_gpus`), it is told what more costs the node,
  not asked for less.

Otherwise: --gres for GPUs never active, giving back idle GPUs (the wording differs for
interactive sessions and batch jobs), fewer GPUs or one MIG slice when a multi-GPU job's
`overallocated` finding says they would hold its whole use, a MIG slice (one-GPU jobs, from
their own usage), --cpus-per-gpu and --mem-per-gpu
for each resource a `stranded_gpus` finding says stranded the node's other GPUs, --time
(shorter only for a job that COMPLETED well under its limit; longer only for a TIMEOUT that
was making progress), --cpus-per-gpu (more only when the diagnosis is `input_bound`; fewer
when most cores idled) and mixed precision when busy GPUs left the tensor cores unused.

No advice means "sized well" only for a job with telemetry that ran to its end
(`when_no_advice`): a job whose GPUs reported nothing was not judged at all, and a job that
failed or was preempted is told only that its figures, of the part it ran, call for no change.
A job that never started gets no advice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from detectors.mig_profiles import PROFILES, profile_for, profile_name
from detectors.slurm_time import hhmmss, round_up
from detectors.wording import counted, noun_for

__all__ = [
    "HANG_FIX",
    "Advice",
    "AdviceThresholds",
    "advise",
    "host_request_options",
    "job_started",
    "usage_runtime_s",
    "when_no_advice",
]

HUNG_DETECTOR = "hung_job"
STRANDED_DETECTOR = "stranded_gpus"
OVERALLOCATED_DETECTOR = "overallocated"
# how to make a hang fail fast: the Job page, `gpuledger job` and the alert emails say it alike
HANG_FIX = (
    "Give torch.distributed.init_process_group a timeout (e.g. timedelta(minutes=30)) with "
    "TORCH_NCCL_ASYNC_ERROR_HANDLING=1, or run a watchdog that exits when the step counter "
    "stops, so the job fails in minutes instead of holding its GPUs; checkpoint so the rerun "
    "resumes where it stopped."
)
NOTHING_TO_CHANGE = "Nothing to change: the job was sized well for what it did."
NO_TELEMETRY = (
    "No advice: no GPU telemetry was attributed to this job, so whether it was sized well "
    "is unknown."
)
NOT_STARTED = "No advice: the job never started, so it held no GPUs and used nothing."
# a job that did not run to its end: its figures are of the part it ran, not of a whole run
CUT_SHORT = (
    "No change to its request follows from its figures, but it {how}, so they cover only "
    "the part it ran: whether it was sized well for a whole run is unknown."
)
PREEMPTED_STATES = ("PREEMPTED",)
OOM_STATE = "OUT_OF_ME"  # OUT_OF_MEMORY (sacct may cut it to OUT_OF_ME+)
MEM_MARGIN = 1.5  # ask for this much more memory than a job that ran out of it had
HW_FAILURE_DETECTOR = "failed_after_hw_event"
CHECKPOINT_DETECTOR = "checkpoint_interval"
# how a job can end by failing (Slurm states), for "failed after a hardware event"
FAILED_STATES = ("FAILED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_ME")
# diagnoses that mean the GPUs made no progress: no "ask for more time" for those
NO_PROGRESS = ("idle", "stalled")


@dataclass(frozen=True, slots=True)
class Advice:
    """One change: a short headline, why, and the Slurm option / Kubernetes setting if any."""

    headline: str
    reason: str
    option: str | None = None
    kubernetes: str | None = None

    def setting(self, source: str | None) -> str | None:
        """The line to put in the job's spec: the pod's for Kubernetes jobs, else `#SBATCH`."""
        if source == "kubernetes":
            return self.kubernetes
        return None if self.option is None else f"#SBATCH {self.option}"


@dataclass(frozen=True, slots=True)
class AdviceThresholds:
    """When each piece of advice is given (fractions 0-1)."""

    time_used_below: float = 0.5  # ask for less time when a completed run used less than this
    time_margin: float = 1.5  # the new --time is the run time × this, up to 15 minutes
    idle_share_above: float = 0.5  # give back GPUs idle at least this share of the time
    mig_busy_below: float = 0.2
    mig_fb_max_mib: float = 10240.0
    mig_fb_headroom: float = 1.2
    cpu_efficiency_below: float = 0.5
    input_cpus_per_gpu_min: int = 8
    tensor_busy_above: float = 0.3  # mixed precision only for GPUs busy at least this much
    tensor_active_below: float = 0.05


@dataclass(frozen=True, slots=True)
class _Facts:
    """What decides which advice applies, read once from the inputs."""

    state: str
    gpus: int
    diagnosis: str | None
    hung: bool
    hw_failed: bool
    interactive: bool


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def job_started(job: Mapping[str, Any]) -> bool:
    """Whether the job ever ran: a start, or GPU-hours or samples from an earlier run (a job
    requeued and pending again has no start, and its earlier runs held GPUs). A job cancelled
    while pending has a start in sacct, its end (Start = End), with no node and no GPU held:
    it never ran. A row without a start_ts field at all (not a scheduler record) is taken as
    started."""
    if "start_ts" not in job:
        return True
    used = bool(_num(job.get("alloc_gpu_h")) or job.get("samples"))
    start = job["start_ts"]
    if start is None:
        return used
    if start == job.get("end_ts") and not job.get("nodes") and not _num(job.get("gpus")):
        return used  # cancelled while pending (sacct: Start = End, NodeList "None assigned")
    return True


def usage_runtime_s(job: Mapping[str, Any]) -> float | None:
    """The run time the job's usage figures cover (its GPU-hours; its CPU time as of its
    record's last collection, which may lag): the lake's (`usage_runtime_s`) where the
    job-end mail's final run time (`runtime_s`) differs from what the lake has collected of
    the job, else its run time."""
    return _num(job["usage_runtime_s"] if "usage_runtime_s" in job else job.get("runtime_s"))


def _evidence(row: Mapping[str, Any]) -> dict[str, Any]:
    raw = row.get("evidence")
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        loaded = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _facts(
    job: Mapping[str, Any], diagnosis: str | None, findings: Sequence[Mapping[str, Any]]
) -> _Facts:
    state = str(job.get("state") or "")
    detectors = {f.get("detector") for f in findings}
    hw_event = job.get("hw_event_before_end") is True
    return _Facts(
        state=state,
        gpus=int(_num(job.get("gpus")) or 0),
        diagnosis=diagnosis,
        hung=diagnosis == "stalled" or HUNG_DETECTOR in detectors,
        hw_failed=state.startswith("NODE_FAIL")
        or HW_FAILURE_DETECTOR in detectors
        or (hw_event and state.startswith(FAILED_STATES)),
        interactive=job.get("interactive") is True,
    )


def _hung_advice(
    job: Mapping[str, Any], findings: Sequence[Mapping[str, Any]], f: _Facts
) -> list[Advice]:
    if not f.hung:
        return []
    hung = next((x for x in findings if x.get("detector") == HUNG_DETECTOR), None)
    held = _num(_evidence(hung).get("state_gpu_h")) if hung is not None else None
    held = held if held is not None else _num(job.get("idle_gpu_h"))
    how_long = f" for {held:,.1f} GPU-hours" if held else ""
    limit = (
        " It reached its time limit because it hung, not because it needed more time."
        if f.state.startswith("TIMEOUT")
        else ""
    )
    return [
        Advice(
            "Make a hang fail fast",
            f"The GPUs reported a resident kernel while the SMs did nothing{how_long}: a hung "
            "collective (NCCL) or a deadlock." + limit + " " + HANG_FIX,
        )
    ]


def _hw_advice(
    job: Mapping[str, Any], findings: Sequence[Mapping[str, Any]], f: _Facts
) -> list[Advice]:
    if not f.hw_failed:
        return []
    kinds = job.get("hw_event_kinds")
    cause = f"a hardware event on its GPUs ({kinds})" if kinds else "a hardware fault"
    if f.state.startswith("NODE_FAIL"):
        cause = f"a node failure after {cause}" if kinds else "a node failure"
    flagged = any(x.get("detector") == HW_FAILURE_DETECTOR for x in findings)
    checkpoint = next((x for x in findings if x.get("detector") == CHECKPOINT_DETECTOR), None)
    interval_s = _num(_evidence(checkpoint).get("interval_s")) if checkpoint else None
    every = (
        f"checkpoint every {interval_s / 60:.0f} min (the interval that loses least at this "
        "cluster's failure rate)"
        if interval_s
        else "checkpoint often enough that a node failure costs little"
    )
    ended = (
        f"The job ended through {cause}, not through a fault of its own"
        + ("; a finding flags the GPU for the admins" if flagged else "")
        + "."
    )
    headline = "Resubmit: a hardware fault ended it"
    if f.state.startswith("NODE_FAIL") and not f.interactive:
        headline = "A node failure ended it: resubmit it only if Slurm did not requeue it"
        # Slurm requeues a batch job a node failure ended (JobRequeue=1, its default), after
        # its FAIL mail went out: resubmitting it as well runs it twice
        base = str(job.get("job_id") or "").split("+", 1)[0]  # (a heterogeneous job's number)
        check = f"`squeue -j {base}`" if base else "squeue"
        what = (
            " Slurm requeues a batch job after a node failure unless it was submitted with "
            "--no-requeue (or the site set JobRequeue=0): check "
            f"{check} or wait for a Requeued mail before resubmitting it, or it runs twice. "
            f"If it was not requeued, resubmit it from its last checkpoint; either way, {every}."
        )
    else:
        what = f" Resubmit it from its last checkpoint (or let --requeue do it) and {every}."
    return [
        Advice(
            headline,
            ended + what + " Its run time says nothing about the time limit it needs.",
            "--requeue",
        )
    ]


def _gib(mib: float) -> str:
    return f"{mib / 1024:,.1f} GiB"


def _memory_advice(
    job: Mapping[str, Any], f: _Facts, findings: Sequence[Mapping[str, Any]] = ()
) -> list[Advice]:
    """OUT_OF_MEMORY: the job's host memory (its cgroup's limit) ran out; ask for more (and
    where its request already stranded GPUs, what more costs the node)."""
    if not f.state.startswith(OOM_STATE):
        return []
    asked, rss = _num(job.get("mem_req_mib")), _num(job.get("max_rss_mib"))
    peak = (
        f" Its largest task peaked at {_gib(rss)} (MaxRSS, which Slurm samples: the peak "
        "that ran out may have been higher)."
        if rss is not None and rss > 0
        else ""
    )
    share = _num((_stranded(findings) or {}).get("max_mem_per_gpu_gib"))
    if share:
        peak += (
            f" On its node, more than {share:g} GiB per GPU leaves some of the node's GPUs "
            "unusable: a job that needs more may fit better on a node with more memory."
        )
    if not asked:
        return [
            Advice(
                "Ask for more memory",
                "The job ran out of host memory (OUT_OF_MEMORY) and was killed."
                + peak
                + " Ask for more with --mem (per node) or --mem-per-gpu.",
            )
        ]
    nodes = job.get("nodes")
    per_node = asked / max(1, len(nodes) if isinstance(nodes, list | tuple) else 1)
    new = math.ceil(per_node * MEM_MARGIN / 1024)
    per_gpu = f" (--mem-per-gpu={math.ceil(asked * MEM_MARGIN / 1024 / f.gpus)}G)" if f.gpus else ""
    node_note = f", {_gib(per_node)} per node" if per_node < asked else ""
    return [
        Advice(
            "Ask for more memory",
            f"The job ran out of host memory (OUT_OF_MEMORY) and was killed: it asked for "
            f"{_gib(asked)}{node_note}." + peak + f" Ask for half as much again{per_gpu}, or "
            "measure its peak in a short run.",
            f"--mem={new}G",
            f'limits: {{memory: "{math.ceil(asked * MEM_MARGIN / 1024)}Gi"}}',
        )
    ]


def _gpu_advice(
    job: Mapping[str, Any], gpus: Sequence[Mapping[str, Any]], f: _Facts
) -> list[Advice]:
    allocated = f.gpus or len(gpus)
    if not gpus or allocated == 0 or f.hung:
        return []  # a hung job's idle GPUs are the hang's doing
    if len(gpus) < allocated:
        return []  # a GPU no sample reported on did unknown work, not none
    # a GPU seen for a moment of the run did unknown work too: "never active" needs it seen
    # for at least half of the longest any GPU of the job was
    seen = max((_num(g.get("observed_h")) or 0.0) for g in gpus)
    if any(
        (_num(g.get("active_h")) or 0) <= 0 and (_num(g.get("observed_h")) or 0) < 0.5 * seen
        for g in gpus
    ):
        return []
    active = sum(1 for g in gpus if (_num(g.get("active_h")) or 0) > 0)
    if active == 0 and f.interactive:
        return []  # a session that never used its GPU: the idle advice tells it to release it
    if active == 0 and allocated == 1:
        return [
            Advice(
                "Check that the code uses its GPU",
                "The GPU it held did no work: check that the code finds it (e.g. "
                "torch.cuda.is_available()), or run it where no GPU is allocated.",
            )
        ]
    if active == 0:
        return [
            Advice(
                "Test on one GPU first",
                f"{'The GPU' if allocated == 1 else f'None of the {allocated} GPUs'} did "
                "any work: check in a short test job that "
                "the code uses the GPU (e.g. torch.cuda.is_available()) before asking for more.",
                "--gres=gpu:1 --time=00:30:00",
                'limits: {nvidia.com/gpu: 1}; label kueue.x-k8s.io/max-exec-time-seconds: "1800"',
            )
        ]
    if active < allocated:
        return [
            Advice(
                f"Ask for {active} GPU{'s' if active > 1 else ''}, not {allocated}",
                f"{allocated - active} of the {allocated} GPUs "
                f"{noun_for(allocated - active, 'was', 'were')} never active: ask for the "
                f"{active} the job used (or make it use all it asks for).",
                f"--gres=gpu:{active}",
                f"limits: {{nvidia.com/gpu: {active}}}",
            )
        ]
    return []


def _idle_advice(
    job: Mapping[str, Any], gpus: Sequence[Mapping[str, Any]], f: _Facts, t: AdviceThresholds
) -> list[Advice]:
    observed, idle = _num(job.get("observed_gpu_h")) or 0.0, _num(job.get("idle_gpu_h")) or 0.0
    worked = [g for g in gpus if (_num(g.get("active_h")) or 0) > 0]
    if worked and all(_num(g.get("observed_h")) is not None for g in worked):
        # GPUs never active are advice of their own (--gres): judge the ones that worked
        observed = sum(_num(g.get("observed_h")) or 0.0 for g in worked)
        idle = sum(_num(g.get("idle_h")) or 0.0 for g in worked)
    if observed <= 0 or idle / observed < t.idle_share_above:
        return []
    share = f"The GPUs sat idle {idle / observed:.0%} of the time ({idle:,.1f} GPU-hours)."
    if f.interactive:
        return [
            Advice(
                "Release GPUs you are not using",
                f"{share} End interactive sessions when done (give salloc a short --time), or "
                "run the work as a batch job.",
            )
        ]
    if (
        f.hung
        or f.hw_failed
        or (gpus and not any((_num(g.get("active_h")) or 0) > 0 for g in gpus))
    ):
        return []  # the hang, the fault or the short test job explain it
    return [
        Advice(
            "Keep the GPUs busy or give them back",
            f"{share} Run CPU-only steps (data preparation, evaluation, uploads) as jobs without "
            "GPUs (chained with --dependency), so the GPUs are held only while they compute.",
        )
    ]


def _mig_advice(
    job: Mapping[str, Any], gpus: Sequence[Mapping[str, Any]], f: _Facts, t: AdviceThresholds
) -> list[Advice]:
    busy, fb = _num(job.get("busy_mean")), _num(job.get("fb_used_mib_max"))
    if f.gpus != 1 or f.hung or busy is None or busy >= t.mig_busy_below:
        return []
    if any(g.get("mig_instance") is not None for g in gpus):
        return []  # on a slice already: its busy is the slice's, not the whole GPU's
    if (fb or 0.0) > t.mig_fb_max_mib or busy < 0.01:
        return []  # too much memory for a small slice; or idle (the GPU advice covers it)
    total = float(next((g["fb_total_mib"] for g in gpus if g.get("fb_total_mib")), 81920.0))
    g = profile_for(busy, fb or 0.0, total, t.mig_fb_headroom)
    if g >= 7:
        return []
    name = profile_name(g, dict(PROFILES)[g], total)
    return [
        Advice(
            "Use a MIG slice",
            f"Busy {busy:.0%} with at most {(fb or 0) / 1024:.1f} GiB of GPU memory: a MIG "
            f"{name} slice ({g}/7 of the GPU) is enough and frees the rest.",
            f"--gres=gpu:{name}:1",
            f"limits: {{nvidia.com/mig-{name}: 1}}",
        )
    ]


def _stranded_advice(findings: Sequence[Mapping[str, Any]], f: _Facts) -> list[Advice]:
    ev = _stranded(findings)
    if ev is None or f.gpus == 0:
        return []
    if f.state.startswith(OOM_STATE):
        # it ran out of memory: less memory would kill it again (_memory_advice says what more
        # costs the node)
        ev.pop("max_mem_per_gpu_gib", None)
    options = host_request_options(ev)
    if not options:
        return []
    cpus, mem = _num(ev.get("max_cpus_per_gpu")), _num(ev.get("max_mem_per_gpu_gib"))
    requests = ([f'cpu: "{int(cpus) * f.gpus}"'] if cpus else []) + (
        [f'memory: "{int(mem) * f.gpus}Gi"'] if mem else []
    )
    what = " and ".join((["cores"] if cpus else []) + (["memory"] if mem else []))
    stranded, node_gpus = _num(ev.get("stranded_gpus")), _num(ev.get("node_gpus"))
    left = (
        f" left {int(stranded)} of the node's {counted(int(node_gpus), 'GPU')} unusable"
        if stranded and node_gpus
        else " left some of the node's GPUs unusable"
    )
    return [
        Advice(
            "Ask for no more than each GPU's share of the node",
            f"Its {what} request{left}: a GPU is usable only with its share of the node's "
            f"{what}. Ask for at most that share per GPU.",
            " ".join(options),
            f"requests: {{{', '.join(requests)}}}",
        )
    ]


def host_request_options(evidence: Mapping[str, Any]) -> list[str]:
    """The Slurm options that keep a `stranded_gpus` finding's job within each GPU's share of
    its node: one for every resource (cores, memory) whose request stranded GPUs."""
    cpus, mem = _num(evidence.get("max_cpus_per_gpu")), _num(evidence.get("max_mem_per_gpu_gib"))
    return ([f"--cpus-per-gpu={int(cpus)}"] if cpus else []) + (
        [f"--mem-per-gpu={int(mem)}G"] if mem else []
    )


def _fewer_gpus_advice(findings: Sequence[Mapping[str, Any]], f: _Facts) -> list[Advice]:
    found = next((x for x in findings if x.get("detector") == OVERALLOCATED_DETECTOR), None)
    if found is None or f.hung or f.gpus < 2:
        return []  # one GPU: _mig_advice judges it from the job's own usage
    ev = _evidence(found)
    needed, profile = _num(ev.get("gpus_needed")), ev.get("mig_profile")
    if isinstance(profile, str) and profile:
        return [
            Advice(
                f"Use one MIG slice, not {f.gpus} GPUs",
                f"All {f.gpus} GPUs together did less work and held less memory than one "
                f"MIG {profile} slice holds: run the job on that one slice.",
                f"--gres=gpu:{profile}:1",
                f"limits: {{nvidia.com/mig-{profile}: 1}}",
            )
        ]
    if needed is None or not 0 < needed < f.gpus:
        return []
    n = int(needed)
    return [
        Advice(
            f"Ask for {counted(n, 'GPU')}, not {f.gpus}",
            f"All {f.gpus} GPUs were active but lightly used: together they did the work of "
            f"{counted(n, 'GPU')} or less, in both compute and memory.",
            f"--gres=gpu:{n}",
            f"limits: {{nvidia.com/gpu: {n}}}",
        )
    ]


def _time_advice(job: Mapping[str, Any], f: _Facts, t: AdviceThresholds) -> list[Advice]:
    limit, runtime = _num(job.get("time_limit_s")), _num(job.get("runtime_s"))
    if not limit or runtime is None or f.hung or f.hw_failed:
        return []  # a hang or a fault, not the limit, decided how long it ran
    # only when the telemetry showed it working: no diagnosis (unobserved) says nothing
    if f.state.startswith("TIMEOUT") and f.diagnosis not in (*NO_PROGRESS, "unobserved", None):
        new = round_up(limit * t.time_margin, 900)
        return [
            Advice(
                "Ask for more time",
                f"The job was still working when it hit its {hhmmss(limit)} limit: ask for "
                "more, and checkpoint so a limit costs minutes, not the run.",
                f"--time={hhmmss(new)}",
                f'label kueue.x-k8s.io/max-exec-time-seconds: "{int(new)}"',
            )
        ]
    if f.state.startswith("COMPLETED") and runtime < t.time_used_below * limit:
        new = round_up(runtime * t.time_margin, 900)
        if new >= limit:  # (a short limit rounded up to the quarter hour is the limit again)
            return []
        return [
            Advice(
                "Ask for a shorter time limit",
                f"It ran {hhmmss(runtime)} of a {hhmmss(limit)} limit ({runtime / limit:.0%}); "
                "a tighter limit starts sooner through backfill.",
                f"--time={hhmmss(new)}",
                f'label kueue.x-k8s.io/max-exec-time-seconds: "{int(new)}"',
            )
        ]
    return []


def _stranded(findings: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The evidence of the job's `stranded_gpus` finding, if it has one."""
    found = next((x for x in findings if x.get("detector") == STRANDED_DETECTOR), None)
    return None if found is None else dict(_evidence(found))


def _stranded_cap(findings: Sequence[Mapping[str, Any]]) -> int | None:
    """The most cores per GPU that strand none of the node's GPUs, from `stranded_gpus`."""
    cap = _num((_stranded(findings) or {}).get("max_cpus_per_gpu"))
    return None if cap is None else int(cap)


def _cpu_advice(
    job: Mapping[str, Any], f: _Facts, t: AdviceThresholds, cap: int | None = None
) -> list[Advice]:
    cpus = int(_num(job.get("cpus")) or 0)
    if f.gpus == 0 or f.hung:
        return []  # a hung job's cores idle with its GPUs: no advice from them
    per_gpu = math.ceil(cpus / f.gpus) if cpus else 0
    if f.diagnosis == "input_bound":
        more = max(per_gpu * 2, t.input_cpus_per_gpu_min)
        more = more if cap is None else min(more, cap)  # strand none of the node's GPUs
        have = f" with {counted(per_gpu, 'core')} per GPU" if cpus else ""
        if cpus and more <= per_gpu:  # the node has no more cores per GPU to give
            return [
                Advice(
                    "Feed the GPU faster",
                    f"The GPUs worked in bursts and waited for input between them{have}, as "
                    "many cores as the node can give each GPU: make each DataLoader worker "
                    "cheaper (pinned memory, prefetching, data already decoded).",
                )
            ]
        return [
            Advice(
                "Feed the GPU faster",
                f"The GPUs worked in bursts and waited for input between them{have}: use more "
                "DataLoader workers (pinned memory, prefetching), which need more cores.",
                f"--cpus-per-gpu={more}",
                f'requests: {{cpu: "{more * f.gpus}"}}',
            )
        ]
    # (the CPU time the lake holds is of the run time it holds, not of Slurm's final one)
    cpu_time, runtime = _num(job.get("cpu_time_s")), usage_runtime_s(job)
    if not cpus or cpu_time is None or not runtime or f.hw_failed:
        return []  # a failed node's cores are missing from the accounting
    used = cpu_time / runtime
    if used / cpus < t.cpu_efficiency_below:
        fewer = max(1, math.ceil(used * 1.25 / f.gpus))
        fewer = fewer if cap is None else min(fewer, cap)  # and strand no GPU either
        if fewer < per_gpu:
            return [
                Advice(
                    "Ask for fewer CPU cores",
                    f"It used {used:.1f} of {cpus} cores ({used / cpus:.0%}); idle cores "
                    "strand the node's other GPUs.",
                    f"--cpus-per-gpu={fewer}",
                    f'requests: {{cpu: "{fewer * f.gpus}"}}',
                )
            ]
    return []


def _tensor_advice(job: Mapping[str, Any], f: _Facts, t: AdviceThresholds) -> list[Advice]:
    busy, tensor = _num(job.get("busy_mean")), _num(job.get("tensor_active_mean"))
    if f.hung or busy is None or tensor is None:
        return []
    if busy < t.tensor_busy_above or tensor >= t.tensor_active_below:
        return []
    return [
        Advice(
            "Use the tensor cores",
            f"Tensor pipes were active {tensor:.1%} of the time although the GPUs were busy "
            f"{busy:.0%}: train in bf16/fp16 mixed precision (or TF32).",
        )
    ]


def when_no_advice(job: Mapping[str, Any]) -> str:
    """What to say when `advise` has nothing: "sized well" only for a job with telemetry that
    ran to its end; of a job that failed or was preempted, that its figures (of the part it
    ran) call for no change."""
    observed = _num(job.get("observed_gpu_h"))
    if not job_started(job):  # (cancelled while pending)
        return NOT_STARTED
    if observed is None or observed <= 0:
        return NO_TELEMETRY
    state = str(job.get("state") or "")
    if state.startswith(FAILED_STATES):
        return CUT_SHORT.format(how="failed before it finished (its output says why)")
    if state.startswith(PREEMPTED_STATES):
        return CUT_SHORT.format(how="was preempted before it finished")
    return NOTHING_TO_CHANGE


def advise(
    job: Mapping[str, Any],
    gpus: Sequence[Mapping[str, Any]],
    diagnosis: str | None,
    findings: Sequence[Mapping[str, Any]] = (),
    thresholds: AdviceThresholds | None = None,
) -> list[Advice]:
    """Every change worth making next time, most valuable first; empty when it was well sized."""
    t = thresholds or AdviceThresholds()
    if not job_started(job):
        return []  # it held nothing and ran nothing: nothing in it to change
    f = _facts(job, diagnosis, findings)
    return (
        _hung_advice(job, findings, f)
        + _hw_advice(job, findings, f)
        + _memory_advice(job, f, findings)
        + _gpu_advice(job, gpus, f)
        + _idle_advice(job, gpus, f, t)
        + _fewer_gpus_advice(findings, f)
        + _mig_advice(job, gpus, f, t)
        + _stranded_advice(findings, f)
        + _time_advice(job, f, t)
        + _cpu_advice(job, f, t, _stranded_cap(findings))
        + _tensor_advice(job, f, t)
        + _unreported_advice(job, gpus, f)
    )


def _unreported_advice(
    job: Mapping[str, Any], gpus: Sequence[Mapping[str, Any]], f: _Facts
) -> list[Advice]:
    """Some of the job's GPUs sent no telemetry (others did): their work is unknown, and so is
    whether the job was sized well (it was told "sized well" on half its GPUs)."""
    observed = _num(job.get("observed_gpu_h")) or 0.0
    if not gpus or observed <= 0 or not f.gpus or len(gpus) >= f.gpus:
        return []
    missing = f.gpus - len(gpus)
    return [
        Advice(
            "Check the GPUs that sent no data",
            f"{counted(missing, 'GPU')} of its {f.gpus} sent no telemetry: what "
            f"{noun_for(missing, 'it', 'they')} did, and so whether the job was sized well, is "
            "unknown. Check the exporter (dcgm-exporter) on its nodes.",
        )
    ]
