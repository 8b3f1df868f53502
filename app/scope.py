"""The frame every page shares: sign-in, the cluster selector and the date range (sidebar).

The entry script calls `render_scope` once per run, before the page, and runs the page with
`run_page`; pages read the scope with `current()`. Widgets live in the entry script, so the
choice survives page switches.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl
import streamlit as st

from app import data
from app.access import Denied, Viewer, resolve_viewer
from app.config import ConfigError, dashboard_access_policy
from app.markdown_text import md
from warehouse.errors import WarehouseError

if TYPE_CHECKING:
    from streamlit.navigation.page import StreamlitPage

__all__ = ["Scope", "current", "render_scope", "run_page", "stop_with_error"]

_STATE_KEY = "scope_current"
DEFAULT_DAYS = 7


@dataclass(frozen=True, slots=True)
class Scope:
    """What every page shows: one cluster, a half-open UTC window, for one viewer."""

    root: str
    cluster: str
    start: dt.datetime
    end: dt.datetime
    viewer: Viewer
    data_start: dt.datetime
    data_end: dt.datetime
    # whether the cluster has GPU telemetry in the lake (one known from its scheduler's
    # records alone has jobs and allocations, no occupancy or idle time)
    telemetry: bool = True

    @property
    def days(self) -> float:
        return (self.end - self.start).total_seconds() / 86400

    def previous(self) -> tuple[dt.datetime, dt.datetime]:
        """The window of the same length just before this one (for trends)."""
        return self.start - (self.end - self.start), self.start


def stop_with_error(title: str, message: str) -> None:
    """Show the page's title and one clear message, and end the run."""
    st.title(title)
    st.error(message)
    st.stop()


def _claims() -> dict[str, object] | None:
    user = st.user
    if not user.get("is_logged_in", False):
        return None
    return {k: v for k, v in user.to_dict().items() if isinstance(v, str | bool | int | float)}


def _now() -> dt.datetime:
    """The time sign-ins are checked against (a token's `exp`): the wall clock, since a token's
    expiry is about the present, not about the data. A seam: tests replace it."""
    return dt.datetime.now(dt.UTC)


def _auth_configured() -> bool:
    try:
        return bool(st.secrets.load_if_toml_exists() and "auth" in st.secrets)
    except FileNotFoundError:
        return False


def _render_viewer(title: str) -> Viewer:
    try:
        policy = dashboard_access_policy()
    except ConfigError as exc:  # e.g. dashboard.cost_per_gpu_hour = -1: one line naming the key
        stop_with_error(title, f"The configuration is not valid: {exc}")
        raise  # unreachable: st.stop() raises
    viewer = resolve_viewer(policy, _claims(), _now())
    if isinstance(viewer, Viewer):
        if policy.restricted:
            st.sidebar.caption(f"Signed in as {md(viewer.label)}")
            if _auth_configured():
                st.sidebar.button("Sign out", on_click=st.logout, key="scope_logout")
        return viewer
    if isinstance(viewer, Denied):
        st.title(title)
        st.error(md(viewer.reason), icon=":material/block:")
        if _auth_configured():
            st.button("Sign out", on_click=st.logout, key="scope_logout_denied")
        st.stop()
    st.title(title)
    if _auth_configured():
        st.info("This dashboard is for signed-in users. Sign in to see your jobs.")
        st.button("Sign in", on_click=st.login, key="scope_login", type="primary")
    else:
        st.error(
            "Access is restricted to signed-in users (GPULEDGER_DASHBOARD_MANAGERS is set), "
            "but no sign-in is configured: add an [auth] section to .streamlit/secrets.toml."
        )
    st.stop()
    raise AssertionError("unreachable")  # st.stop() raises


def _picked_window(
    first: dt.date, last: dt.date, key: str, reach: dt.date | None = None
) -> tuple[dt.date, dt.date]:
    """The picked days; by default the DEFAULT_DAYS up to `last`, and as far as `reach` (the
    day the data ends in, when only minutes of it run past `last`'s midnight)."""
    reach = max(last, reach or last)
    default_first = max(first, last - dt.timedelta(days=DEFAULT_DAYS - 1))
    picked = st.sidebar.date_input(
        "Dates (UTC)",
        value=(default_first, last),
        min_value=first,
        max_value=reach,
        key=key,
        help="Both ends included. The lake holds "
        f"{first:%Y-%m-%d} to {reach:%Y-%m-%d}; trends compare with the same number of days "
        "just before.",
    )
    if isinstance(picked, tuple) and len(picked) == 2:
        return picked[0], picked[1]
    return default_first, last  # while the second date is being picked


def render_scope(title: str) -> Scope:
    """Draw the shared sidebar and return (and remember) the page's scope.

    On an empty or missing lake, shows `title` with one message saying what to run, and stops.
    """
    viewer = _render_viewer(title)
    root = data.lake()
    try:
        summary = data.extent(root)
    except WarehouseError as exc:
        stop_with_error(title, str(exc))
        raise  # unreachable: st.stop() raises
    if summary.is_empty():
        stop_with_error(
            title,
            f"The lake at {root!r} has no samples yet: land data with `gpuledger simulate` or "
            "`gpuledger collect`, then build the marts with `gpuledger attribute`.",
        )
    names = data.clusters(root)
    # a link's cluster (`?cluster=`, as the Job page writes it beside `?job=`): a job id names
    # a job on one cluster only, and the first cluster's job of that id was shown instead
    linked = st.query_params.get("cluster")
    if linked in names and "scope_cluster" not in st.session_state:
        st.session_state["scope_cluster"] = linked
    cluster = st.sidebar.selectbox("Cluster", names, key="scope_cluster")
    row = summary.filter(pl.col("cluster") == cluster).row(0, named=True)
    data_start: dt.datetime = row["data_start"]
    data_end: dt.datetime = row["data_end"]
    # a bucket starting at midnight holds only what carries past the data's last day: the
    # default window ends on the day before; the picker reaches the day the data ends in
    # (usage_daily counts those minutes there, and the widest window left them out)
    last_data_day = max(data_start.date(), (data_end - dt.timedelta(milliseconds=1)).date())
    until: dt.datetime = row["data_until"] or data_end
    first_day, last_day = _picked_window(
        data_start.date(),
        last_data_day,
        key=f"scope_dates_{cluster}",
        reach=(until - dt.timedelta(milliseconds=1)).date(),
    )
    scope = Scope(
        root=root,
        cluster=cluster,
        start=dt.datetime.combine(first_day, dt.time(), tzinfo=dt.UTC),
        end=dt.datetime.combine(last_day + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC),
        viewer=viewer,
        data_start=data_start,
        data_end=data_end,
        telemetry=row["gpus_total"] is not None,
    )
    st.session_state[_STATE_KEY] = scope
    return scope


def current() -> Scope:
    """The scope the entry script set for this run."""
    scope = st.session_state[_STATE_KEY]
    assert isinstance(scope, Scope)
    return scope


def run_page(page: StreamlitPage) -> None:
    """Run the chosen page; a lake error it meets (a file damaged inside, which only a query
    decoding it notices) ends it with one message naming the file instead of a traceback."""
    try:
        page.run()
    except WarehouseError as exc:
        st.error(str(exc))
        st.stop()
