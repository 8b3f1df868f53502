"""`RuleConfig`: every rule family's thresholds in one frozen value, with documented defaults.

The configuration file (TOML, read by `app.config`) maps onto these dataclasses later; library
code only ever receives a `RuleConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from detectors.rules.efficiency import EfficiencyThresholds, PowerThresholds
from detectors.rules.gpu_balance import GpuBalanceThresholds
from detectors.rules.health import HealthThresholds
from detectors.rules.idle import IdleThresholds
from detectors.rules.mapping import MappingThresholds
from detectors.rules.resilience import ResilienceThresholds
from detectors.rules.stranded import StrandedThresholds

__all__ = ["FAMILIES", "RuleConfig"]


@dataclass(frozen=True, slots=True)
class RuleConfig:
    """The thresholds of every rule family (see each family's dataclass for the meanings)."""

    idle: IdleThresholds = field(default_factory=IdleThresholds)
    gpu_balance: GpuBalanceThresholds = field(default_factory=GpuBalanceThresholds)
    efficiency: EfficiencyThresholds = field(default_factory=EfficiencyThresholds)
    power: PowerThresholds = field(default_factory=PowerThresholds)
    health: HealthThresholds = field(default_factory=HealthThresholds)
    mapping: MappingThresholds = field(default_factory=MappingThresholds)
    resilience: ResilienceThresholds = field(default_factory=ResilienceThresholds)
    stranded: StrandedThresholds = field(default_factory=StrandedThresholds)


# family name (a RuleConfig field) -> its thresholds type, for docs and property tests
FAMILIES: dict[str, type] = {
    "idle": IdleThresholds,
    "gpu_balance": GpuBalanceThresholds,
    "efficiency": EfficiencyThresholds,
    "power": PowerThresholds,
    "health": HealthThresholds,
    "mapping": MappingThresholds,
    "resilience": ResilienceThresholds,
    "stranded": StrandedThresholds,
}
