"""The report's charts: matplotlib figures rendered to PNG bytes (embedded, never linked).

Each `chart_*` takes a report table and returns PNG bytes, or None when there is nothing to draw.
The Agg backend is used, so no display is needed.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

__all__ = ["chart_cluster_frame", "chart_usage_vs_share", "chart_waits", "chart_waste_trend"]

INK = "#1f2937"
MUTED = "#9ca3af"
BLUE = "#2563eb"
ORANGE = "#f59e0b"
RED = "#dc2626"
GREEN = "#16a34a"
PALETTE = [BLUE, ORANGE, RED, "#7c3aed", GREEN, MUTED]
DPI = 110


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def _style(ax: Axes, title: str) -> None:
    ax.set_title(title, loc="left", fontsize=11, color=INK, fontweight="bold")
    ax.spines[["top", "right"]].set_visible(False)
    ax.tick_params(colors=INK, labelsize=8)
    ax.grid(axis="y", color="#e5e7eb", linewidth=0.8)
    ax.set_axisbelow(True)


def chart_usage_vs_share(accounts: pl.DataFrame, limit: int = 12) -> bytes | None:
    """Bars per account: this week's usage share, decayed usage share, entitled share."""
    rows = accounts.filter(
        (pl.col("alloc_gpu_h") > 0) | (pl.col("entitled_share").fill_null(0) > 0)
    ).head(limit)
    if rows.is_empty():
        return None
    # a name past 24 characters is cut with "…" (a 118-character account took half the chart)
    names = [_short(name) for name in rows.get_column("account").to_list()]
    series = [
        ("usage this week", rows.get_column("usage_share").fill_null(0).to_list(), BLUE),
        ("decayed usage", rows.get_column("decayed_usage_share").fill_null(0).to_list(), MUTED),
        ("entitled", rows.get_column("entitled_share").fill_null(0).to_list(), ORANGE),
    ]
    fig, ax = plt.subplots(figsize=(7.2, 2.9))
    width = 0.27
    for k, (label, values, color) in enumerate(series):
        xs = [i + (k - 1) * width for i in range(len(names))]
        ax.bar(xs, [v * 100 for v in values], width, label=label, color=color)
    ax.set_xticks(range(len(names)), names, rotation=30 if len(names) > 6 else 0, ha="right")
    top = max((max(values) for _, values, _ in series), default=0.0) * 100
    ax.set_ylim(0, top * 1.3 or 1.0)  # headroom for the legend above the bars
    ax.set_ylabel("% of cluster", fontsize=8, color=INK)
    ax.legend(fontsize=8, frameon=False, ncols=3, loc="upper right")
    _style(ax, "Usage vs entitlement by account")
    return _png(fig)


def chart_waits(waits: pl.DataFrame) -> bytes | None:
    """p50 and p95 queue wait (hours) by job-size class, all accounts together."""
    rows = waits.filter(pl.col("account") == "(all)").sort("size_class")
    if rows.is_empty():
        return None
    names = rows.get_column("size_class").to_list()
    p50 = [v / 3600 for v in rows.get_column("wait_p50_s").to_list()]
    p95 = [v / 3600 for v in rows.get_column("wait_p95_s").to_list()]
    fig, ax = plt.subplots(figsize=(7.2, 2.4))
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], p50, 0.4, label="p50", color=BLUE)
    ax.bar([x + 0.2 for x in xs], p95, 0.4, label="p95", color=RED)
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("hours in queue", fontsize=8, color=INK)
    ax.legend(fontsize=8, frameon=False)
    _style(ax, "Queue wait by job size")
    return _png(fig)


def _short(name: str | None, most: int = 24) -> str:
    """`name` as an axis label: at most `most` characters, the rest cut with "…"."""
    text = "-" if name is None else str(name)
    return text if len(text) <= most else text[: most - 1] + "…"


def chart_waste_trend(trend: pl.DataFrame) -> bytes | None:
    """Bars side by side per week: idle, low-efficiency, failed-job GPU-hours (4 weeks); a
    week without data has no bar and says so under its date. Not stacked: the categories
    overlap (a failed job's idle hours are in both), and a stack read as a total they do not
    have (3,708 GPU-hours of bar for a week whose waste was 2,981)."""
    if trend.is_empty() or not trend.get_column("alloc_gpu_h").sum():
        return None
    if all(v is None for v in trend.get_column("idle_gpu_h").to_list()):
        return None  # no week has GPU telemetry: no waste to show (unknown, not zero)
    labels = [
        d.strftime("%d %b")
        + ("\nno data" if not known else "\nno telemetry" if idle is None else "")
        for d, known, idle in zip(
            trend.get_column("week").to_list(),
            trend.get_column("has_data").to_list(),
            trend.get_column("idle_gpu_h").to_list(),
            strict=True,
        )
    ]
    fig, ax = plt.subplots(figsize=(7.2, 2.6))
    xs = range(len(labels))
    for offset, (column, label), color in zip(
        (-0.22, 0.0, 0.22),
        [
            ("idle_gpu_h", "idle"),
            ("low_eff_gpu_h", "low efficiency"),
            ("failed_gpu_h", "failed jobs"),
        ],
        [RED, ORANGE, "#7c3aed"],
        strict=True,
    ):
        values = [v or 0.0 for v in trend.get_column(column).to_list()]
        ax.bar([x + offset for x in xs], values, 0.22, label=label, color=color)
    ax.set_xticks(list(xs), labels)
    ax.set_ylabel("GPU-hours (categories overlap)", fontsize=8, color=INK)
    ax.legend(fontsize=8, frameon=False, ncols=3)
    _style(ax, "Waste, last 4 weeks (week starting)")
    return _png(fig)


def chart_cluster_frame(frame: pl.DataFrame) -> bytes | None:
    """One horizontal stacked bar: where the week's GPU capacity went."""
    if frame.is_empty() or not frame.get_column("reported_gpu_h")[0]:
        return None
    row = frame.row(0, named=True)
    parts = [
        ("active", row["active_gpu_h"], GREEN),
        ("idle allocated", row["idle_allocated_gpu_h"], RED),
        ("planned (jobs waiting)", row["planned_gpu_h"], ORANGE),
        ("idle", row["idle_gpu_h"], MUTED),
        ("unobserved", max(row["unobserved_gpu_h"], 0.0), "#d1d5db"),
    ]
    total = sum(v for _, v, _ in parts) or 1.0
    fig, ax = plt.subplots(figsize=(7.2, 1.3))
    left = 0.0
    for label, value, color in parts:
        share = value / total * 100
        ax.barh([0], [share], left=left, color=color, label=f"{label} {share:.0f}%")
        left += share
    ax.set_xlim(0, 100)
    ax.set_yticks([])
    ax.legend(fontsize=7, frameon=False, ncols=5, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    _style(ax, "GPU capacity this week")
    ax.grid(False)
    return _png(fig)
