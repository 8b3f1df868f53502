"""`RuleConfig`: every rule family's thresholds in one frozen value, with documented defaults.

The configuration file (TOML, read by `app.config`) maps onto these dataclasses later; library
code only ever receives a `RuleConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from detectors.rules.thresholds import (
    EfficiencyThresholds,
    GpuBalanceThresholds,
    HealthThresholds,
    HealthTrendThresholds,
    IdleThresholds,
    MappingThresholds,
    MfuThresholds,
    PowerThresholds,
    ResilienceThresholds,
    StrandedThresholds,
)

__all__ = [
    "DETECTORS",
    "DETECTOR_FAMILY",
    "FAMILIES",
    "RuleConfig",
    "RuleConfigError",
    "WASTE_DETECTORS",
    "rule_config_from",
]

# Every `detector` value the rules write (documented in docs/detectors.md and in
# `gpuledger detect --help`).
DETECTORS: tuple[str, ...] = (
    "idle_job",
    "memory_hold",
    "hung_job",
    "partial_idle",
    "straggler_gpu",
    "low_efficiency_user",
    "overallocated",
    "time_limit_excess",
    "power_cap_candidate",
    "throttling",
    "xid_hardware",
    "ecc_dbe",
    "row_remap_failure",
    "row_remap_pending",
    "gpu_health_trend",
    "gpu_without_job",
    "job_without_data",
    "failed_after_hw_event",
    "lost_gpu_hours",
    "checkpoint_interval",
    "stranded_gpus",
    "low_mfu",
)

# The detectors whose GPU-hours at stake are GPU time wasted (docs/detectors.md's table); the
# others' are hours at risk, lost or unobserved.
WASTE_DETECTORS: frozenset[str] = frozenset(
    {
        "idle_job",
        "memory_hold",
        "hung_job",
        "partial_idle",
        "straggler_gpu",
        "low_efficiency_user",
        "overallocated",
        "throttling",
        "stranded_gpus",
        "low_mfu",
    }
)

# The rule family (a RuleConfig field) whose thresholds each detector reads.
DETECTOR_FAMILY: dict[str, str] = {
    **dict.fromkeys(("idle_job", "memory_hold", "hung_job"), "idle"),
    **dict.fromkeys(("partial_idle", "straggler_gpu"), "gpu_balance"),
    **dict.fromkeys(("low_efficiency_user", "overallocated", "time_limit_excess"), "efficiency"),
    "power_cap_candidate": "power",
    **dict.fromkeys(
        ("throttling", "xid_hardware", "ecc_dbe", "row_remap_failure", "row_remap_pending"),
        "health",
    ),
    "gpu_health_trend": "health_trend",
    **dict.fromkeys(("gpu_without_job", "job_without_data"), "mapping"),
    **dict.fromkeys(
        ("failed_after_hw_event", "lost_gpu_hours", "checkpoint_interval"), "resilience"
    ),
    "stranded_gpus": "stranded",
    "low_mfu": "mfu",
}


@dataclass(frozen=True, slots=True)
class RuleConfig:
    """The thresholds of every rule family (see each family's dataclass for the meanings)."""

    idle: IdleThresholds = field(default_factory=IdleThresholds)
    gpu_balance: GpuBalanceThresholds = field(default_factory=GpuBalanceThresholds)
    efficiency: EfficiencyThresholds = field(default_factory=EfficiencyThresholds)
    power: PowerThresholds = field(default_factory=PowerThresholds)
    health: HealthThresholds = field(default_factory=HealthThresholds)
    health_trend: HealthTrendThresholds = field(default_factory=HealthTrendThresholds)
    mapping: MappingThresholds = field(default_factory=MappingThresholds)
    resilience: ResilienceThresholds = field(default_factory=ResilienceThresholds)
    stranded: StrandedThresholds = field(default_factory=StrandedThresholds)
    mfu: MfuThresholds = field(default_factory=MfuThresholds)


# family name (a RuleConfig field) -> its thresholds type, for docs and property tests
FAMILIES: dict[str, type] = {
    "idle": IdleThresholds,
    "gpu_balance": GpuBalanceThresholds,
    "efficiency": EfficiencyThresholds,
    "power": PowerThresholds,
    "health": HealthThresholds,
    "health_trend": HealthTrendThresholds,
    "mapping": MappingThresholds,
    "resilience": ResilienceThresholds,
    "stranded": StrandedThresholds,
    "mfu": MfuThresholds,
}


class RuleConfigError(ValueError):
    """A threshold setting that names no threshold or has the wrong type (message names it)."""


def rule_config_from(values: Mapping[str, Mapping[str, Any]]) -> RuleConfig:
    """Build a RuleConfig from `{family: {threshold: value}}` (e.g. a TOML `[detect.idle]` table).

    Unknown families or thresholds, and values of the wrong type, raise RuleConfigError naming
    the key (`detect.idle.idle_minutes`) and what was expected; what is not given keeps its
    documented default.
    """
    families = {}
    for family, settings in values.items():
        kind = FAMILIES.get(family)
        if kind is None:
            raise RuleConfigError(
                f"detect.{family}: no such rule family; known: {', '.join(sorted(FAMILIES))}"
            )
        defaults = {f.name: f.default for f in fields(kind)}
        given = {}
        for name, value in settings.items():
            key = f"detect.{family}.{name}"
            if name not in defaults:
                raise RuleConfigError(
                    f"{key}: no such threshold; known: {', '.join(sorted(defaults))}"
                )
            default = defaults[name]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise RuleConfigError(f"{key}: expected a number, got {value!r}")
            if isinstance(default, int) and not isinstance(default, bool):
                if value != int(value):
                    raise RuleConfigError(f"{key}: expected a whole number, got {value!r}")
                value = int(value)
            given[name] = float(value) if isinstance(default, float) else value
        families[family] = kind(**given)
    return RuleConfig(**families)
