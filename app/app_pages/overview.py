"""Overview: where the cluster's GPU-hours went, at a glance."""

import datetime as dt

import altair as alt
import polars as pl
import streamlit as st

from app import data
from warehouse.errors import WarehouseError

st.title("GPU-hours at a glance")

root = data.lake()
try:
    summary = data.summary(root)
except WarehouseError as exc:
    st.error(str(exc))
    st.stop()
if summary.is_empty():
    st.info("The lake has no samples yet. Run `gpuledger simulate` or a collector first.")
    st.stop()

clusters = data.clusters(root)
cluster = st.selectbox("Cluster", clusters, key="overview_cluster")
row = summary.filter(pl.col("cluster") == cluster).row(0, named=True)
first: dt.date = row["data_start"].date()
last: dt.date = row["data_end"].date()
picked = st.date_input(
    "Dates (UTC)", value=(first, last), min_value=first, max_value=last, key="overview_dates"
)
start_day, end_day = picked if isinstance(picked, tuple) and len(picked) == 2 else (first, last)
start = dt.datetime.combine(start_day, dt.time(), tzinfo=dt.UTC)
end = dt.datetime.combine(end_day + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)

window = data.window_summary(root, cluster, start, end)
if window.is_empty():
    st.info("No samples in this window.")
    st.stop()
w = window.row(0, named=True)
c1, c2, c3, c4 = st.columns(4)
c1.metric(
    "Occupancy",
    f"{100 * (w['occupancy'] or 0):.1f} %",
    help="Allocated GPU-hours / (GPUs × hours of data in the window)",
)
c2.metric(
    "Idle while allocated",
    f"{w['idle_allocated_gpu_h']:,.0f} GPU-h",
    help=f"Allocated samples with busy < 1 %: {100 * (w['idle_share_of_allocated'] or 0):.1f} % "
    "of allocated GPU-hours",
)
c3.metric(
    "Effective GPU-hours",
    f"{w['effective_gpu_h']:,.0f}",
    help="Σ busy × time: how many GPUs' worth of work was done",
)
c4.metric("Energy", f"{w['energy_kwh'] or 0:,.0f} kWh")
st.caption(
    f"{w['gpus_total']:.0f} GPUs, {w['jobs']:,} jobs with samples in the window; "
    f"the lake holds {row['data_start']:%Y-%m-%d %H:%M} to {row['data_end']:%Y-%m-%d %H:%M} UTC."
)

st.subheader("GPUs by state")
series = data.occupancy_series(root, cluster, start, end)
if series.is_empty():
    st.info("No occupancy data in this window.")
else:
    states = ["active", "idle_allocated", "unallocated", "unobserved"]
    long = series.unpivot(index="bucket", on=states, variable_name="state", value_name="gpus")
    chart = (
        alt.Chart(long)
        .mark_area()
        .encode(
            x=alt.X("bucket:T", title=None),
            y=alt.Y("gpus:Q", stack=True, title="GPUs"),
            color=alt.Color(
                "state:N",
                sort=states,
                scale=alt.Scale(domain=states, range=["#2e7d32", "#f9a825", "#90a4ae", "#e0e0e0"]),
                legend=alt.Legend(orient="top", title=None),
            ),
            order=alt.Order("state_order:Q"),
            tooltip=["bucket:T", "state:N", alt.Tooltip("gpus:Q", format=".1f")],
        )
        .transform_calculate(state_order=f"indexof({states!r}, datum.state)")
    )
    st.altair_chart(chart, width="stretch")

hours = st.column_config.NumberColumn(format="%.1f")
share = st.column_config.ProgressColumn(format="percent", min_value=0.0, max_value=1.0)
left, right = st.columns(2)
with left:
    st.subheader("Top users by idle GPU-hours")
    st.dataframe(
        data.top_users(root, cluster, start, end, 10).drop("cluster"),
        hide_index=True,
        column_config={
            "alloc_gpu_h": hours,
            "idle_gpu_h": hours,
            "idle_share": share,
            "busy_mean": share,
            "energy_kwh": hours,
        },
    )
with right:
    st.subheader("Top jobs by idle GPU-hours")
    st.dataframe(
        data.top_jobs(root, cluster, start, end, 10).drop("cluster"),
        hide_index=True,
        column_config={"alloc_gpu_h": hours, "idle_gpu_h": hours, "busy_mean": share},
    )
