"""Job: one job's allocation, per-GPU timelines, findings and what to change next time."""

import datetime as dt

import streamlit as st

from app import charts, data, scope
from app.downloads import show_table
from app.emissions_text import describe_emissions
from app.markdown_text import md
from detectors.job_advice import NOTHING_TO_CHANGE, when_no_advice

s = scope.current()
viewer = s.viewer.user_filter
if "job" in st.query_params and "job_id_input" not in st.session_state:
    st.session_state["job_id_input"] = st.query_params["job"]
if "job_selected" in st.session_state:
    st.session_state["job_id_input"] = st.session_state.pop("job_selected")
job_id = st.sidebar.text_input(
    "Job ID", key="job_id_input", help="Pick one on the Jobs page, or type its id."
).strip()
if not job_id:
    worst = data.job_table(s.root, s.cluster, s.start, s.end, viewer, limit=1)
    if worst.is_empty():
        st.title("Job")
        st.info("No jobs in this window: pick other dates, or type a job id in the sidebar.")
        st.stop()
    job_id = str(worst.get_column("job_id")[0])
    st.caption("Showing the window's most wasteful job; pick another on the Jobs page.")
st.query_params["job"] = job_id
st.query_params["cluster"] = s.cluster  # (a job id names a job on one cluster)

detail = data.job_detail(s.root, s.cluster, job_id, viewer)
if detail.is_empty():
    st.title(f"Job {md(job_id)}")
    st.info(
        f"No match: cluster {md(repr(s.cluster))} has no job {md(repr(job_id))}"
        + (" of yours." if viewer else ".")
    )
    st.stop()
job = detail.row(0, named=True)
# every lake value is shown as text (md), never as Markdown: a job's name is its owner's choice
st.title(f"Job {md(job_id)}" + (f" · {md(job['job_name'])}" if job["job_name"] else ""))
if job["start_ts"] is not None:
    began = f"started {job['start_ts']:%Y-%m-%d %H:%M} UTC"
elif job["submit_ts"] is not None:
    began = f"submitted {job['submit_ts']:%Y-%m-%d %H:%M} UTC, not started"
else:
    began = "not started"
st.caption(
    f"cluster {md(s.cluster)} · "
    f"{md(job['user'])} ({md(job['account'])}) · partition {md(job['partition'])} · "
    f"{md(job['state'])} · {job['gpus']} × {md(job['gpu_type'] or 'GPU')} on "
    f"{md(job['nodes'] or '?')} · {began}"
    + (f", waited {job['wait_h']:.1f} h" if job["wait_h"] is not None else "")
)
if job["start_ts"] is None:
    # a pending job (or one cancelled before it ran): "no job" told its owner it did not exist
    st.info(
        f"This job has not started ({md(job['state'])}): it has held no GPU, so there is "
        "nothing to measure yet."
    )
    with st.expander("All figures"):
        show_table(detail, f"job_{job_id}", "job_detail")
    st.stop()

observed = job["observed_gpu_h"] or 0.0


def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f} %"  # — : the GPUs did not report it


def seen(value: float | None, digits: int = 1) -> str:
    """A figure of the job's telemetry: — where no sample of it was seen (not 0)."""
    return "—" if value is None or not observed else f"{value:,.{digits}f}"


c1, c2, c3, c4, c5 = st.columns(5)
c1.metric("Allocated GPU-h", f"{job['alloc_gpu_h'] or 0:,.1f}", help="GPU-hours allocated")
c2.metric(
    "Idle GPU-h",
    seen(job["idle_gpu_h"] or 0.0),
    help=f"{100 * (job['idle_gpu_h'] or 0) / observed:.0f} % of the observed time"
    if observed
    else "No telemetry saw this job's GPUs: its idle time is unknown",
)
c3.metric("Busy", percent(job["busy_mean"]), help="Mean busy while observed")
c4.metric(
    "Tensor active",
    percent(job["tensor_active_mean"]),
    help=None
    if job["est_tflops_mean"] is None
    else f"≈ {job['est_tflops_mean']:,.0f} TFLOP/s per GPU",
)
c5.metric(
    "Energy kWh",
    seen(job["energy_kwh"]),
    help=None if job["power_w_mean"] is None else f"mean {job['power_w_mean']:.0f} W",
)
st.caption(md(describe_emissions(job)))
if job.get("tokens_per_s_per_gpu") is not None:
    # what the training loop reported (collector.throughput, or its callbacks)
    t1, t2, t3 = st.columns(3)
    t1.metric("Tokens/s per GPU", f"{job['tokens_per_s_per_gpu']:,.0f}")
    params = job.get("model_params")
    t2.metric("Model", "—" if params is None else f"{params / 1e9:,.3g} B params")
    t3.metric(
        "MFU",
        percent(job.get("mfu")),
        help="Model FLOPs utilisation: 6 × parameters × tokens/s ÷ the GPUs' peak dense BF16 "
        "FLOP/s. — : no parameter count, a GPU model without a known peak (or MIG), or counts "
        "that would exceed the peak.",
    )
if job.get("shared"):
    st.caption(
        "Shared GPU: other jobs held this job's GPUs at the same time. The allocated time is "
        "split evenly among them; each sample counts for the jobs its row names, or for all of "
        "them where it names none, split evenly. These figures are an estimate."
    )

st.subheader("What to change next time")
# the same engine and inputs as `gpuledger job` (detectors/job_advice.py)
advice = data.job_advice(s.root, s.cluster, job_id)
no_advice = "" if advice else when_no_advice(job)
if no_advice == NOTHING_TO_CHANGE:
    st.success(no_advice)
elif no_advice and observed > 0:  # (cut short: whether it was sized well is unknown)
    st.info(no_advice)
elif no_advice:
    st.warning(no_advice, icon=":material/visibility_off:")
for item in advice:
    with st.container(border=True):
        st.markdown(f"**{md(item.headline)}** — {md(item.reason)}")
        setting = item.setting(job["source"])
        if setting:
            st.code(setting, language="yaml" if job["source"] == "kubernetes" else "bash")

st.subheader("Bottleneck")
# the same diagnosis as `gpuledger job` prints under Bottleneck (detectors/bottleneck.py)
diagnosis = data.job_diagnosis(s.root, s.cluster, job_id)
name = str(diagnosis.get("diagnosis") or "unobserved")
said = f"`{name}` — {md(diagnosis.get('advice') or '')}".rstrip(" —")
if name in ("idle", "stalled"):
    st.warning(said, icon=":material/hourglass_disabled:")
elif name == "compute_bound":
    st.success(said, icon=":material/speed:")
else:
    st.info(said, icon=":material/troubleshoot:")

st.subheader("Per-GPU timelines")
timeline = data.job_gpu_timeline(s.root, s.cluster, job_id)
if timeline.is_empty():
    st.info("No samples were attributed to this job.")
else:
    panels = charts.job_gpu_timelines(timeline)
    missing = [title for title, chart in panels.items() if chart is None]
    drawn = [chart for chart in panels.values() if chart is not None]
    for pair in range(0, len(drawn), 2):
        for column, chart in zip(st.columns(2), drawn[pair : pair + 2], strict=False):
            column.altair_chart(chart, width="stretch")
    gpu_count = timeline.get_column("gpu").n_unique()
    if gpu_count > charts.TIMELINE_LINES_MAX:
        lowest = ", ".join(md(g) for g in charts.timeline_worst_gpus(timeline))
        st.caption(
            f"{gpu_count} GPUs: the grey band spans the lowest to the highest GPU at each "
            f"moment and the dark line is the median GPU; the lines of their own are the "
            f"{charts.TIMELINE_WORST} GPUs with the lowest mean busy ({lowest}). Every GPU's "
            "figures are in the timeline data below."
        )
    if missing:
        st.caption(f"Not reported by this job's GPUs: {', '.join(missing)}.")
    with st.expander("Timeline data"):
        show_table(timeline, f"job_{job_id}_timeline", "job_timeline")

st.subheader("Findings")
# a job's findings whenever they were raised, not only in the sidebar's window
everything = dt.timedelta(days=366)
# (the job is the viewer's: job_detail is bound to them above; a GPU's finding about the job
# names no user, and bound to the viewer too its owner missed the XID that ended their job)
found = data.findings(
    s.root, s.cluster, s.data_start - everything, s.data_end + everything, None, job_id=job_id
)
if found.is_empty():
    st.caption("No detector has flagged this job.")
else:
    show_table(
        found.select(
            "severity",
            "status",
            "detector",
            "message",
            "gpu_h_at_stake",
            "start_ts",
            "end_ts",
            "config_id",  # the configuration that produced it (evidence.config.id)
        ),
        f"job_{job_id}_findings",
        "job_findings",
    )
with st.expander("All figures"):
    show_table(detail, f"job_{job_id}", "job_detail")
