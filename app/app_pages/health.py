"""Health: GPUs and nodes with XIDs, ECC errors, row remaps and throttling; what to drain."""

import polars as pl
import streamlit as st

from app import charts, data, scope
from app.downloads import show_table
from app.markdown_text import md
from detectors.recommend.drain_node import drain_command

s = scope.current()
st.title("GPU health")

DRAIN_SCORE = 0.7
daily = data.gpu_events_daily(s.root, s.cluster, s.start, s.end)
risk = data.failure_risk_by_node(s.root, s.cluster, s.start, s.end, DRAIN_SCORE)
drain = risk.filter(risk.get_column("drain_candidate")) if not risk.is_empty() else risk
c1, c2, c3, c4 = st.columns(4)
events_total = int(daily.get_column("events").sum()) if not daily.is_empty() else 0
kinds: dict[str, int] = dict(daily.group_by("kind").agg(pl.col("events").sum()).iter_rows())
c1.metric("Hardware events", f"{events_total:,}")
c2.metric("XIDs", f"{kinds.get('xid', 0):,}")
c3.metric(
    "ECC / row-remap failures", f"{kinds.get('ecc_dbe', 0) + kinds.get('row_remap_failure', 0):,}"
)
c4.metric(
    "Drain candidates",
    f"{drain.height:,}",
    help=(
        "Nodes that `gpuledger detect` recommends draining (drain_node), that have a critical "
        "hardware finding (XID 79, double-bit ECC, row-remap failure …), or whose predicted "
        f"failure score is ≥ {DRAIN_SCORE} (only once the models are trained: `gpuledger train`)."
    ),
)

st.subheader("Events per day")
if daily.is_empty():
    st.success("No hardware events in this window.")
else:
    st.altair_chart(charts.event_bars(daily), width="stretch")

st.subheader("Failure risk and drain candidates")
if risk.is_empty():
    st.caption(
        "No node to drain in this window: no drain_node recommendation, no critical hardware "
        "finding and no predicted failure (findings with predicted = true on a GPU or node)."
    )
else:
    predicted = risk.get_column("risk_score").is_not_null().any()
    show_table(
        risk,
        "failure_risk_by_node",
        "health_risk",
        column_config={
            # no model trained: an empty column; the caption below says so
            "risk_score": st.column_config.ProgressColumn(
                "predicted risk",
                format="%.2f",
                min_value=0.0,
                max_value=1.0,
                help="Highest predicted failure score; empty where nothing was predicted.",
            )
            if predicted
            else None,
            "gpu_h_at_stake": st.column_config.NumberColumn(
                "GPU-h at stake",
                format="%.1f",
                help="The larger of the findings' GPU-hours at stake and the drain_node "
                "recommendation's expected gain (GPU time its failed jobs held on the node); "
                "they overlap, so they are not added.",
            ),
            "first_event_ts": st.column_config.DatetimeColumn(
                "first event",
                format="YYYY-MM-DD HH:mm",
                help="When the earliest hardware problem of the findings began (UTC)",
            ),
            "last_event_ts": st.column_config.DatetimeColumn(
                "last event",
                format="YYYY-MM-DD HH:mm",
                help="When the latest hardware problem of the findings ended (UTC); "
                "the time `gpuledger detect` ran is in the download (last_detected_ts)",
            ),
            "last_detected_ts": None,  # when detect ran, not when the hardware failed
            "drain_recommended": None,  # "why drain" names the recommendation
            "drain_candidate": st.column_config.CheckboxColumn(
                "drain?", help="Recommended, critical, or predicted risk ≥ the drain score"
            ),
            "drain_reason": st.column_config.TextColumn("why drain"),
        },
    )
    if not predicted:
        st.caption(
            "No predicted risk column: no failure model is trained. `gpuledger train` trains them; "
            "`gpuledger detect` then scores every GPU. Until then a node is a drain candidate "
            "by a drain_node recommendation or a critical hardware finding."
        )
    for row in drain.iter_rows(named=True):
        cluster = str(row.get("cluster") or s.cluster)
        st.code(drain_command(cluster, str(row["node"]), str(row["drain_reason"])), language="bash")

search = st.text_input(
    "Search GPUs",
    key="health_search",
    placeholder="node or GPU UUID",
    help="Case-insensitive; matches any part of the node name or GPU UUID.",
)
gpus = data.gpu_health(s.root, s.cluster, s.start, s.end, search)
if gpus.is_empty():
    st.info(
        f"No match for {md(repr(search))}." if search else "No GPU had an event in this window."
    )
else:
    st.subheader("Nodes with events")
    show_table(data.node_health(gpus), "node_health", "health_nodes", height=320)
    st.subheader("GPUs with events")
    show_table(gpus, "gpu_health", "health_gpus", height=320)

if s.viewer.is_manager:
    hardware = data.findings(
        s.root, s.cluster, s.start, s.end, None, search=search, subject_kinds=("gpu", "node")
    )
else:
    # everyone sees the hardware findings, but searched by what names the hardware only: by a
    # job id, user or account (which the feed also matches) another user's job showed the GPU
    # it ran on
    hardware = data.findings(s.root, s.cluster, s.start, s.end, None, subject_kinds=("gpu", "node"))
    wanted = data.needle(search)
    if wanted:
        hardware = hardware.filter(
            pl.any_horizontal(
                pl.col(c).cast(pl.String).str.to_lowercase().str.contains(wanted, literal=True)
                for c in ("detector", "subject_id", "node", "gpu_uuid")
            ).fill_null(False)
        )
if not hardware.is_empty():
    st.subheader("Findings of hardware detectors")
    show_table(
        hardware.select(
            "severity",
            "status",
            "detector",
            "node",
            "gpu_uuid",
            "predicted",
            "score",
            "message",
            "detected_ts",
        ),
        "hardware_findings",
        "health_findings",
    )

st.subheader("Event log")
log = data.gpu_event_log(s.root, s.cluster, s.start, s.end, search)
if log.is_empty():
    st.info(f"No match for {md(repr(search))}." if search else "No events in this window.")
else:
    show_table(log, "gpu_events", "health_log", height=320)
