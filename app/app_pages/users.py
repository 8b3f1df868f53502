"""Users & accounts: who used the GPU-hours, who wasted them, and one user in detail."""

import polars as pl
import streamlit as st

from app import charts, data, scope
from app.downloads import show_table
from app.markdown_text import md

s = scope.current()
st.title("Users & accounts")
viewer = s.viewer.user_filter

accounts = data.account_leaderboard(s.root, s.cluster, s.start, s.end, viewer)
if accounts.is_empty():
    st.info("No jobs in this window.")
    st.stop()

left, right = st.columns(2)
with left:
    st.subheader("GPU-hours by account")
    st.altair_chart(charts.usage_bars(accounts, "account"), width="stretch")
with right:
    st.subheader("GPU-hours by job efficiency")
    histogram = data.efficiency_histogram(s.root, s.cluster, s.start, s.end, viewer)
    if histogram.is_empty():
        st.info("No job was observed in this window.")
    else:
        st.altair_chart(charts.efficiency_bars(histogram), width="stretch")
        st.caption(
            "Each job that ran in the window counts with its whole run's allocated GPU-hours "
            "(also those before or after the window: its efficiency is of the whole run), in "
            "the band of its mean busy; the bars can add up to more than the window held."
        )

show_table(
    accounts,
    "accounts",
    "users_accounts",
)

st.subheader("Users")
search = st.text_input(
    "Search users",
    key="users_search",
    placeholder="user or account",
    help="Case-insensitive; matches any part of the user or account name.",
)
users = data.user_leaderboard(s.root, s.cluster, s.start, s.end, viewer, search)
if users.is_empty():
    st.info(f"No match for {md(repr(search))}." if search else "No users in this window.")
    st.stop()
rank_by = st.segmented_control(
    "Rank by",
    ["GPU-hours", "Idle GPU-hours", "Lowest efficiency"],
    default="GPU-hours",
    key="users_rank_by",
)
ranked = {
    "Idle GPU-hours": users.sort("idle_gpu_h", descending=True, nulls_last=True),
    "Lowest efficiency": users.sort("efficiency", nulls_last=True),
}.get(str(rank_by), users)
# the chart: one bar per user, the accounts they ran under summed (the table keeps a row per
# user and account), in the order picked
hours = ("alloc_gpu_h", "observed_gpu_h", "idle_gpu_h", "effective_gpu_h")
per_user = (
    users.group_by("user")
    .agg(pl.col(hours).sum())
    .with_columns(
        pl.when(pl.col("observed_gpu_h") > 0).then(pl.col("idle_gpu_h")).alias("idle_gpu_h"),
        (pl.col("effective_gpu_h") / pl.col("observed_gpu_h")).fill_nan(None).alias("efficiency"),
    )
)
chart_order = {
    "Idle GPU-hours": (["idle_gpu_h", "user"], [True, False]),
    "Lowest efficiency": (["efficiency", "user"], [False, False]),
}.get(str(rank_by), (["alloc_gpu_h", "user"], [True, False]))
st.altair_chart(
    charts.usage_bars(
        per_user.sort(chart_order[0], descending=chart_order[1], nulls_last=True), "user"
    ),
    width="stretch",
)
show_table(
    ranked,
    "users",
    "users_users",
)

st.subheader("Drill down")
names = ranked.get_column("user").unique(maintain_order=True).to_list()
who = st.selectbox("User", names, key="users_drill_user")
if who:
    daily = data.user_daily_usage(s.root, s.cluster, who, s.start, s.end)
    if not daily.is_empty():
        st.altair_chart(charts.user_daily_bars(daily), width="stretch")
    jobs = data.job_table(s.root, s.cluster, s.start, s.end, viewer, users=(who,))
    show_table(
        jobs.select(
            "job_id",
            "job_name",
            "state",
            "gpus",
            "start_ts",
            "runtime_h",
            "alloc_gpu_h",
            "idle_gpu_h",
            "busy_mean",
        ),
        f"jobs_of_{who}",
        "users_drill_jobs",
    )
