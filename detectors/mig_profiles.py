"""NVIDIA MIG profiles: their compute and memory slices, names, and the smallest that fits.

Apart from the MIG-packing recommender (detectors.recommend.mig_packing re-exports them) so
that the job advice (`gpuledger job`) reads them without loading every recommender.
"""

from __future__ import annotations

import math

__all__ = ["PROFILES", "profile_for", "profile_name"]

# (compute slices of 7, memory eighths) of the MIG profiles of A100/H100/H200/B200
PROFILES: tuple[tuple[int, int], ...] = ((1, 1), (2, 2), (3, 4), (4, 4), (7, 8))


def profile_name(g: int, eighths: int, fb_total_mib: float) -> str:
    """NVIDIA's name of a profile, e.g. 1g.10gb on an 80 GB GPU, 1g.18gb on an H200."""
    return f"{g}g.{math.ceil(fb_total_mib / 1024 * eighths / 8 - 0.05)}gb"


def profile_for(busy: float, fb_used_mib: float, fb_total_mib: float, headroom: float) -> int:
    """The compute slices (g) of the smallest profile that fits; 7 when nothing smaller does."""
    for g, eighths in PROFILES:
        if g / 7 >= busy and fb_total_mib * eighths / 8 >= fb_used_mib * headroom:
            return g
    return 7
