"""Render a `WeeklyReport` as one self-contained HTML page (charts embedded, no external links).

Images are passed as a mapping name → `src`: `data:` URIs for the file, `cid:` references for
the email, so both come from the same template (templates/weekly.html.j2).
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from collections.abc import Mapping

import jinja2
import polars as pl

from app.glossary import WASTE_GPU_H
from app.report.charts import (
    chart_cluster_frame,
    chart_usage_vs_share,
    chart_waits,
    chart_waste_trend,
)
from app.report.data import WeeklyReport
from app.report.recs import evidence_figures, gain_text, pick
from detectors.wording import counted

__all__ = ["allocated_note", "data_uris", "render_charts", "render_html"]

MAX_USER_ROWS = 25
MAX_RECOMMENDATIONS = 12
FRAME_ROWS = (
    ("Allocated (telemetry observed)", "allocated_gpu_h", "Allocated"),
    ("… of which active (busy ≥ the idle line)", "active_gpu_h", "(no equivalent: telemetry)"),
    ("… of which idle while allocated", "idle_allocated_gpu_h", "(hidden inside Allocated)"),
    ("Unallocated while jobs waited", "planned_gpu_h", "Planned"),
    ("Unallocated, nothing waiting", "idle_gpu_h", "Idle"),
    ("Unobserved (down or no telemetry)", "unobserved_gpu_h", "Down + PlannedDown"),
    ("Total", "reported_gpu_h", "Reported"),
)


def _num(value: float | int | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float) and math.isinf(value):
        return "∞"
    return f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value * 100:.1f} %"


def _signed(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:+,.1f}"


def _money(value: float | None) -> str:
    return "–" if value is None else f"${value:,.0f}"


def _duration(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "–"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _ratio_class(value: float | None) -> str:
    if value is None or math.isnan(value):
        return ""
    return "over" if value > 2 else "under" if value < 0.5 else ""


def allocated_note(report: WeeklyReport) -> str | None:
    """One line saying which allocated figure is which, where the scheduler's (the headline,
    §1 and §4) and the telemetry's (the cluster frame, §6) differ as the report shows them.

    The dashboard words the same two figures alike: its Jobs page sums the scheduler's
    allocations, its Overview the allocated GPU-hours telemetry observed.
    """
    frame = report.tables["cluster_frame"]
    if not report.has_data or frame.is_empty() or not frame.get_column("buckets")[0]:
        return None  # no telemetry this week: the frame says so itself
    scheduler = float(report.scalars["alloc_gpu_h"])
    telemetry = float(frame.get_column("allocated_gpu_h")[0])
    if _num(scheduler) == _num(telemetry):
        return None
    both = (
        f"Two allocated figures: {_num(scheduler)} GPU-hours allocated by the scheduler "
        f"(its records: the headline, §1 and §4) and {_num(telemetry)} that telemetry observed "
        "(samples attributed to a job: this frame)."
    )
    if scheduler > telemetry:
        # the jobs' observed hours count a MIG instance as one of its job's GPUs, the frame as
        # its share of the GPU: what lies between is that, not allocated time unobserved
        observed = min(
            max(float(report.scalars.get("observed_gpu_h", telemetry)), telemetry), scheduler
        )
        parts = [
            f"allocated time no sample covered ({_num(scheduler - observed)} GPU-hours more)"
            if _num(scheduler - observed) != _num(0.0)
            else "",
            "each MIG instance as one of its job's GPUs, where this frame counts its share of "
            f"the GPU ({_num(observed - telemetry)} GPU-hours more)"
            if _num(observed - telemetry) != _num(0.0)
            else "",
        ]
        said = " and ".join(part for part in parts if part) or (
            f"allocated time no sample covered ({_num(scheduler - telemetry)} GPU-hours more)"
        )
        why = f" The scheduler's figure also counts {said}."
    else:
        why = (
            f" Telemetry saw {_num(telemetry - scheduler)} GPU-hours more: a sample stands for "
            "the time until the next one, which can outlast the allocation it belongs to."
        )
    return both + why


def render_charts(report: WeeklyReport) -> dict[str, bytes]:
    """PNG bytes of each chart that has something to draw, by name."""
    if not report.has_data:
        return {}
    t = report.tables
    charts = {
        "usage": chart_usage_vs_share(t["accounts"]),
        "waits": chart_waits(t["waits_by_size"]),
        "waste": chart_waste_trend(t["waste_trend"]),
        "frame": chart_cluster_frame(t["cluster_frame"]),
    }
    return {name: png for name, png in charts.items() if png is not None}


def data_uris(charts: Mapping[str, bytes]) -> dict[str, str]:
    """`data:image/png;base64,…` sources for each chart (the self-contained file)."""
    return {n: "data:image/png;base64," + base64.b64encode(p).decode() for n, p in charts.items()}


def _recommendations(report: WeeklyReport) -> tuple[list[dict[str, object]], int]:
    """The recommendations §7 shows, each with its gain and evidence in words; how many more."""
    rows, more = pick(report.tables["recommendations"], MAX_RECOMMENDATIONS)
    shown = [
        row
        | {
            "gain": gain_text(
                row["expected_gain_gpu_h"],
                row["gain_kind"],
                row["evidence_from"],
                row["evidence_until"],
            ),
            "figures": evidence_figures(row["kind"], row["evidence"]),
        }
        for row in rows
    ]
    return shown, more


def _top_users(users: pl.DataFrame) -> pl.DataFrame:
    """The users the page lists: those who held GPUs in the week, most GPU-hours first, at
    most MAX_USER_ROWS (users.csv has every user, by account). Listed by account, the first
    accounts' users filled the table (25 rows of users with no usage in a week of one job),
    and the accounts that used the most were left out."""
    used = users.filter(pl.col("alloc_gpu_h") > 0)
    return used.sort("alloc_gpu_h", "account", "user", descending=[True, False, False]).head(
        MAX_USER_ROWS
    )


def render_html(report: WeeklyReport, images: Mapping[str, str]) -> str:
    """The report page; `images` maps chart names to their `src` (absent charts are left out)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("app.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    template = env.get_template("weekly.html.j2")
    recs, more_recs = _recommendations(report)
    return template.render(
        r=report,
        t=report.tables,
        top_users=_top_users(report.tables["users"]),
        images={n: images.get(n) for n in ("usage", "waits", "waste", "frame")},
        one_day=dt.timedelta(days=1),
        max_rows=MAX_USER_ROWS,
        recs=recs,
        more_recs=more_recs,
        frame_rows=FRAME_ROWS,
        allocated_note=allocated_note(report),
        waste_definition=WASTE_GPU_H,
        num=_num,
        counted=counted,
        pct=_pct,
        signed=_signed,
        money=_money,
        duration=_duration,
        ratio_class=_ratio_class,
    )
