"""Waste and hardware-health rules over the lake's marts.

Each family module (idle, gpu_balance, efficiency, health, health_trend, mapping, resilience,
stranded, mfu) holds its `RULES`; their thresholds are in `thresholds`, every family's in one
`RuleConfig` (`config`), and `run.run_rules(con, config, now)` runs them all and returns one
Arrow table in the `findings` schema.

This package's own names are the light ones a configuration is checked against (the
detectors' names, their families, the thresholds): importing it loads neither polars nor a
rule.
"""

from __future__ import annotations

from detectors.rules.config import (
    DETECTOR_FAMILY,
    DETECTORS,
    FAMILIES,
    RuleConfig,
    RuleConfigError,
    rule_config_from,
)

__all__ = [
    "DETECTORS",
    "DETECTOR_FAMILY",
    "FAMILIES",
    "RuleConfig",
    "RuleConfigError",
    "rule_config_from",
]
