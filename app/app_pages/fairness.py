"""Fairness: each account's share of use against its entitlement, waits, and Jain's index."""

import polars as pl
import streamlit as st

from app import charts, data, scope
from app.downloads import show_table

s = scope.current()
st.title("Fairness")
if not data.has_fairness(s.root):
    st.info(
        "No fairness data yet: the weekly fairness mart (`fairness_weekly`) is not in this "
        "lake. It is built with the weekly report (`gpuledger report weekly`)."
    )
    st.stop()
try:
    shares = data.fairness_shares(s.root, s.cluster, s.start, s.end, s.viewer.user_filter)
    jain = data.fairness_jain_weekly(s.root, s.cluster, s.start, s.end)
except data.FairnessUnavailable as exc:
    st.error(str(exc))
    st.stop()
if shares.is_empty():
    st.info("No fairness data yet for this cluster and these weeks.")
    st.stop()

accounts = shares.filter(pl.col("user").is_null())
weeks = accounts.get_column("week").unique().sort(descending=True).to_list()
week = st.selectbox(
    "Week", weeks, key="fairness_week", format_func=lambda d: f"week of {d:%Y-%m-%d}"
)
this_week = accounts.filter(pl.col("week") == week)
left, right = st.columns([3, 2])
with left:
    st.subheader("Used vs entitled share")
    if this_week.is_empty():
        st.info("No account rows for this week.")
    else:
        st.altair_chart(charts.share_vs_entitlement(this_week), width="stretch")
        if this_week.get_column("entitled_share").is_not_null().any():
            st.caption("Bars: share of the cluster's GPU-hours used; red ticks: entitled share.")
        else:
            st.caption(
                "Bars: share of the cluster's GPU-hours used. No account has an entitlement "
                "this week, so there is nothing to compare them with."
            )
with right:
    st.subheader("Jain's index over time")
    if jain.is_empty():
        st.info(
            "No account has an entitlement in these weeks: no Slurm associations are in the "
            "lake. Collect them with `gpuledger collect slurm-shares`; until then "
            "`gpuledger report weekly` compares accounts against equal shares."
        )
    else:
        st.altair_chart(charts.jain_line(jain), width="stretch")
        st.caption(
            "Over every account with an entitlement, used or not: 1 = each used in proportion "
            "to its entitlement; 1/n = one took all. The weekly report's index counts only the "
            "accounts whose jobs queued that week (those that wanted more than they got), so "
            "the two differ where an entitled account sent no work."
        )

st.subheader("Waits")
if this_week.get_column("wait_p95_h").is_null().all():
    st.caption("No job of these accounts started this week.")
else:
    st.altair_chart(charts.wait_bars(this_week), width="stretch")

share_columns = {
    "usage_share": st.column_config.NumberColumn("used share", format="percent"),
    "entitled_share": st.column_config.NumberColumn("entitled share", format="percent"),
    "usage_ratio": st.column_config.NumberColumn("used ÷ entitled", format="%.2f"),
}
# where a figure does not exist (no entitlement; no job started) the tables show "—"
dashes = {
    "entitled_share": "{:.1%}",
    "usage_ratio": "{:.2f}",
    "wait_p50_h": "{:.1f}",
    "wait_p95_h": "{:.1f}",
}
st.subheader("Accounts: shares, waits and waste")
show_table(
    this_week.drop("user"),
    f"fairness_{week}",
    "fairness_accounts",
    column_config=share_columns,
    dashes=dashes,
)
users = shares.filter(pl.col("user").is_not_null() & (pl.col("week") == week))
if not users.is_empty():
    st.subheader("Users")
    show_table(
        users,
        f"fairness_users_{week}",
        "fairness_users",
        column_config=share_columns,
        dashes=dashes,
    )
if not jain.is_empty():
    st.subheader("Jain's index per week")
    show_table(jain, "fairness_jain", "fairness_jain")
