"""Access: managers see every job; a signed-in non-manager sees only their own (bound in SQL)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from app.access import AccessPolicy, Viewer, resolve_viewer, user_name_from_claims
from app.dashboard_timing import PAGES
from warehouse.connection import connect

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
BOSS = "boss@example.org"


@pytest.mark.parametrize(
    ("managers", "claims", "expected"),
    [
        # open access: no sign-in, everyone sees everything
        (frozenset(), None, Viewer(None, True)),
        (frozenset(), {"email": "a@x"}, Viewer(None, True)),
        # restricted: nobody signed in -> no viewer
        (frozenset({BOSS}), None, None),
        (frozenset({BOSS}), {}, None),
        # a manager by e-mail or by user name
        (frozenset({BOSS}), {"email": "Boss@Example.org"}, Viewer("boss", True)),
        (frozenset({"carol"}), {"email": "carol@x.org"}, Viewer("carol", True)),
        # anyone else: their own jobs, named by preferred_username before e-mail
        (frozenset({BOSS}), {"email": "Alice@x.org"}, Viewer("alice", False)),
        (
            frozenset({BOSS}),
            {"preferred_username": "al", "email": "alice@x.org"},
            Viewer("al", False),
        ),
    ],
)
def test_resolve_viewer(managers, claims, expected):
    assert resolve_viewer(AccessPolicy(managers), claims) == expected


@given(
    local=st.from_regex(r"[a-z][a-z0-9._-]{0,15}", fullmatch=True),
    managers=st.frozensets(st.from_regex(r"[a-z]{1,8}@corp\.example", fullmatch=True), min_size=1),
)
def test_a_non_manager_is_always_limited_to_their_own_user(local, managers):
    email = f"{local}@elsewhere.example"
    viewer = resolve_viewer(AccessPolicy(managers), {"email": email, "is_logged_in": True})

    assert viewer is not None
    assert not viewer.is_manager
    assert viewer.user_filter == local == user_name_from_claims({"email": email})


def signed_in(lake: Path, page: str, monkeypatch: pytest.MonkeyPatch, email: str | None):
    monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
    monkeypatch.setenv("GPULEDGER_DASHBOARD_MANAGERS", f"{BOSS}, other-boss")
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.user = {"is_logged_in": email is not None, **({"email": email} if email else {})}
    at.switch_page(PAGES[page])
    return at.run()


def table_with(at: AppTest, column: str):
    [frame] = [d.value for d in at.dataframe if column in d.value.columns][:1]
    return frame


def test_a_non_manager_sees_only_their_own_jobs(demo_lake, names, monkeypatch):
    user = names["user"]
    at = signed_in(demo_lake, "jobs", monkeypatch, f"{user}@example.org")

    assert not at.exception
    jobs = table_with(at, "job_name")
    expected = (
        connect(demo_lake)
        .sql("SELECT count(*) FROM job_usage WHERE user = $u", params={"u": user})
        .fetchall()[0][0]
    )
    assert set(jobs["user"]) == {user}
    assert len(jobs) == expected


def test_a_non_manager_cannot_open_someone_elses_job(demo_lake, names, monkeypatch):
    other = (
        connect(demo_lake)
        .sql("SELECT job_id FROM job_usage WHERE user <> $u LIMIT 1", params={"u": names["user"]})
        .fetchall()[0][0]
    )
    monkeypatch.setenv("GPULEDGER_LAKE", str(demo_lake))
    monkeypatch.setenv("GPULEDGER_DASHBOARD_MANAGERS", BOSS)
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.user = {"is_logged_in": True, "email": f"{names['user']}@example.org"}
    at.session_state["job_id_input"] = other
    at.switch_page(PAGES["job"])
    at.run()

    assert not at.exception
    assert "No match" in at.info[0].value


@pytest.mark.parametrize("page", ["overview", "users", "alerts"])
def test_a_non_manager_sees_no_other_users_on_any_page(demo_lake, names, monkeypatch, page):
    at = signed_in(demo_lake, page, monkeypatch, f"{names['user']}@example.org")

    assert not at.exception
    users = {u for d in at.dataframe if "user" in d.value.columns for u in d.value["user"]}
    assert users <= {names["user"], None}
    assert users


def test_a_manager_sees_everyones_jobs(demo_lake, monkeypatch):
    at = signed_in(demo_lake, "jobs", monkeypatch, BOSS)

    jobs = table_with(at, "job_name")
    everyone = connect(demo_lake).sql("SELECT count(DISTINCT user) FROM job_usage").fetchall()
    assert len(set(jobs["user"])) == everyone[0][0]


def test_restricted_without_sign_in_configured_says_how_to_configure_it(demo_lake, monkeypatch):
    at = signed_in(demo_lake, "jobs", monkeypatch, None)

    assert not at.exception
    [error] = at.error
    assert "[auth]" in error.value
    assert not at.dataframe


def test_restricted_with_oidc_offers_sign_in_and_shows_no_data(demo_lake, monkeypatch):
    monkeypatch.setenv("GPULEDGER_LAKE", str(demo_lake))
    monkeypatch.setenv("GPULEDGER_DASHBOARD_MANAGERS", BOSS)
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.secrets["auth"] = {  # what an [auth] section in .streamlit/secrets.toml holds
        "redirect_uri": "http://localhost:8501/oauth2callback",
        "cookie_secret": "test-only",
        "client_id": "gpuledger",
        "client_secret": "x",
        "server_metadata_url": "https://idp.example/.well-known/openid-configuration",
    }
    at.user = {"is_logged_in": False}
    at.switch_page(PAGES["jobs"])
    at.run()

    assert not at.exception
    assert not at.error
    assert [b.label for b in at.button] == ["Sign in"]
    assert not at.dataframe
