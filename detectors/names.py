"""Every name a finding's `detector` column can hold, importable without the detectors.

The rules' names are `detectors.rules.DETECTORS`; the bottleneck diagnosis and each predictive
model write one more (the early-waste model one per horizon: `early_waste_model_<minutes>m`).
Each of those modules takes its name from here, so that checking a configuration that names
detectors (`alerts.idle_detectors`) loads no detector (polars, numpy).
"""

from __future__ import annotations

from detectors.rules.config import DETECTORS as RULES

__all__ = [
    "BOTTLENECK",
    "EARLY_WASTE",
    "FAILING_GPU",
    "LEMON_NODE",
    "RULES",
    "RUNTIME_QUANTILES",
]

BOTTLENECK = "bottleneck"
EARLY_WASTE = "early_waste_model"  # its findings: early_waste_model_<minutes>m
FAILING_GPU = "failing_gpu_model"
LEMON_NODE = "lemon_node_model"
RUNTIME_QUANTILES = "runtime_quantiles_model"
