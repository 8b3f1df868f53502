"""Every rule family's thresholds: frozen dataclasses of documented fields (`threshold`).

Each rule module (idle, gpu_balance, efficiency, health, health_trend, mapping, resilience,
stranded, mfu) reads its family's thresholds from here and re-exports them. They live apart
from the rules, in a module that imports neither polars nor the rules, so that loading a
configuration (whose `[detect.<family>]` tables are checked against these fields) costs no
more than reading it: `gpuledger attribute`, `collect` and `config check` start without the
detectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

__all__ = [
    "EfficiencyThresholds",
    "GpuBalanceThresholds",
    "HealthThresholds",
    "HealthTrendThresholds",
    "IdleThresholds",
    "MappingThresholds",
    "MfuThresholds",
    "PowerThresholds",
    "ResilienceThresholds",
    "StrandedThresholds",
    "Stricter",
    "threshold",
    "threshold_docs",
]

Stricter = Literal["up", "down"] | None


def threshold(default: Any, doc: str, stricter: Stricter = "up") -> Any:
    """A dataclass field with its documentation and the direction that makes the rule stricter.

    `stricter="up"` means raising the value can only remove findings (a minimum); `"down"`
    means lowering it can (a maximum); None means neither (property tests skip it).
    """
    return field(default=default, metadata={"doc": doc, "stricter": stricter})


def threshold_docs(config_type: type) -> list[tuple[str, Any, str, Stricter]]:
    """(name, default, doc, stricter) of every threshold of a family's dataclass."""
    return [
        (f.name, f.default, f.metadata.get("doc", ""), f.metadata.get("stricter"))
        for f in fields(config_type)
    ]


@dataclass(frozen=True, slots=True)
class IdleThresholds:
    """When a job counts as idle, holding memory, or hung (DESIGN §4 busy/idle definitions)."""

    idle_minutes: float = threshold(
        60.0,
        "Idle job: its GPUs did almost no work (idle_work_max_frac) over a window this many "
        "minutes long; short spikes within the window do not break it.",
    )
    whole_job_min_minutes: float = threshold(
        5.0,
        "Idle job / memory hold: also flag a job whose whole observed run was that still once "
        "that run is this long (short jobs that never touched their GPUs).",
    )
    idle_work_max_frac: float = threshold(
        0.015,
        "A window is still (idle, or memory held) when the job's GPUs' mean work over it is at "
        "most this (0-1): SM/engine activity, else power above idle as a share of the way to "
        "the board limit (no profiling fields), else GPU_UTIL / 100.",
        "down",
    )
    idle_real_work_max_frac: float = threshold(
        0.002,
        "... and at most this (0-1) in 5-minute buckets whose work per active second was above "
        "idle_kernel_max_frac: real work, not a health check's or a monitoring agent's small "
        "kernel.",
        "down",
    )
    idle_kernel_max_frac: float = threshold(
        0.2,
        "Activity at most this intense (work per active second, 0-1) is a small kernel that does "
        "not count as real work.",
        "down",
    )
    hold_fb_min_frac: float = threshold(
        0.10,
        "An idle bucket is 'memory held without compute' when a GPU used at least this share "
        "of its memory; below it the job is plain idle.",
        None,
    )
    hold_minutes: float = threshold(
        60.0, "Memory hold: memory held and almost no work over a window this many minutes long."
    )
    hung_util_min_pct: float = threshold(
        90.0, "Hung job: mean GPU_UTIL at least this (0-100) ...", "up"
    )
    hung_sm_max: float = threshold(0.02, "... while SM activity is at most this (0-1).", "down")
    hung_power_max_frac: float = threshold(
        0.10,
        "Where SM activity is not reported: hung when power is at most this share of the way "
        "from idle power to the board limit.",
        "down",
    )
    hung_minutes: float = threshold(30.0, "Hung job: over a window this many minutes long ...")
    hung_duty_min_frac: float = threshold(
        0.75, "... at least this share of which (0-1) was hung 5-minute buckets.", "up"
    )
    critical_gpu_h: float = threshold(
        8.0, "Severity is critical (not warn) from this many GPU-hours wasted.", None
    )


@dataclass(frozen=True, slots=True)
class GpuBalanceThresholds:
    """When some GPUs of a job sit idle (partial) or lag the others (straggler)."""

    never_active_frac: float = threshold(
        0.01,
        "A GPU is never active when it was active less than this share of its observed time "
        "(not monotone: more never-active GPUs can turn a partial job into a fully idle one).",
        None,
    )
    partial_min_minutes: float = threshold(
        0.25,
        "Partially idle: the job's GPUs were observed at least this many minutes (startup "
        "idles every GPU alike, so even a short job's idle GPUs are telling).",
    )
    partial_min_idle_gpus: int = threshold(1, "Partially idle: at least this many GPUs idle.")
    partial_min_gpu_h: float = threshold(
        0.0, "Partially idle: the idle GPUs wasted at least this many GPU-hours."
    )
    straggler_min_gpus: int = threshold(
        2, "Straggler: only in jobs with at least this many active GPUs."
    )
    straggler_ratio: float = threshold(
        0.7,
        "Straggler: a GPU whose mean busy fraction is at most this share of the job's median.",
        "down",
    )
    straggler_min_busy: float = threshold(
        0.2, "Straggler: only where the job's median GPU is at least this busy (0-1)."
    )
    straggler_min_minutes: float = threshold(
        10.0, "Straggler: the job was observed at least this many minutes."
    )


@dataclass(frozen=True, slots=True)
class EfficiencyThresholds:
    """Low efficiency per user (ratio AND hours AND top-N), MIG candidates, time limits."""

    user_window_days: float = threshold(
        7.0, "Low-efficiency users: the window, in days, ending at the lake's latest job.", None
    )
    user_max_ratio: float = threshold(
        0.3,
        "Low-efficiency users: effective / observed GPU-hours (the allocated ones the "
        "telemetry saw) at most this (0-1) ...",
        "down",
    )
    user_min_gpu_h: float = threshold(24.0, "... AND at least this many observed GPU-hours ...")
    user_top_n: int = threshold(
        10, "... AND among the N users wasting the most GPU-hours (of all users).", "down"
    )
    mig_fb_max_frac: float = threshold(
        0.15, "MIG candidate: peak GPU memory at most this share of the GPU ...", "down"
    )
    mig_busy_max: float = threshold(
        0.3, "... and mean SM activity (else busy fraction) at most this ...", "down"
    )
    mig_util_max: float = threshold(
        0.5,
        "... or, where only GPU_UTIL is known (no profiling fields: it reads 100 % whenever any "
        "kernel runs, so it overstates use), mean GPU_UTIL / 100 at most this ...",
        "down",
    )
    mig_busy_min: float = threshold(
        0.01, "... but at least this (fully idle jobs are idle findings) ..."
    )
    mig_min_hours: float = threshold(0.05, "... over at least this many observed hours (per GPU).")
    limit_ratio: float = threshold(
        5.0, "Time limit: a finished job's limit is at least this many times its run time ..."
    )
    limit_min_runtime_minutes: float = threshold(5.0, "... and it ran at least this many minutes.")


@dataclass(frozen=True, slots=True)
class PowerThresholds:
    """Jobs that would lose little speed under a power cap: low activity at high power."""

    power_min_frac: float = threshold(0.5, "Mean power at least this share of the board limit ...")
    power_busy_max: float = threshold(
        0.4, "... while mean SM activity (else busy) is at most this (0-1) ...", "down"
    )
    power_min_hours: float = threshold(1.0, "... over at least this many observed GPU-hours.")
    power_cap_frac: float = threshold(
        0.6, "The cap to suggest, as a share of the board limit.", None
    )
    power_min_kwh: float = threshold(1.0, "Only when the cap would save at least this many kWh.")


@dataclass(frozen=True, slots=True)
class HealthThresholds:
    """When throttling, ECC and XIDs become findings."""

    throttle_min_share: float = threshold(
        0.25,
        "An hour is throttled when at least this share of its samples carry a thermal (0x20, "
        "0x40), HW-slowdown (0x8) or power-brake (0x80) clock-event bit.",
    )
    throttle_min_hours: float = threshold(
        1.0, "Throttling: a GPU throttled for at least this many hours."
    )
    dbe_min: int = threshold(1, "ECC: at least this many new double-bit errors on a GPU.")
    xid_min_events: int = threshold(1, "XID: at least this many hardware XIDs on a GPU in a day.")


@dataclass(frozen=True, slots=True)
class HealthTrendThresholds:
    """When a GPU's corrected-error climb or its precursor XIDs warn of a failure to come."""

    window_h: int = threshold(
        8,
        "Hours of corrected errors that make one rate (and the window before: acceleration).",
        None,
    )
    min_errors: int = threshold(
        3, "A warning needs at least this many new corrected errors in the window."
    )
    baseline_mads: float = threshold(
        6.0,
        "... and at least the fleet's median windowed count plus this many MADs (x 1.4826).",
    )
    min_active_hours: int = threshold(
        3, "... spread over at least this many hours of the window (one burst is no climb)."
    )
    accel_ratio: float = threshold(
        1.5, "... and at least this many times the errors of the window before (accelerating)."
    )
    min_precursor_xids: int = threshold(
        2,
        "Or this many precursor XIDs (63, 92, 119, 120) in one window; one is enough with a new "
        "corrected error in the same window.",
    )


@dataclass(frozen=True, slots=True)
class MappingThresholds:
    """When unattributed activity or missing telemetry becomes a finding."""

    unattributed_min_active_h: float = threshold(
        0.5, "GPU without job: at least this many active hours on a GPU in a day with no job."
    )
    nodata_min_alloc_gpu_h: float = threshold(
        1.0,
        "Job without data: at least this many GPU-hours allocated while the cluster's other "
        "GPUs reported ...",
    )
    nodata_max_observed_frac: float = threshold(
        0.1, "... of which the job's own telemetry covered at most this share.", "down"
    )


@dataclass(frozen=True, slots=True)
class ResilienceThresholds:
    """When lost GPU-hours and missing checkpoints become findings."""

    account_window_days: float = threshold(
        7.0, "Lost GPU-hours per account: the window, in days.", None
    )
    account_min_lost_gpu_h: float = threshold(
        100.0, "An account lost at least this many GPU-hours to failed/requeued/killed jobs ..."
    )
    account_min_lost_share: float = threshold(0.2, "... and at least this share of its usage.")
    checkpoint_cost_minutes: float = threshold(
        5.0, "Time to write one checkpoint (delta in Young/Daly), in minutes.", None
    )
    checkpoint_min_gpus: int = threshold(
        8, "Checkpoint advice: for interrupted jobs of at least this many GPUs ..."
    )
    checkpoint_min_lost_gpu_h: float = threshold(
        1.0, "... that lost at least this many GPU-hours more than checkpoints would have."
    )


@dataclass(frozen=True, slots=True)
class StrandedThresholds:
    """When a job's host request strands GPUs."""

    min_stranded_gpus: int = threshold(1, "At least this many of the node's GPUs left unusable ...")
    min_runtime_minutes: float = threshold(
        0.0,
        "... by a job that ran at least this long (a running job: up to the end of the data).",
    )


@dataclass(frozen=True, slots=True)
class MfuThresholds:
    """A large training job (GPUs AND hours) whose reported MFU is below a floor."""

    mfu_max: float = threshold(
        0.15, "Low MFU: model FLOPs utilisation (0-1) below this ...", "down"
    )
    mfu_min_gpus: int = threshold(8, "... on a job of at least this many GPUs ...")
    mfu_min_hours: float = threshold(1.0, "... that held them at least this many hours.")
