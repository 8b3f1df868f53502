"""Overview: where the cluster's GPU-hours went, at a glance, and the trend."""

import polars as pl
import streamlit as st

from app import charts, data, scope
from app.config import DASHBOARD_CURRENCY as CURRENCY
from app.config import dashboard_cost_per_gpu_hour
from app.downloads import show_table
from app.emissions_text import window_co2e_text
from app.markdown_text import md

s = scope.current()
st.title("GPU-hours at a glance")

window = data.window_summary(s.root, s.cluster, s.start, s.end)
if window.is_empty():
    if not s.telemetry:
        st.info(
            f"Cluster {s.cluster!r} has no GPU telemetry in the lake, only its scheduler's "
            "records: its jobs and what they were allocated are on the Jobs and Fairness "
            "pages. Collect its GPUs' samples (`gpuledger collect`) for occupancy and idle time."
        )
    else:
        st.info("No samples in this window: pick other dates in the sidebar.")
    st.stop()
w = window.row(0, named=True)
before_start, before_end = s.previous()
previous = data.window_summary(s.root, s.cluster, before_start, before_end)
p = previous.row(0, named=True) if not previous.is_empty() else None


# sums are compared over the same hours of data: the window before may hold fewer (the data
# begin inside it), and its sums are scaled to this window's (a 3-day week before a 7-day one
# showed idle GPU-hours up where their rate fell). The hours are each window's own, from its
# first sample to its last: taken from the data's first and last anywhere, a window after a
# gap in the telemetry counted the gap as data, and the one before was scaled 3.5 times.
now_h, before_h = w["hours"], (p["hours"] if p else None)
same_hours = now_h / before_h if now_h and before_h else None
if same_hours is None:
    p = None
# (hours equal to the second: each window's first sample to its last, whole days alike)
same = same_hours is None or abs(same_hours - 1.0) < 1e-6
scaled = "" if same else ", their sums scaled to this window's hours of data"
trends = (
    f"trends against the {s.days:.0f} day(s) before{scaled}"
    if p is not None
    else f"no trends: the {s.days:.0f} day(s) before hold no data"
)
st.caption(
    f"Cluster **{md(s.cluster)}**, {s.start:%Y-%m-%d} to {s.end:%Y-%m-%d} (UTC, end excluded); "
    f"{trends}."
)

default_rate = dashboard_cost_per_gpu_hour()  # a bad value already stopped the page (scope)
rate = st.sidebar.number_input(
    f"Cost per GPU-hour ({CURRENCY})",
    min_value=0.0,
    value=default_rate,
    step=0.25,
    format="%.2f",
    key="overview_cost_per_gpu_h",
    help="Used for the cost figures (default from $GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR).",
)


def kwh_digits(kwh: float | None) -> int:
    """Decimals for kWh: none from 100, one from 10, else two (a small cluster's day, 0.36 kWh,
    read 0)."""
    kwh = abs(kwh or 0.0)
    return 0 if kwh >= 100 else 1 if kwh >= 10 else 2


def _delta(key: str, scale: float = 1.0, fmt: str = "{:+,.0f}", summed: bool = True) -> str | None:
    if p is None or p[key] is None or w[key] is None or same_hours is None:
        return None
    before = p[key] * same_hours if summed else p[key]
    return fmt.format(scale * (w[key] - before))


efficiency = w["effective_gpu_h"] / w["allocated_gpu_h"] if w["allocated_gpu_h"] else 0.0
p_eff = p["effective_gpu_h"] / p["allocated_gpu_h"] if p and p["allocated_gpu_h"] else None
c1, c2, c3, c4, c5 = st.columns(5)
c1.metric(
    "Occupancy",
    f"{100 * (w['occupancy'] or 0):.1f} %",
    _delta("occupancy", 100, "{:+.1f} pts", summed=False),
    help="Allocated GPU-hours telemetry observed (samples attributed to a job) / (GPUs × "
    "hours of data in the window). The Jobs page sums the scheduler's allocations instead, "
    "which also count allocated time no sample covered.",
)
c2.metric(
    "Idle GPU-h",
    f"{w['idle_allocated_gpu_h']:,.0f}",
    _delta("idle_allocated_gpu_h"),
    delta_color="inverse",
    help="GPU-hours idle while allocated to a job. "
    f"Allocated samples with busy < 1 %: {100 * (w['idle_share_of_allocated'] or 0):.1f} % "
    "of allocated GPU-hours",
)
c3.metric(
    "Effective utilisation",
    f"{100 * efficiency:.1f} %",
    None if p_eff is None else f"{100 * (efficiency - p_eff):+.1f} pts",
    help="Σ busy × time / allocated GPU-hours: how much of what was held did work",
)
c4.metric(
    "Energy kWh",
    "—" if w["energy_kwh"] is None else f"{w['energy_kwh']:,.{kwh_digits(w['energy_kwh'])}f}",
    _delta("energy_kwh", fmt=f"{{:+,.{kwh_digits(w['energy_kwh'])}f}}"),
    delta_color="off",
    help="Energy the GPUs drew in the window (kWh); — where no sample carried power",
)
c5.metric(
    "Cost of idle GPUs",
    f"{CURRENCY}{rate * w['idle_allocated_gpu_h']:,.0f}",
    _delta("idle_allocated_gpu_h", rate),
    delta_color="inverse",
    help=f"Idle allocated GPU-hours × {CURRENCY}{rate:.2f}; all allocated GPU-hours cost "
    f"{CURRENCY}{rate * w['allocated_gpu_h']:,.0f}",
)
co2e = data.window_co2e(s.root, s.cluster, s.start, s.end).row(0, named=True)
st.caption(md(window_co2e_text(co2e)))
st.caption(
    f"{w['gpus_total']:.0f} GPUs, {w['jobs']:,} jobs with samples in the window; "
    f"data from {s.data_start:%Y-%m-%d %H:%M} to {s.data_end:%Y-%m-%d %H:%M} UTC (last bucket)."
)

st.subheader("GPUs by state")
series = data.occupancy_series(s.root, s.cluster, s.start, s.end)
if series.is_empty():
    st.info("No occupancy data in this window.")
else:
    st.altair_chart(charts.gpu_state_area(series), width="stretch")

viewer = s.viewer.user_filter
left, right = st.columns(2)
with left:
    st.subheader("Top users by idle GPU-hours")
    users = data.user_leaderboard(s.root, s.cluster, s.start, s.end, viewer)
    top_users = users.sort("idle_gpu_h", descending=True, nulls_last=True).head(10)
    show_table(
        top_users.select("user", "account", "jobs", "alloc_gpu_h", "idle_gpu_h", "idle_share"),
        "top_users_by_idle",
        "overview_users",
    )
with right:
    st.subheader("Top jobs by idle GPU-hours")
    # (each job's whole run, as on the Jobs page: a job across the dates' edges counts its
    # hours outside them too, so these rows may add up to more than the idle GPU-h above)
    st.caption("Jobs that ran in these dates, with the figures of their whole runs.")
    jobs = data.job_table(s.root, s.cluster, s.start, s.end, viewer, limit=10)
    show_table(
        # as a percentage, so every row shows one decimal ("percent" drops trailing zeros:
        # 3.9%, 8.68%, 0%); the downloads say so in the column's name
        jobs.select(
            "job_id",
            "user",
            "gpus",
            "alloc_gpu_h",
            "idle_gpu_h",
            (pl.col("busy_mean") * 100).alias("busy_pct"),
        ),
        "top_jobs_by_idle",
        "overview_jobs",
        # narrow, so the table fits half the page and the header reads "busy", not "bus…"
        # (at 1400 px, with the job's state too, the busy column was cut to "7", "26": the
        # state is on the Jobs page)
        column_config={
            "job_id": st.column_config.TextColumn("job", pinned=True, width="small"),
            "gpus": st.column_config.NumberColumn("GPUs", format="%d", width="small"),
            "busy_pct": st.column_config.ProgressColumn(
                "busy", format="%.1f%%", min_value=0.0, max_value=100.0, width="small"
            ),
        },
    )
