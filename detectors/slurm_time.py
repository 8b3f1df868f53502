"""Slurm's time format (`HH:MM:SS`, `D-HH:MM:SS`) and rounding a limit up to a step.

Apart from the recommenders (detectors.recommend.recommendation re-exports both) so that
`gpuledger job` reads them without loading every recommender and Arrow.
"""

from __future__ import annotations

import math

__all__ = ["hhmmss", "round_up"]


def round_up(value: float, step: float) -> float:
    """`value` rounded up to a multiple of `step` (at least one step)."""
    return max(math.ceil(value / step - 1e-9), 1) * step


def hhmmss(seconds: float) -> str:
    """Slurm's time format: `HH:MM:SS`, or `D-HH:MM:SS` from one day on."""
    total = int(math.ceil(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock
