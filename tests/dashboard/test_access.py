"""Access: managers see every job; a signed-in non-manager sees only their own (bound in SQL)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from app.access import (
    AccessPolicy,
    Denied,
    Viewer,
    policy_problem,
    resolve_viewer,
    user_name_from_claims,
)
from app.bench.dashboard_timing import PAGES
from app.cli import cli

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
BOSS = "boss@example.org"


NOW = dt.datetime(2026, 3, 2, 12, tzinfo=dt.UTC)
LATER = int((NOW + dt.timedelta(hours=1)).timestamp())  # an ID token's exp: valid for an hour
ISSUER = "https://login.example.org/realms/hpc"
CORP = AccessPolicy(frozenset({BOSS}), allowed_domains=frozenset({"example.org"}))


def token(**claims: object) -> dict[str, object]:
    """The claims of a good ID token from ISSUER, overridden by `claims` (None drops one)."""
    base: dict[str, object] = {
        "is_logged_in": True,
        "iss": ISSUER,
        "exp": LATER,
        "email": "alice@example.org",
        "email_verified": True,
    }
    return {k: v for k, v in (base | claims).items() if v is not None}


@pytest.mark.parametrize(
    ("policy", "claims", "expected"),
    [
        # open access: no sign-in, everyone sees everything
        (AccessPolicy(), None, Viewer(None, True)),
        (AccessPolicy(), {"email": "a@x"}, Viewer(None, True)),
        # restricted: nobody signed in -> no viewer
        (CORP, None, None),
        (CORP, {}, None),
        # a manager by verified e-mail, or by the user name of an allowed e-mail
        (CORP, token(email="Boss@Example.org"), Viewer("boss", True)),
        (
            AccessPolicy(frozenset({"carol"}), allowed_domains=frozenset({"x.org"})),
            token(email="carol@x.org"),
            Viewer("carol", True),
        ),
        # anyone else: their own jobs, named by the local part of their allowed e-mail
        (CORP, token(email="Alice@example.org"), Viewer("alice", False)),
        # a provider's preferred_username is only a name when the configuration says so
        (CORP, token(preferred_username="boss"), Viewer("alice", False)),
        (
            AccessPolicy(
                frozenset({BOSS}),
                allowed_issuers=frozenset({ISSUER}),
                user_claim="preferred_username",
            ),
            token(preferred_username="Al", email="alice@elsewhere.org"),
            Viewer("al", False),
        ),
        # the users map: a full verified e-mail address to its scheduler user
        (
            AccessPolicy(frozenset({"asmith"}), users={"ann.smith@partner.org": "asmith"}),
            token(email="Ann.Smith@partner.org"),
            Viewer("asmith", True),
        ),
        # an issuer alone is trusted for its e-mails' local parts (a private provider)
        (
            AccessPolicy(frozenset({BOSS}), allowed_issuers=frozenset({ISSUER + "/"})),
            token(email="bob@lab.example"),
            Viewer("bob", False),
        ),
    ],
)
def test_resolve_viewer(policy, claims, expected):
    assert resolve_viewer(policy, claims, NOW) == expected


@pytest.mark.parametrize(
    ("policy", "claims", "why"),
    [
        # the impersonation of issue #22: an outside account named like the manager
        (CORP, token(email="boss@gmail.com"), "gmail.com are not accepted"),
        (
            AccessPolicy(frozenset({"boss"}), allowed_domains=frozenset({"example.org"})),
            token(email="boss@gmail.com", preferred_username="boss"),
            "gmail.com are not accepted",
        ),
        # a token from another issuer
        (
            AccessPolicy(frozenset({BOSS}), allowed_issuers=frozenset({ISSUER})),
            token(iss="https://accounts.google.com", email=BOSS),
            "accounts.google.com are not accepted",
        ),
        (
            AccessPolicy(frozenset({BOSS}), allowed_issuers=frozenset({ISSUER})),
            token(iss=None, email=BOSS),
            "unnamed issuer",
        ),
        # an address the provider has not verified
        (CORP, token(email=BOSS, email_verified=False), "not verified"),
        (CORP, token(email=BOSS, email_verified="false"), "not verified"),
        # an expired token, or one without an expiry
        (CORP, token(email=BOSS, exp=int(NOW.timestamp())), "expired"),
        (CORP, token(email=BOSS, exp=int(NOW.timestamp()) - 3600), "expired"),
        (CORP, token(email=BOSS, exp=None), "no expiry"),
        (CORP, token(email=BOSS, exp="soon"), "no expiry"),
        # sign-in required and nothing says whose sign-in to trust: nobody, not even BOSS
        (AccessPolicy(frozenset({BOSS})), token(email=BOSS), "not set up"),
        # the configured user claim is missing
        (
            AccessPolicy(frozenset({BOSS}), allowed_issuers=frozenset({ISSUER}), user_claim="uid"),
            token(email=BOSS),
            "(uid)",
        ),
        # only a users map: an address not on it
        (
            AccessPolicy(frozenset({"asmith"}), users={"ann.smith@partner.org": "asmith"}),
            token(email="asmith@partner.org"),
            "not on this dashboard's list",
        ),
        # no e-mail at all
        (
            AccessPolicy(frozenset({BOSS}), allowed_issuers=frozenset({ISSUER})),
            token(email=None),
            "no e-mail",
        ),
    ],
)
def test_untrusted_sign_ins_are_denied_with_the_reason(policy, claims, why):
    denied = resolve_viewer(policy, claims, NOW)

    assert isinstance(denied, Denied)
    assert why in denied.reason


def test_a_policy_without_a_trust_anchor_is_named_by_its_problem():
    assert policy_problem(AccessPolicy(frozenset({BOSS}))) is not None
    assert policy_problem(AccessPolicy()) is None  # open access: nobody signs in
    assert policy_problem(CORP) is None


@given(
    local=st.from_regex(r"[a-z][a-z0-9._-]{0,15}", fullmatch=True),
    managers=st.frozensets(st.from_regex(r"[a-z]{1,8}@corp\.example", fullmatch=True), min_size=1),
)
def test_a_non_manager_is_always_limited_to_their_own_user(local, managers):
    email = f"{local}@elsewhere.example"
    policy = AccessPolicy(managers, allowed_domains=frozenset({"elsewhere.example"}))
    viewer = resolve_viewer(policy, token(email=email), NOW)

    assert isinstance(viewer, Viewer)
    assert not viewer.is_manager
    assert viewer.user_filter == local == user_name_from_claims({"email": email})


@given(
    local=st.from_regex(r"[a-z][a-z0-9._-]{0,15}", fullmatch=True),
    domain=st.from_regex(r"[a-z]{1,10}\.(com|net|io)", fullmatch=True),
)
def test_no_outside_account_gets_in_whatever_its_name(local, domain):
    policy = AccessPolicy(frozenset({local, BOSS}), allowed_domains=frozenset({"example.org"}))

    viewer = resolve_viewer(policy, token(email=f"{local}@{domain}", preferred_username=local), NOW)

    assert isinstance(viewer, Denied)


# Streamlit's st.user checks `exp` against the wall clock: a token valid until 2100
FAR_FUTURE = 4102444800


def streamlit_user(email: str | None) -> dict[str, object]:
    """What st.user holds for a signed-in `email` (None: nobody signed in)."""
    if email is None:
        return {"is_logged_in": False}
    return {"is_logged_in": True, "email": email, "email_verified": True, "exp": FAR_FUTURE}


def signed_in(lake: Path, page: str, monkeypatch: pytest.MonkeyPatch, email: str | None):
    monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
    monkeypatch.setenv("GPULEDGER_DASHBOARD_MANAGERS", f"{BOSS}, other-boss")
    monkeypatch.setenv("GPULEDGER_DASHBOARD_ALLOWED_DOMAINS", "example.org")
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.user = streamlit_user(email)
    at.switch_page(PAGES[page])
    return at.run()


def table_with(at: AppTest, column: str):
    [frame] = [d.value for d in at.dataframe if column in d.value.columns][:1]
    return frame


def test_a_non_manager_sees_only_their_own_jobs(demo_lake, demo_con, names, monkeypatch):
    user = names["user"]
    at = signed_in(demo_lake, "jobs", monkeypatch, f"{user}@example.org")

    assert not at.exception
    jobs = table_with(at, "job_name")
    expected = demo_con.sql(
        "SELECT count(*) FROM job_usage WHERE user = $u", params={"u": user}
    ).fetchall()[0][0]
    assert set(jobs["user"]) == {user}
    assert len(jobs) == expected


def test_a_non_manager_cannot_open_someone_elses_job(demo_lake, demo_con, names, monkeypatch):
    other = demo_con.sql(
        "SELECT job_id FROM job_usage WHERE user <> $u LIMIT 1", params={"u": names["user"]}
    ).fetchall()[0][0]
    monkeypatch.setenv("GPULEDGER_LAKE", str(demo_lake))
    monkeypatch.setenv("GPULEDGER_DASHBOARD_MANAGERS", BOSS)
    monkeypatch.setenv("GPULEDGER_DASHBOARD_ALLOWED_DOMAINS", "example.org")
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.user = streamlit_user(f"{names['user']}@example.org")
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


def test_a_manager_sees_everyones_jobs(demo_lake, demo_con, monkeypatch):
    at = signed_in(demo_lake, "jobs", monkeypatch, BOSS)

    jobs = table_with(at, "job_name")
    everyone = demo_con.sql("SELECT count(DISTINCT user) FROM job_usage").fetchall()
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


@pytest.mark.parametrize(
    ("email", "domains", "why"),
    [
        ("boss@gmail.com", "example.org", "gmail.com are not accepted"),
        (BOSS, "", "not set up"),  # sign-in required, nothing to trust: nobody gets in
    ],
)
def test_a_denied_sign_in_sees_why_and_no_data(demo_lake, monkeypatch, email, domains, why):
    monkeypatch.setenv("GPULEDGER_LAKE", str(demo_lake))
    monkeypatch.setenv("GPULEDGER_DASHBOARD_MANAGERS", BOSS)
    monkeypatch.setenv("GPULEDGER_DASHBOARD_ALLOWED_DOMAINS", domains)
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.user = streamlit_user(email)
    at.switch_page(PAGES["jobs"])
    at.run()

    assert not at.exception
    [error] = at.error
    assert why in error.value.replace("\\", "")
    assert not at.dataframe


def test_config_check_refuses_sign_in_with_nothing_to_trust(tmp_path):
    cfg = tmp_path / "g.toml"
    cfg.write_text(f'[dashboard]\nmanagers = ["{BOSS}"]\n', encoding="utf-8")

    refused = CliRunner().invoke(cli, ["config", "check", "--config", str(cfg)], env={})
    cfg.write_text(
        f'[dashboard]\nmanagers = ["{BOSS}"]\nallowed_domains = ["example.org"]\n',
        encoding="utf-8",
    )
    accepted = CliRunner().invoke(cli, ["config", "check", "--config", str(cfg)], env={})

    assert refused.exit_code == 1
    [last] = refused.output.strip().splitlines()[-1:]
    assert last.startswith("Error: dashboard.managers is set (sign-in required) but none of")
    assert "Traceback" not in refused.output
    assert accepted.exit_code == 0, accepted.output
    assert "allowed_domains = ['example.org']" in accepted.output


def test_a_user_cannot_find_where_anothers_job_ran_by_searching_the_health_page(
    plain_lake, tmp_path, monkeypatch
):
    # the hardware findings are everyone's, but searched by a job id, user or account (which
    # the feed matches) a user learned the GPU another user's job ran on
    import shutil

    from tests.dashboard.factories import make_finding, write_rows

    lake = tmp_path / "lake"
    shutil.copytree(plain_lake, lake)
    finding = make_finding(
        "f-xid", detector="xid_hardware", severity="critical", subject_kind="gpu",
        node="gpu-002", gpu_uuid="GPU-x", message="XID 79: fell off the bus",
    ) | {"job_id": "4242", "user": "carol", "account": "physics"}  # fmt: skip
    write_rows(lake, "findings", [finding], "handmade")

    def hardware(email: str, search: str) -> list[str]:
        monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
        monkeypatch.setenv("GPULEDGER_DASHBOARD_MANAGERS", BOSS)
        monkeypatch.setenv("GPULEDGER_DASHBOARD_ALLOWED_DOMAINS", "example.org")
        at = AppTest.from_file(str(ENTRY), default_timeout=60)
        at.user = streamlit_user(email)
        at.session_state["health_search"] = search
        at.switch_page(PAGES["health"])
        at.run()
        assert not at.exception, at.exception
        frames = [d.value for d in at.dataframe if "detector" in d.value.columns]
        return [g for f in frames for g in f["gpu_uuid"].tolist()]

    assert hardware("alice@example.org", "4242") == []
    assert hardware("alice@example.org", "carol") == []
    assert hardware("alice@example.org", "gpu-002") == ["GPU-x"]  # the hardware's own names
    assert hardware(BOSS, "4242") == ["GPU-x"]


def test_a_jobs_owner_sees_the_hardware_findings_about_their_job(plain_lake, tmp_path, monkeypatch):
    # a GPU's finding about a job names no user: bound to the viewer, the owner's Job page left
    # out the XID that ended their job (the manager's listed it)
    import shutil

    from tests.dashboard.factories import make_finding, write_rows
    from warehouse.lake import Lake

    lake = tmp_path / "lake"
    shutil.copytree(plain_lake, lake)
    with Lake.at(lake).connect() as con:
        [(job_id, user)] = con.sql("SELECT job_id, user FROM job_usage LIMIT 1").fetchall()
    finding = make_finding(
        "f-xid", detector="xid_hardware", severity="critical", subject_kind="gpu",
        node="gpu-002", gpu_uuid="GPU-x", message="XID 79: fell off the bus",
    ) | {"job_id": job_id, "user": None}  # fmt: skip
    write_rows(lake, "findings", [finding], "handmade")
    monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
    monkeypatch.setenv("GPULEDGER_DASHBOARD_MANAGERS", BOSS)
    monkeypatch.setenv("GPULEDGER_DASHBOARD_ALLOWED_DOMAINS", "example.org")
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.user = streamlit_user(f"{user}@example.org")
    at.session_state["job_id_input"] = job_id
    at.switch_page(PAGES["job"])
    at.run()

    assert not at.exception, at.exception
    detectors = [
        d for f in at.dataframe if "detector" in f.value.columns for d in f.value["detector"]
    ]
    assert "xid_hardware" in detectors
