"""Altair charts of the dashboard, built from the frames app.data returns.

Charts carry their units in axis titles and name their series next to the marks (legend on
top, few colours, the same colour for the same state everywhere), so nobody hunts for a legend.
"""

from __future__ import annotations

from typing import Literal

import altair as alt
import polars as pl

__all__ = [
    "STATE_COLOURS",
    "TIMELINE_LINES_MAX",
    "TIMELINE_WORST",
    "TimelineChart",
    "efficiency_bars",
    "event_bars",
    "finding_bars",
    "gain_bars",
    "gpu_state_area",
    "jain_line",
    "job_gpu_timelines",
    "job_waste_scatter",
    "share_vs_entitlement",
    "timeline_worst_gpus",
    "usage_bars",
    "user_daily_bars",
    "utc_tip",
    "utc_x",
    "wait_bars",
]

# GPU states, in stacking order, and their colours (green = work, amber = waste, greys = spare)
GPU_STATES = ["active", "idle_allocated", "unallocated", "unobserved"]
STATE_LABELS = {
    "active": "allocated, active",
    "idle_allocated": "allocated, idle",
    "unallocated": "unallocated",
    "unobserved": "down / no data",
}
STATE_COLOURS = ["#2e7d32", "#f9a825", "#90a4ae", "#d7ccc8"]
SEVERITY_COLOURS = {"critical": "#c62828", "warn": "#f9a825", "info": "#1565c0"}
_TOP = alt.Legend(orient="top", title=None)


# A tick's label: the day at midnight, else the 24-hour time, with seconds where a tick has
# them (a job of minutes) (Vega's default mixes "06:30" in 12-hour time with "07 PM": 18:30
# read as the morning)
UTC_TICK_LABEL = (
    "utcFormat(datum.value, utcseconds(datum.value) != 0 ? '%H:%M:%S' : "
    "utchours(datum.value) == 0 && utcminutes(datum.value) == 0 ? '%b %d' : '%H:%M')"
)


def utc_x(field: str, title: str | None = "time (UTC)") -> alt.X:
    """A time axis drawn in UTC: without a UTC scale Vega-Lite draws times in the browser's
    zone, so a manager in New York read every spike 5 hours off under "time (UTC)"."""
    return alt.X(
        f"{field}:T",
        title=title,
        scale=alt.Scale(type="utc"),
        axis=alt.Axis(labelExpr=UTC_TICK_LABEL),
    )


def utc_tip(
    field: str,
    unit: Literal[
        "utcyearmonthdatehoursminutes", "utcyearmonthdate"
    ] = "utcyearmonthdatehoursminutes",
) -> alt.Tooltip:
    """A tooltip of a time (or, with `unit` utcyearmonthdate, a day) in UTC, not the
    browser's zone (where a day's midnight showed as the day before)."""
    return alt.Tooltip(f"{field}:T", timeUnit=unit, title=f"{field} (UTC)")


def gpu_state_area(series: pl.DataFrame) -> alt.Chart:
    """GPUs by state over time, stacked: allocated-active, allocated-idle, unallocated, down."""
    long = series.unpivot(
        index="bucket", on=GPU_STATES, variable_name="state", value_name="gpus"
    ).with_columns(pl.col("state").replace_strict(STATE_LABELS).alias("state"))
    labels = [STATE_LABELS[s] for s in GPU_STATES]
    chart: alt.Chart = (
        alt.Chart(long)
        .mark_area(interpolate="step-after")
        .encode(
            x=utc_x("bucket"),
            y=alt.Y("gpus:Q", stack=True, title="GPUs"),
            color=alt.Color(
                "state:N",
                sort=labels,
                scale=alt.Scale(domain=labels, range=STATE_COLOURS),
                legend=_TOP,
            ),
            order=alt.Order("state_order:Q"),
            tooltip=[utc_tip("bucket"), "state:N", alt.Tooltip("gpus:Q", format=".1f")],
        )
        .transform_calculate(state_order=f"indexof({labels!r}, datum.state)")
        .properties(height=380)
    )
    return chart


def usage_bars(frame: pl.DataFrame, who: str, top: int = 15) -> alt.Chart:
    """Horizontal bars of GPU-hours per `who` (user or account), the first `top` rows of
    `frame` in its order: used and idle while allocated, and the allocated hours no telemetry
    saw (`alloc_gpu_h`, `observed_gpu_h`, `idle_gpu_h`; an idle unknown is none seen)."""
    ranked = frame.head(top)
    observed = pl.col("observed_gpu_h").fill_null(0.0)
    idle = pl.col("idle_gpu_h").fill_null(0.0)
    parts = ["used while allocated", "allocated, idle", "allocated, no telemetry"]
    long = ranked.select(
        pl.col(who).alias("who"),
        (observed - idle).clip(lower_bound=0.0).alias(parts[0]),
        idle.alias(parts[1]),
        (pl.col("alloc_gpu_h").fill_null(0.0) - observed).clip(lower_bound=0.0).alias(parts[2]),
    ).unpivot(index="who", variable_name="part", value_name="gpu_h")
    chart: alt.Chart = (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("who:N", sort=ranked.get_column(who).to_list(), title=None),
            x=alt.X("gpu_h:Q", stack=True, title="GPU-hours"),
            color=alt.Color(
                "part:N",
                sort=parts,
                scale=alt.Scale(domain=parts, range=[*STATE_COLOURS[:2], STATE_COLOURS[3]]),
                legend=_TOP,
            ),
            order=alt.Order("part_order:Q"),
            tooltip=["who:N", "part:N", alt.Tooltip("gpu_h:Q", format=",.1f")],
        )
        .transform_calculate(part_order=f"indexof({parts!r}, datum.part)")
        .properties(height=alt.Step(24))
    )
    return chart


def efficiency_bars(histogram: pl.DataFrame) -> alt.Chart:
    """Allocated GPU-hours by job efficiency band (busy): where the hours were well spent."""
    chart: alt.Chart = (
        alt.Chart(histogram)
        .mark_bar(color="#1565c0")
        .encode(
            x=alt.X(
                "band:N",
                sort=histogram.get_column("band").to_list(),
                title="job efficiency (mean busy)",
            ),
            y=alt.Y("alloc_gpu_h:Q", title="allocated GPU-hours"),
            tooltip=["band:N", "jobs:Q", alt.Tooltip("alloc_gpu_h:Q", format=",.1f")],
        )
        .properties(height=330)
    )
    return chart


def user_daily_bars(daily: pl.DataFrame) -> alt.Chart:
    """One user's GPU-hours per day: active, idle and allocated-but-unseen."""
    parts = {"active_gpu_h": "active", "idle_gpu_h": "idle", "unobserved_gpu_h": "no data"}
    long = (
        daily.select("date", *parts)
        .unpivot(index="date", variable_name="part", value_name="gpu_h")
        .with_columns(pl.col("part").replace_strict(parts))
    )
    labels = list(parts.values())
    chart: alt.Chart = (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("utcmonthdate(date):O", title="day (UTC)", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("gpu_h:Q", stack=True, title="GPU-hours"),
            color=alt.Color(
                "part:N",
                sort=labels,
                scale=alt.Scale(
                    domain=labels, range=[STATE_COLOURS[0], STATE_COLOURS[1], STATE_COLOURS[3]]
                ),
                legend=_TOP,
            ),
            tooltip=[
                utc_tip("date", "utcyearmonthdate"),
                "part:N",
                alt.Tooltip("gpu_h:Q", format=",.1f"),
            ],
        )
        .properties(height=300)
    )
    return chart


_TIMELINE_METRICS = {
    "busy": "busy (%)",
    "sm_active": "SM active (%)",
    "tensor_active": "tensor active (%)",
    "fb_used_gib": "memory used (GiB)",
    "power_w": "power (W)",
}


# Up to this many GPUs a job's charts draw one line per GPU; above it, the spread across the GPUs
# (a min-max band and the median) and the few GPUs that did least, so legends stay short.
TIMELINE_LINES_MAX = 8
TIMELINE_WORST = 3
_SPREAD_COLOURS = ["#b0bec5", "#263238", "#c62828", "#ef6c00", "#6a1b9a"]

TimelineChart = alt.Chart | alt.LayerChart


def timeline_worst_gpus(timeline: pl.DataFrame, count: int = TIMELINE_WORST) -> list[str]:
    """The `count` GPUs of the job with the lowest mean busy (then by name): the ones a big
    job's charts draw on their own."""
    ranked = (
        timeline.group_by("gpu")
        .agg(pl.col("busy").mean().alias("busy"))
        .sort(["busy", "gpu"], nulls_last=True)
    )
    return [str(g) for g in ranked.get_column("gpu").head(count).to_list()]


def _timeline_y(field: str, column: str, title: str) -> alt.Y:
    """The y axis of `column`'s chart (a fraction 0-1 shown in %, or GiB or W) on `field`."""
    fraction = column != "fb_used_gib" and column != "power_w"
    return alt.Y(
        f"{field}:Q",
        title=title,
        scale=alt.Scale(domain=[0, 1]) if fraction else alt.Undefined,
        axis=alt.Axis(format="%", titleLimit=0) if fraction else alt.Axis(titleLimit=0),
    )


def _per_gpu_lines(timeline: pl.DataFrame, column: str, title: str) -> alt.Chart:
    gpus = timeline.get_column("gpu").unique().sort().to_list()
    chart: alt.Chart = (
        alt.Chart(timeline.select("gpu", "bucket", column))
        .mark_line(interpolate="step-after", strokeWidth=1.5)
        .encode(
            x=utc_x("bucket"),
            y=_timeline_y(column, column, title),
            color=alt.Color(
                "gpu:N",
                sort=gpus,
                title="GPU (node:index)",
                legend=alt.Legend(orient="top", columns=4) if len(gpus) > 1 else None,
            ),
            tooltip=["gpu:N", utc_tip("bucket"), alt.Tooltip(f"{column}:Q", format=".2f")],
        )
        .properties(height=220)
    )
    return chart


def _spread(timeline: pl.DataFrame, column: str, title: str, worst: list[str]) -> alt.LayerChart:
    """Many GPUs: a band from the lowest to the highest GPU per bucket, the median GPU as a
    line, and the `worst` GPUs as lines of their own; a legend of at most len(worst) + 2."""
    gpus = timeline.get_column("gpu").n_unique()
    band_label, median_label = f"min–max of {gpus} GPUs", "median GPU"
    labels = [band_label, median_label, *worst]
    colour = alt.Color(
        "series:N",
        sort=labels,
        scale=alt.Scale(domain=labels, range=_SPREAD_COLOURS[: len(labels)]),
        legend=alt.Legend(orient="top", title=None, columns=3, labelLimit=260),
    )
    fmt = ".2f"
    band = (
        timeline.group_by("bucket")
        .agg(
            pl.col(column).min().alias("low"),
            pl.col(column).median().alias("median"),
            pl.col(column).max().alias("high"),
        )
        .sort("bucket")
    )
    area = (
        alt.Chart(band.with_columns(pl.lit(band_label).alias("series")))
        .mark_area(interpolate="step-after", opacity=0.45)
        .encode(
            x=utc_x("bucket"),
            y=_timeline_y("low", column, title),
            y2=alt.Y2("high:Q"),
            color=colour,
            tooltip=[
                utc_tip("bucket"),
                alt.Tooltip("low:Q", format=fmt, title="lowest GPU"),
                alt.Tooltip("median:Q", format=fmt, title="median GPU"),
                alt.Tooltip("high:Q", format=fmt, title="highest GPU"),
            ],
        )
    )
    lines = pl.concat(
        [
            band.select(
                pl.lit(median_label).alias("series"), "bucket", pl.col("median").alias("value")
            ),
            timeline.filter(pl.col("gpu").is_in(worst)).select(
                pl.col("gpu").alias("series"), "bucket", pl.col(column).alias("value")
            ),
        ],
        how="vertical_relaxed",
    )
    line = (
        alt.Chart(lines)
        .mark_line(interpolate="step-after", strokeWidth=1.5)
        .encode(
            x=utc_x("bucket"),
            y=_timeline_y("value", column, title),
            color=colour,
            tooltip=[
                "series:N",
                utc_tip("bucket"),
                alt.Tooltip("value:Q", format=fmt, title=title),
            ],
        )
    )
    chart: alt.LayerChart = (area + line).properties(height=220)
    return chart


def job_gpu_timelines(timeline: pl.DataFrame) -> dict[str, TimelineChart | None]:
    """Busy, SM, tensor, memory and power over the job: one chart per metric, keyed by its
    title; None for a metric no GPU of the job reported (an exporter without profiling).

    Up to TIMELINE_LINES_MAX GPUs, one line per GPU; above, a min-max band across the GPUs,
    their median, and the TIMELINE_WORST GPUs with the lowest mean busy (timeline_worst_gpus),
    the same GPUs in every chart."""
    many = timeline.get_column("gpu").n_unique() > TIMELINE_LINES_MAX
    worst = timeline_worst_gpus(timeline) if many else []
    charts: dict[str, TimelineChart | None] = {}
    for column, title in _TIMELINE_METRICS.items():
        if timeline.get_column(column).is_null().all():
            charts[title] = None
        elif many:
            charts[title] = _spread(timeline, column, title, worst)
        else:
            charts[title] = _per_gpu_lines(timeline, column, title)
    return charts


def share_vs_entitlement(week: pl.DataFrame) -> alt.LayerChart:
    """Each account's usage share (bar) against its entitled share (tick), one week."""
    ordered = week.sort("entitled_share", descending=True).get_column("account").to_list()
    base = alt.Chart(week).encode(y=alt.Y("account:N", sort=ordered, title=None))
    bars = base.mark_bar(color="#1565c0").encode(
        x=alt.X("usage_share:Q", axis=alt.Axis(format="%"), title="share of the cluster's use"),
        tooltip=[
            "account:N",
            alt.Tooltip("usage_share:Q", format=".1%", title="used"),
            alt.Tooltip("entitled_share:Q", format=".1%", title="entitled"),
            alt.Tooltip("usage_ratio:Q", format=".2f", title="used / entitled"),
        ],
    )
    ticks = base.mark_tick(color="#c62828", thickness=3, size=18).encode(x="entitled_share:Q")
    chart: alt.LayerChart = (bars + ticks).properties(height=alt.Step(26))
    return chart


def jain_line(jain: pl.DataFrame) -> alt.Chart:
    """Jain's fairness index over accounts per week (1 = shares exactly as entitled)."""
    chart: alt.Chart = (
        alt.Chart(jain)
        .mark_line(point=True, color="#6a1b9a")
        .encode(
            x=alt.X("week:T", timeUnit="utcyearmonthdate", title="week starting (UTC)"),
            y=alt.Y("jain_index:Q", scale=alt.Scale(domain=[0, 1]), title="Jain's index"),
            tooltip=[
                utc_tip("week", "utcyearmonthdate"),
                alt.Tooltip("jain_index:Q", format=".3f"),
                "accounts:Q",
                alt.Tooltip("max_min_ratio:Q", format=".1f", title="max/min used ÷ entitled"),
            ],
        )
        .properties(height=260)
    )
    return chart


def event_bars(daily: pl.DataFrame) -> alt.Chart:
    """Hardware events per day, stacked by kind."""
    chart: alt.Chart = (
        alt.Chart(daily)
        .mark_bar()
        .encode(
            x=alt.X("utcmonthdate(day):O", title="day (UTC)", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("events:Q", stack=True, title="events"),
            color=alt.Color("kind:N", legend=_TOP, scale=alt.Scale(scheme="tableau10")),
            tooltip=[
                utc_tip("day", "utcyearmonthdate"),
                "kind:N",
                "events:Q",
                alt.Tooltip("gpus:Q", title="GPUs"),
            ],
        )
        .properties(height=300)
    )
    return chart


def finding_bars(feed: pl.DataFrame) -> alt.Chart:
    """Findings per detector, stacked by severity."""
    counts = feed.group_by("detector", "severity").agg(
        pl.len().alias("findings"), pl.col("gpu_h_at_stake").sum().alias("gpu_h_at_stake")
    )
    severities = [s for s in SEVERITY_COLOURS if s in set(counts.get_column("severity"))]
    chart: alt.Chart = (
        alt.Chart(counts)
        .mark_bar()
        .encode(
            y=alt.Y("detector:N", sort="-x", title=None, axis=alt.Axis(labelLimit=320)),
            x=alt.X("findings:Q", stack=True, title="findings"),
            color=alt.Color(
                "severity:N",
                sort=severities,
                scale=alt.Scale(domain=severities, range=[SEVERITY_COLOURS[s] for s in severities]),
                legend=_TOP,
            ),
            tooltip=[
                "detector:N",
                "severity:N",
                "findings:Q",
                alt.Tooltip("gpu_h_at_stake:Q", format=",.1f", title="GPU-h at stake"),
            ],
        )
        .properties(height=alt.Step(28))
    )
    return chart


def gain_bars(recs: pl.DataFrame) -> alt.Chart:
    """Expected GPU-hours recovered per recommendation."""
    chart: alt.Chart = (
        alt.Chart(recs)
        .mark_bar(color="#2e7d32")
        .encode(
            y=alt.Y("rec_label:N", sort="-x", title=None, axis=alt.Axis(labelLimit=320)),
            # (~: no trailing zeros: a chart of one 0 gain read 0.000000)
            x=alt.X(
                "expected_gain_gpu_h:Q",
                title="expected gain (GPU-hours)",
                axis=alt.Axis(format=",~f"),
            ),
            tooltip=["kind:N", "scope:N", alt.Tooltip("expected_gain_gpu_h:Q", format=",.1f")],
        )
        .transform_calculate(rec_label="datum.kind + ' · ' + (datum.scope || '')")
        .properties(height=alt.Step(28))
    )
    return chart


def job_waste_scatter(jobs: pl.DataFrame) -> alt.Chart:
    """Jobs by size (allocated GPU-hours) against efficiency: the waste is bottom right."""
    chart: alt.Chart = (
        alt.Chart(jobs.filter(pl.col("alloc_gpu_h") > 0))
        .mark_circle(opacity=0.7)
        .encode(
            x=alt.X("alloc_gpu_h:Q", scale=alt.Scale(type="log"), title="allocated GPU-hours"),
            y=alt.Y(
                "busy_mean:Q",
                scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%"),
                title="mean busy",
            ),
            size=alt.Size("idle_gpu_h:Q", legend=alt.Legend(orient="top", title="idle GPU-hours")),
            color=alt.Color("state:N", legend=_TOP, scale=alt.Scale(scheme="tableau10")),
            tooltip=[
                "job_id:N",
                "user:N",
                "state:N",
                alt.Tooltip("alloc_gpu_h:Q", format=",.1f"),
                alt.Tooltip("idle_gpu_h:Q", format=",.1f"),
                alt.Tooltip("busy_mean:Q", format=".0%"),
            ],
        )
        .properties(height=340)
    )
    return chart


def wait_bars(week: pl.DataFrame) -> alt.LayerChart:
    """Queue waits per account in one week: p95 as the bar, the median as a dark tick."""
    ordered = week.sort("wait_p95_h", descending=True, nulls_last=True).get_column("account")
    base = alt.Chart(week).encode(y=alt.Y("account:N", sort=ordered.to_list(), title=None))
    bars = base.mark_bar(color="#90a4ae").encode(
        x=alt.X("wait_p95_h:Q", title="wait before start (hours): bar p95, tick median"),
        tooltip=[
            "account:N",
            alt.Tooltip("wait_p50_h:Q", format=".1f", title="median h"),
            alt.Tooltip("wait_p95_h:Q", format=".1f", title="p95 h"),
        ],
    )
    ticks = base.mark_tick(color="#263238", thickness=3, size=18).encode(x="wait_p50_h:Q")
    chart: alt.LayerChart = (bars + ticks).properties(height=alt.Step(26))
    return chart
