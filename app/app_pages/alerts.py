"""Alerts & recommendations: the findings feed, and each policy change with its evidence."""

import json

import streamlit as st

from app import charts, data, scope
from app.downloads import show_table
from app.markdown_text import md
from detectors.recommend.recommendation import GAIN_KINDS

s = scope.current()
st.title("Alerts & recommendations")
viewer = s.viewer.user_filter

st.subheader("Findings")
c1, c2 = st.columns([3, 2])
search = c1.text_input(
    "Search findings",
    key="alerts_search",
    placeholder="message, detector, job, user, account or node",
)
severities = c2.multiselect("Severity", ["critical", "warn", "info"], key="alerts_severity_filter")
feed = data.findings(
    s.root, s.cluster, s.start, s.end, viewer, search=search, severities=tuple(severities)
)
if feed.is_empty():
    st.info(
        f"No match for {md(repr(search))}."
        if search
        else "No findings in this window: run "
        "`gpuledger detect` to look for waste and failing hardware."
    )
else:
    open_n = feed.filter(feed.get_column("status") == "open").height
    st.caption(
        f"{feed.height:,} finding(s), {open_n:,} still open. GPU-hours at stake, summed over "
        f"the findings: {feed.get_column('gpu_h_at_stake').sum():,.0f} — findings overlap (one "
        "idle job can also be a bottleneck and a stranded-GPU finding), so this is not the "
        "waste; the Overview's idle GPU-hours are."
    )
    st.altair_chart(charts.finding_bars(feed), width="stretch")
    first = ["severity", "status", "detector", "message", "gpu_h_at_stake", "job_id", "user"]
    show_table(
        feed.select(*first, *[c for c in feed.columns if c not in first and c != "evidence"]),
        "findings",
        "alerts_findings",
        column_config={
            "score": st.column_config.ProgressColumn(format="%.2f", min_value=0.0, max_value=1.0),
            "config_id": st.column_config.TextColumn(
                help="The configuration that produced the finding: a fingerprint of the "
                "[attribute] and [detect.<detector>] settings; its evidence holds the "
                "detector's thresholds (`gpuledger config check` shows the current ones)."
            ),
        },
        height=360,
    )

st.subheader("Recommendations")
if viewer is not None:
    st.caption("Cluster policy recommendations are shown to managers.")
    st.stop()
rec_search = st.text_input(
    "Search recommendations", key="alerts_rec_search", placeholder="kind, scope, target or config"
)
recs = data.recommendations(s.root, s.cluster, rec_search)
if recs.is_empty():
    st.info(
        f"No match for {md(repr(rec_search))}."
        if rec_search
        else "No recommendations yet: `gpuledger detect` writes them."
    )
    st.stop()
# only GPU-hours the cluster gets back are charted against each other: reserved time released
# to backfill and GPU-hours shifted between users are other quantities (their own titles say so)
saved = recs.filter(recs.get_column("gain_kind").is_in(["saved", "failures_avoided"]))
if not saved.is_empty():
    st.altair_chart(charts.gain_bars(saved), width="stretch")
show_table(
    recs.drop("config", "evidence"),
    "recommendations",
    "alerts_recs",
)
for rec in recs.iter_rows(named=True):
    gain = rec["expected_gain_gpu_h"]
    what = GAIN_KINDS.get(rec["gain_kind"] or "", "GPU-h expected")
    title = f"{md(rec['kind'])} · {md(rec['scope'] or 'cluster')}" + (
        f" — {gain:,.0f} {what}" if gain is not None else ""
    )
    with st.expander(title):
        st.markdown(f"**Target:** {md(rec['target'] or '—')}  \n**Risk:** {md(rec['risk'] or '—')}")
        st.markdown("**Configuration to apply** (copy button at the top right):")
        st.code(rec["config"] or "# no configuration given", language="bash")
        st.markdown("**Evidence**")
        try:
            st.json(json.loads(rec["evidence"] or "{}"), expanded=1)
        except json.JSONDecodeError:
            st.text(rec["evidence"])
