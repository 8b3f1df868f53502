"""Policy lab (managers only): replay the cluster's recorded jobs under a proposed scheduler
policy, side by side with the recorded one, with the replay's calibration and the commands
that apply the proposal."""

import datetime as dt
import json
from typing import Any

import altair as alt
import numpy as np
import polars as pl
import streamlit as st

from app import data, scope
from detectors.replay.policy import PolicyError, slurm_lines
from detectors.replay.workload import NoWorkload
from warehouse.lake import Lake

s = scope.current()
st.title("Policy lab")
if not s.viewer.is_manager:
    st.info("The Policy lab is for managers: it replays every user's jobs.")
    st.stop()


def _busy(start: np.ndarray, end: np.ndarray, gpus: np.ndarray, at: np.ndarray) -> np.ndarray:
    """GPUs running at each instant of `at` (jobs in [start, end))."""
    ran = ~np.isnan(start)
    s_order = np.argsort(start[ran])
    e_order = np.argsort(end[ran])
    up = np.concatenate(([0], np.cumsum(gpus[ran][s_order])))
    down = np.concatenate(([0], np.cumsum(gpus[ran][e_order])))
    began = up[np.searchsorted(start[ran][s_order], at, side="right")]
    ended = down[np.searchsorted(end[ran][e_order], at, side="right")]
    busy: np.ndarray = began - ended
    return busy


@st.cache_data(ttl=data.TTL_S, show_spinner="Replaying the recorded jobs twice…")
def _lab(
    root: str, cluster: str, since: dt.datetime, until: dt.datetime, changes: tuple[str, ...]
) -> dict[str, Any]:
    from detectors.replay.engine import replay
    from detectors.replay.metrics import calibrate, compare
    from detectors.replay.policy import Policy, apply_settings
    from detectors.replay.workload import load_workload, recorded_settings

    con = Lake.at(root).connect(require=("jobs",))
    try:
        w = load_workload(con, cluster, since, until)
        recorded = apply_settings(Policy(), recorded_settings(con, cluster))
    finally:
        con.close()
    proposed = apply_settings(recorded, changes)
    base, new = replay(w, recorded), replay(w, proposed)
    first = float(w.submit_e.min())
    capacity = float(w.node_gpus.sum()) * max(w.horizon_e - first, 1.0) / 3600
    entitlement = {a: float(recorded.shares.get(a, 1.0)) for a in set(w.account)}
    c = compare(w, base, new, entitlement, capacity)
    cal = calibrate(w, base)
    waits = []
    for run, out in (("baseline", base), ("proposal", new)):
        ran = ~np.isnan(out.start_e)
        waits.append(
            pl.DataFrame({"run": run, "wait_h": (out.start_e[ran] - w.submit_e[ran]) / 3600.0})
        )
    at = np.arange(first, w.horizon_e, 3600.0)
    total = max(float(w.node_gpus.sum()), 1.0)
    occupancy = pl.concat(
        pl.DataFrame(
            {
                "time": [dt.datetime.fromtimestamp(t, dt.UTC) for t in at],
                "run": run,
                "occupancy": _busy(out.start_e, np.minimum(out.end_e, w.horizon_e), w.gpus, at)
                / total,
            }
        )
        for run, out in (("baseline", base), ("proposal", new))
    )
    summary = pl.DataFrame(
        {
            "figure": [
                "jobs started",
                "GPU-hours run",
                "GPU occupancy",
                "Jain's index (share ÷ entitlement)",
                "jobs cut short by a new limit",
                "GPU-hours those lose",
                "jobs a new limit keeps pending",
            ],
            "baseline": [float(c.started[0]), c.gpu_h[0], c.occupancy[0], c.jain[0], 0, 0, 0],
            "proposal": [
                float(c.started[1]),
                c.gpu_h[1],
                c.occupancy[1],
                c.jain[1],
                float(c.cut_jobs),
                c.cut_gpu_h,
                float(c.held_jobs),
            ],
        }
    )
    if any(c.preempted):  # a QOS preempted (preempt/qos in either run)
        summary = pl.concat(
            [
                summary,
                pl.DataFrame(
                    {
                        "figure": ["jobs preempted by a QOS", "GPU-hours of requeued runs lost"],
                        "baseline": [float(c.preempted[0]), c.requeued_gpu_h[0]],
                        "proposal": [float(c.preempted[1]), c.requeued_gpu_h[1]],
                    }
                ),
            ],
            how="vertical_relaxed",
        )
    return {
        "jobs": w.size,
        "gpus": int(w.node_gpus.sum()),
        "partitions": sorted(set(w.partition)),
        "accounts": sorted(set(w.account)),
        "summary": summary,
        "waits": pl.concat(waits),
        "wait_table": c.waits,
        "occupancy": occupancy,
        "shares": c.shares,
        "calibration": {
            "jobs": cal.jobs,
            "median_abs_start_s": cal.median_abs_start_s,
            "p90_abs_start_s": cal.p90_abs_start_s,
            "rank_correlation": cal.rank_correlation,
            "only_real": cal.started_only_real,
            "only_replay": cal.started_only_replay,
        },
        "calibration_waits": cal.wait_by_account,
    }


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
            out[label] = ([*replay.get("assumed", []), *replay["settings"]], row["config"])
    return out


st.caption(
    "Replays the jobs submitted in the chosen window twice, event by event under Slurm's "
    "model (main scheduler, backfill, priority, limits): once under the recorded policy (the "
    "baseline) and once with the changes below. Read the figures beside the calibration: how "
    "far the baseline is from what really happened."
)
picks = _replayable(s.root, s.cluster)
choice = st.selectbox("Start from a recommendation", ["(none)", *picks], key="lab_rec")
changes: list[str] = list(picks[choice][0]) if choice in picks else []
rec_config = picks[choice][1] if choice in picks else ""

with st.expander("Knobs", expanded=not picks):
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
    extra = st.text_area(
        "More settings, KEY=VALUE one a line (see `gpuledger whatif --help`)", key="lab_extra"
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
changes += [line.strip() for line in extra.splitlines() if line.strip()]

try:
    lab = _lab(s.root, s.cluster, s.start, s.end, tuple(changes))
except NoWorkload as exc:
    st.info(f"Nothing to replay: {exc}.")
    st.stop()
except PolicyError as exc:
    st.error(str(exc))
    st.stop()

st.markdown(
    f"**{lab['jobs']:,} GPU jobs** on **{lab['gpus']:,} GPUs**; proposal: "
    + (", ".join(f"`{c}`" for c in changes) if changes else "none yet (pick one above)")
)
st.subheader("Baseline and proposal")
st.dataframe(lab["summary"], hide_index=True, width="stretch")

cal = lab["calibration"]
st.subheader("Calibration")
st.markdown(
    f"The recorded policy replayed against what happened, over {cal['jobs']:,} jobs started in "
    f"both ({cal['only_real']:,} only in the record, {cal['only_replay']:,} only in the "
    f"replay): median |replayed − real start| **{cal['median_abs_start_s'] / 60:,.0f} min**, "
    f"p90 {cal['p90_abs_start_s'] / 60:,.0f} min; start-order rank correlation "
    f"**{cal['rank_correlation']:.3f}**."
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
    st.altair_chart(
        alt.Chart(lab["occupancy"])
        .mark_line()
        .encode(
            x=alt.X("time:T", title=None),
            y=alt.Y("occupancy:Q", axis=alt.Axis(format="%"), title="GPUs busy"),
            color=alt.Color("run:N", title=None),
        ),
        width="stretch",
    )
st.subheader("Waits per account and job size (p50, p95 in seconds)")
st.dataframe(lab["wait_table"], hide_index=True, width="stretch")
st.subheader("Shares of GPU-hours")
st.dataframe(lab["shares"], hide_index=True, width="stretch")

st.subheader("To apply it")
if rec_config:
    st.caption("The recommendation's own configuration:")
    st.code(rec_config, language="bash")
elif changes:
    st.code("\n".join(slurm_lines(changes, s.cluster)), language="bash")
else:
    st.caption("No change yet.")
