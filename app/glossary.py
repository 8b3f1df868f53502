"""Definitions the dashboard and the weekly report both show, written once so they agree."""

from __future__ import annotations

__all__ = ["WASTE_GPU_H"]

# fairness_weekly.waste_gpu_h (sql/marts/fairness_weekly.sql): observed − effective GPU-hours.
WASTE_GPU_H = (
    "Observed − effective GPU-hours: the GPU time jobs held that telemetry saw, less what did "
    "work (Σ busy × time). It holds the idle GPU-hours shown elsewhere (allocated, busy < 1 %) "
    "almost whole, plus the unused part of busy GPUs (an hour at 40 % busy adds 0.6), so it is "
    "usually larger than idle GPU-h. Allocated time no sample covered is not counted."
)
