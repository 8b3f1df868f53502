"""`RuleConfig`: every rule family's thresholds in one frozen value, with documented defaults.

The configuration file (TOML, read by `app.config`) maps onto these dataclasses later; library
code only ever receives a `RuleConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from detectors.rules.idle import IdleThresholds

__all__ = ["FAMILIES", "RuleConfig"]


@dataclass(frozen=True, slots=True)
class RuleConfig:
    """The thresholds of every rule family (see each family's dataclass for the meanings)."""

    idle: IdleThresholds = field(default_factory=IdleThresholds)


# family name (RuleConfig field) -> its thresholds type, for docs and property tests
FAMILIES: dict[str, type] = {
    "idle": IdleThresholds,
}
