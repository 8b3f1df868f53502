"""Jobs: every job of the window, searchable and filterable, most wasteful first."""

import polars as pl
import streamlit as st

from app import charts, data, scope
from app.downloads import show_table
from app.markdown_text import md

s = scope.current()
st.title("Jobs")
viewer = s.viewer.user_filter
if viewer is not None:
    st.caption(f"Your jobs only ({md(viewer)}).")

facets = data.job_facets(s.root, s.cluster, s.start, s.end, viewer)
search = st.text_input(
    "Search",
    key="jobs_search",
    placeholder="job id, job name, user or account",
    help="Case-insensitive; matches any part of the job id, name, user or account.",
)
c1, c2, c3, c4, c5 = st.columns([2, 2, 1.3, 1.7, 1.3])
users = c1.multiselect("User", facets["user"], key="jobs_users")
accounts = c2.multiselect("Account", facets["account"], key="jobs_accounts")
partitions = c3.multiselect("Partition", facets["partition"], key="jobs_partitions")
states = c4.multiselect("State", facets["state"], key="jobs_states")
min_idle = c5.number_input(
    "Idle GPU-h ≥",
    min_value=0.0,
    value=0.0,
    step=1.0,
    key="jobs_min_idle_gpu_h",
    help="Only jobs that left at least this many allocated GPU-hours idle.",
)

jobs = data.job_table(
    s.root,
    s.cluster,
    s.start,
    s.end,
    viewer,
    search=search,
    users=tuple(users),
    accounts=tuple(accounts),
    partitions=tuple(partitions),
    states=tuple(states),
    min_idle_gpu_h=float(min_idle),
)
if jobs.is_empty():
    st.info(
        f"No match for {md(repr(search))} with these filters."
        if search
        else "No match: no job in this window passes these filters."
    )
    st.stop()

seen_idle = jobs.get_column("idle_gpu_h").drop_nulls()
if seen_idle.is_empty():  # telemetry saw none of them: their idle time is unknown, not 0
    idle = "idle unknown (no telemetry saw them)"
elif seen_idle.len() < jobs.height:
    idle = f"{seen_idle.sum():,.0f} idle in the {seen_idle.len():,} telemetry saw"
else:
    idle = f"{seen_idle.sum():,.0f} idle"
st.caption(
    f"{jobs.height:,} job(s){' (the 5,000 most wasteful)' if jobs.height == 5000 else ''}, "
    f"{jobs.get_column('alloc_gpu_h').sum():,.0f} GPU-hours allocated by the scheduler "
    f"over their whole runs, {idle}: a job running across the window's edges "
    "counts whole here (the Overview and Users & accounts count only the hours inside). "
    "Select a row to open the job."
)
st.altair_chart(charts.job_waste_scatter(jobs), width="stretch")
# the figures first, the times and the partition last: at 1400 px the table scrolls sideways
# from about the 12th column (the job column stays pinned)
first = ["job_id", "job_name", "user", "account", "state", "gpus", "alloc_gpu_h", "idle_gpu_h"]
last = ["runtime_h", "start_ts", "end_ts", "partition"]
event = show_table(
    jobs.select(*first, pl.exclude(first + last), *last),
    "jobs",
    "jobs",
    height=480,
    on_select=True,
)
rows = event.selection.rows if event is not None else []
if rows:
    job_id = jobs.get_column("job_id")[rows[0]]
    if st.button(f"Open job {job_id}", type="primary", key="jobs_open"):
        st.session_state["job_selected"] = job_id
        st.switch_page("app_pages/job.py")
