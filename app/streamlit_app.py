"""The dashboard's frame: page setup, navigation and the shared sidebar, nothing else."""

import streamlit as st

from app.scope import render_scope, run_page

st.set_page_config(page_title="gpuledger", page_icon=":material/memory:", layout="wide")
page = st.navigation(
    [
        st.Page(
            "app_pages/overview.py", title="Overview", icon=":material/monitoring:", default=True
        ),
        st.Page("app_pages/jobs.py", title="Jobs", icon=":material/list_alt:"),
        st.Page("app_pages/job.py", title="Job", icon=":material/work:", url_path="job"),
        st.Page("app_pages/users.py", title="Users & accounts", icon=":material/group:"),
        st.Page("app_pages/fairness.py", title="Fairness", icon=":material/balance:"),
        st.Page("app_pages/health.py", title="Health", icon=":material/health_and_safety:"),
        st.Page(
            "app_pages/alerts.py",
            title="Alerts & recommendations",
            icon=":material/notifications:",
        ),
        st.Page("app_pages/policy_lab.py", title="Policy lab", icon=":material/science:"),
    ]
)
render_scope(page.title)
run_page(page)
