"""Terminal sparklines: a series of 0-1 fractions as one line of block characters."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["BLOCKS", "render_sparkline", "resample"]

BLOCKS = "▁▂▃▄▅▆▇█"
MISSING = " "


def resample(values: Sequence[float | None], width: int) -> list[float | None]:
    """`values` squeezed (mean of each chunk, ignoring gaps) or kept to at most `width` points."""
    n = len(values)
    if n <= width:
        return list(values)
    out: list[float | None] = []
    for i in range(width):
        chunk = [
            v for v in values[i * n // width : (i + 1) * n // width] if v is not None and v == v
        ]
        out.append(sum(chunk) / len(chunk) if chunk else None)
    return out


def render_sparkline(values: Sequence[float | None], width: int = 40) -> str:
    """One block per point, ▁ for 0 up to █ for 1 (values are clipped); a gap is a space."""
    cells = []
    for v in resample(values, width):
        if v is None or v != v:  # a gap, or NaN (a figure another tool's file broke)
            cells.append(MISSING)
        else:
            level = min(max(v, 0.0), 1.0)
            cells.append(BLOCKS[min(int(level * len(BLOCKS)), len(BLOCKS) - 1)])
    return "".join(cells)
