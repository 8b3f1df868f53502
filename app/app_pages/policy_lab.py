"""Policy lab (managers only): replay the cluster's recorded jobs under a proposed scheduler
policy, side by side with the recorded one, with the replay's calibration and the commands
that apply the proposal. A Slurm cluster is replayed under Slurm's model, a Kubernetes cluster
under Kueue's (its recorded ClusterQueues); the runs themselves are app/lab_runs.py."""

import datetime as dt
import json
import math
from typing import Any

import altair as alt
import polars as pl
import streamlit as st

from app import charts, data, lab_runs, scope
from detectors.replay.policy import PolicyError, slurm_lines
from detectors.replay.workload import NoWorkload

s = scope.current()
st.title("Policy lab")
if not s.viewer.is_manager:
    st.info("The Policy lab is for managers: it replays every user's jobs.")
    st.stop()


@st.cache_data(ttl=data.TTL_S, show_spinner=False)
def _scheduler(root: str, cluster: str) -> str:
    return lab_runs.scheduler_of(root, cluster)


@st.cache_data(ttl=data.TTL_S, show_spinner=False)
def _queues(root: str, cluster: str) -> list[str]:
    return lab_runs.kueue_queues(root, cluster)


@st.cache_data(ttl=data.TTL_S, show_spinner="Replaying the recorded jobs twice…")
def _lab(
    root: str,
    cluster: str,
    since: dt.datetime,
    until: dt.datetime,
    changes: tuple[str, ...],
    scheduler: str,
) -> dict[str, Any]:
    run = lab_runs.kueue_lab if scheduler == "kueue" else lab_runs.slurm_lab
    return run(root, cluster, since, until, changes)


def _replayable(root: str, cluster: str) -> dict[str, tuple[list[str], str]]:
    """Recommendations the replay can express: label → (settings, the recommendation's config)."""
    try:
        recs = data.recommendations(root, cluster)
    except Exception:  # no recommendations table yet: knobs only
        return {}
    out = {}
    for row in recs.iter_rows(named=True):
        replay = json.loads(row["evidence"] or "{}").get("replay") or {}
        if replay.get("settings"):
            label = f"{row['kind']}: {row['scope']}"
            settings = [*replay.get("assumed", []), *replay["settings"]]
            out[label] = (settings, row["config"])
    return out


def _slurm_knobs() -> list[str]:
    changes = []
    left, mid, right = st.columns(3)
    partition = left.text_input("Partition", value="gpu", key="lab_partition")
    max_time = left.text_input(
        "MaxTime (Slurm time, e.g. 08:00:00; empty: unchanged)", key="lab_maxtime"
    )
    over = left.radio(
        "A job asking for more", ["hold", "cut"], horizontal=True, key="lab_over_limit"
    )
    account = mid.text_input("Account", key="lab_account")
    cap = mid.number_input("Account GPU cap (0: unchanged)", 0, 100_000, 0, key="lab_cap")
    weight = right.number_input(
        "Fair-share weight (0: unchanged)", 0, 1_000_000, 0, step=1000, key="lab_fairshare"
    )
    if max_time.strip() and partition.strip():
        changes.append(f"partition.{partition.strip()}.MaxTime={max_time.strip()}")
        if over == "cut":
            changes.append("over_limit=cut")
    if cap and account.strip():
        changes.append(f"assoc.{account.strip()}.GrpTRES=gres/gpu={int(cap)}")
    if weight:
        changes += [
            "priority.PriorityType=priority/multifactor",
            f"priority.PriorityWeightFairshare={int(weight)}",
        ]
    return changes


def _kueue_knobs(queues: list[str]) -> list[str]:
    if not queues:
        return []
    left, mid, right = st.columns(3)
    cq = left.selectbox("ClusterQueue", queues, key="lab_cq")
    nominal = left.text_input("nominalQuota, GPUs (empty: unchanged)", key="lab_nominal")
    borrowing = mid.text_input(
        "borrowingLimit, GPUs (none: no limit; empty: unchanged)", key="lab_borrowing"
    )
    lending = mid.text_input(
        "lendingLimit, GPUs (none: lends it all; empty: unchanged)", key="lab_lending"
    )
    reclaim = right.selectbox(
        "preemption.reclaimWithinCohort",
        ["(unchanged)", "Never", "LowerPriority", "Any"],
        key="lab_reclaim",
    )
    weight = right.text_input("fairSharing.weight (empty: unchanged)", key="lab_weight")
    changes = [
        f"clusterqueue.{cq}.{attr}={value.strip()}"
        for attr, value in (
            ("nominalQuota", nominal),
            ("borrowingLimit", borrowing),
            ("lendingLimit", lending),
            ("fairSharing.weight", weight),
        )
        if value.strip()
    ]
    if reclaim != "(unchanged)":
        changes.append(f"clusterqueue.{cq}.preemption.reclaimWithinCohort={reclaim}")
    return changes


try:
    scheduler = _scheduler(s.root, s.cluster)
except Exception:  # no jobs table: the replay says so below
    scheduler = "slurm"
kueue = scheduler == "kueue"
if kueue:
    st.caption(
        "Replays the GPU workloads submitted in the chosen window twice, event by event under "
        "Kueue's admission (ClusterQueue quotas, cohort borrowing and lending, preemption, fair "
        "sharing): once under the ClusterQueues the lake recorded (the baseline) and once with "
        "the changes below. Both runs go on past the end of the data until every workload they "
        "can admit is admitted. Read the figures beside the calibration: how far the baseline "
        "is from what really happened."
    )
else:
    st.caption(
        "Replays the jobs submitted in the chosen window twice, event by event under Slurm's "
        "model (main scheduler, backfill, priority, limits): once under the recorded policy "
        "(the baseline) and once with the changes below. Both runs go on past the end of the "
        "data until every job they can start has started (a job the change delays past it "
        "counts as delayed). Read the figures beside the calibration: how far the baseline is "
        "from what really happened."
    )
picks = _replayable(s.root, s.cluster)
choice = st.selectbox("Start from a recommendation", ["(none)", *picks], key="lab_rec")
changes: list[str] = list(picks[choice][0]) if choice in picks else []
rec_config = picks[choice][1] if choice in picks else ""

with st.expander("Knobs", expanded=not picks):
    if kueue:
        try:
            queues = _queues(s.root, s.cluster)
        except PolicyError as exc:
            st.error(f"The recorded ClusterQueues: {exc}")
            st.stop()
        changes += _kueue_knobs(queues)
        help_keys = "clusterqueue.<cq>.nominalQuota=16, priorityclass.<name>=100"
    else:
        changes += _slurm_knobs()
        help_keys = "see `gpuledger whatif --help`"
    extra = st.text_area(f"More settings, KEY=VALUE one a line ({help_keys})", key="lab_extra")
changes += [line.strip() for line in extra.splitlines() if line.strip()]

try:
    lab = _lab(s.root, s.cluster, s.start, s.end, tuple(changes), scheduler)
except NoWorkload as exc:
    st.info(f"Nothing to replay: {exc}.")
    st.stop()
except PolicyError as exc:
    st.error(str(exc))
    st.stop()

what = (
    f"**{lab['jobs']:,} GPU workloads** in **{lab['queues']:,} ClusterQueues** with "
    f"**{lab['gpus']:,} GPUs** of nominal quota"
    if kueue
    else f"**{lab['jobs']:,} GPU jobs** on **{lab['gpus']:,} GPUs**"
)
st.markdown(
    f"{what}; proposal: "
    + (", ".join(f"`{c}`" for c in changes) if changes else "none yet (pick one above)")
)
st.subheader("Baseline and proposal")
st.dataframe(lab["summary"], hide_index=True, width="stretch")
data_end = f"{lab['data_end']:%Y-%m-%d %H:%M} UTC"
st.caption(
    f"GPU-hours and occupancy are counted to the end of the data ({data_end}); waits include "
    "the starts the runs make after it."
)
if kueue and lab["unadmittable"]:
    st.caption(
        f"{lab['unadmittable']:,} workloads name a ClusterQueue with no GPU quota: they stay "
        "pending in both runs."
    )

cal = lab["calibration"]
st.subheader("Calibration")
started = "workloads admitted" if kueue else "jobs started"


def _known(value: float | None, text: str, scale: float = 1.0) -> str:
    """`text` formatted with `value` × `scale`, or — where the calibration has no such figure
    (too few jobs: a rank correlation of one job, a median of none)."""
    return "—" if value is None or math.isnan(value) else text.format(value * scale)


st.markdown(
    f"The recorded policy replayed against what happened, over {cal['jobs']:,} {started} in "
    f"both ({cal['only_real']:,} only in the record, {cal['only_replay']:,} only in the "
    "replay): median |replayed − real start| "
    f"**{_known(cal['median_abs_start_s'], '{:,.0f} min', 1 / 60)}**, "
    f"p90 {_known(cal['p90_abs_start_s'], '{:,.0f} min', 1 / 60)}; start-order rank "
    f"correlation **{_known(cal['rank_correlation'], '{:.3f}')}**"
    + (" (too few jobs to compare)." if cal["jobs"] < 2 else ".")
)

left, right = st.columns(2)
with left:
    st.subheader("Queue waits")
    st.altair_chart(
        alt.Chart(lab["waits"])
        .mark_boxplot(extent="min-max")
        .encode(x=alt.X("wait_h:Q", title="wait (h)"), y=alt.Y("run:N", title=None)),
        width="stretch",
    )
with right:
    st.subheader("Occupancy over time")
    lines = (
        alt.Chart(lab["occupancy"])
        .mark_line()
        .encode(
            x=charts.utc_x("time", "time (UTC)"),
            y=alt.Y(
                "occupancy:Q",
                axis=alt.Axis(format="%"),
                title="of the nominal quota" if kueue else "GPUs busy",
            ),
            color=alt.Color("run:N", title=None),
        )
    )
    end = (
        alt.Chart(pl.DataFrame({"time": [lab["data_end"]]}))
        .mark_rule(strokeDash=[4, 4])
        .encode(x=charts.utc_x("time", "time (UTC)"))
    )
    st.altair_chart(lines + end, width="stretch")
    st.caption("The dashed line is the end of the data; the runs go on past it.")
group = "ClusterQueue" if kueue else "account"
st.subheader(f"Waits per {group} and job size (p50, p95 in seconds)")
st.dataframe(lab["wait_table"], hide_index=True, width="stretch")
st.subheader("Shares of GPU-hours")
st.dataframe(lab["shares"], hide_index=True, width="stretch")

st.subheader("To apply it")
if kueue and changes:
    st.caption("On the recorded ClusterQueues (kubectl and jq):")
    st.code("\n".join(lab["apply"]), language="bash")
if rec_config:
    st.caption("The recommendation's own configuration:")
    st.code(rec_config, language="yaml" if kueue else "bash")
elif changes and not kueue:
    st.code("\n".join(slurm_lines(changes, s.cluster)), language="bash")
elif not changes:
    st.caption("No change yet.")
