"""The dashboard's frame: page setup and navigation, nothing else."""

import streamlit as st

st.set_page_config(page_title="gpuledger", page_icon=":material/memory:", layout="wide")
page = st.navigation(
    [st.Page("app_pages/overview.py", title="Overview", icon=":material/monitoring:", default=True)]
)
page.run()
