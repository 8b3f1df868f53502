"""The HTTP API through FastAPI's TestClient on a hand-made lake: who may read what, and how
it answers (JSON bodies, JSON errors with their status, the OpenAPI document)."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from fastapi.testclient import TestClient

from app.access import AccessPolicy
from app.api.reader import LakeReader
from app.api.server import create_api_app
from app.api.tokens import TokensFile
from app.commands.job import render_json
from app.config import ConfigError, Secret, load_config
from detectors.job_report import load_job_report
from tests.api import lake as L
from tests.marts import rows as r
from warehouse.connection import connect
from warehouse.errors import DamagedFile
from warehouse.lake import Lake

T = TypeVar("T")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return L.shared(tmp_path_factory)


@pytest.fixture(scope="module")
def client(root, tmp_path_factory):
    app = create_api_app(Lake.at(root), L.settings(tmp_path_factory.mktemp("etc")))
    with TestClient(app) as client:
        yield client


def error_of(response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "status"} and body["status"] == status
    assert L.ALICE not in response.text and L.BOSS not in response.text
    return str(body["error"])


def test_no_token_is_401_with_a_bearer_challenge(client):
    response = client.get("/api/v1/jobs/della/a1")

    assert "Bearer" in error_of(response, 401)
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    [f"Bearer {L.ALICE}x", f"Bearer {L.ALICE[:-1]}", "Bearer ", f"Basic {L.ALICE}", L.ALICE],
)
def test_a_bad_token_is_401(client, header):
    error_of(client.get("/api/v1/jobs/della/a1", headers={"Authorization": header}), 401)


def test_a_user_is_told_the_same_of_another_users_job_as_of_no_job(client):
    """Which job ids exist is not a user's to learn: another's job and a job that does not
    exist get one answer (a 403 for one and a 404 for the other listed them)."""
    others = error_of(client.get("/api/v1/jobs/della/b1", headers=L.bearer(L.ALICE)), 404)
    none = error_of(client.get("/api/v1/jobs/della/zz9", headers=L.bearer(L.ALICE)), 404)

    assert others == "no job 'b1' of alice's on 'della'"
    assert none == "no job 'zz9' of alice's on 'della'"
    assert client.get("/api/v1/jobs/della/b1", headers=L.bearer(L.BOSS)).status_code == 200


def test_the_owner_gets_the_report_of_gpuledger_job_format_json(client, root):
    response = client.get("/api/v1/jobs/della/a1", headers=L.bearer(L.ALICE))
    expected = render_json(load_job_report(connect(root), "a1", "della"))

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.text == expected
    body = response.json()
    assert body["job"]["user"] == "alice"
    assert body["job"]["alloc_gpu_h"] == pytest.approx(1.0)
    assert body["gpus"][0]["busy_mean"] == pytest.approx(0.8, rel=1e-6)
    assert [f["finding_id"] for f in body["findings"]] == ["f-a1"]


def test_a_manager_gets_anyones_job_and_a_user_token_names_its_user_lower_case(client):
    boss = client.get("/api/v1/jobs/della/b1", headers=L.bearer(L.BOSS))
    bob = client.get("/api/v1/jobs/della/b1", headers=L.bearer(L.BOB))  # listed as "Bob"

    assert boss.status_code == 200 and boss.json()["job"]["user"] == "bob"
    assert bob.status_code == 200 and bob.text == boss.text


def test_an_unknown_job_or_cluster_is_404(client):
    assert (
        "no job 'zz'"
        in error_of(client.get("/api/v1/jobs/della/zz", headers=L.bearer(L.BOSS)), 404).lower()
    )
    assert "known: della" in error_of(
        client.get("/api/v1/usage?cluster=nope", headers=L.bearer(L.BOSS)), 404
    )


def test_a_users_job_list_is_their_own_newest_first(client):
    mine = client.get("/api/v1/jobs", headers=L.bearer(L.ALICE)).json()
    everyone = client.get("/api/v1/jobs", headers=L.bearer(L.BOSS)).json()
    limited = client.get("/api/v1/jobs?limit=1&user=bob", headers=L.bearer(L.BOSS)).json()

    assert mine["user"] == "alice"
    assert [j["job_id"] for j in mine["jobs"]] == ["a2", "a1"]
    assert [j["job_id"] for j in everyone["jobs"]] == ["b1", "a2", "a1"]
    assert [j["job_id"] for j in limited["jobs"]] == ["b1"]
    assert mine["jobs"][0]["runtime_s"] == pytest.approx(7200.0)


def test_a_user_asking_for_someone_elses_jobs_gets_403(client):
    error_of(client.get("/api/v1/jobs?user=bob", headers=L.bearer(L.ALICE)), 403)
    ok = client.get("/api/v1/jobs?user=ALICE", headers=L.bearer(L.ALICE))
    assert ok.status_code == 200 and len(ok.json()["jobs"]) == 2


def test_jobs_since_and_until_bound_the_window(client):
    # b1 starts at 02:00; until 01:30 leaves a1 (00:00) and a2 (01:00); since 01:30 drops a1
    late = client.get("/api/v1/jobs?since=2024-03-01T01:30:00Z", headers=L.bearer(L.BOSS))
    early = client.get("/api/v1/jobs?until=2024-03-01T01:30:00", headers=L.bearer(L.BOSS))

    assert [j["job_id"] for j in late.json()["jobs"]] == ["b1", "a2"]
    assert [j["job_id"] for j in early.json()["jobs"]] == ["a2", "a1"]


def test_a_window_that_ends_before_it_starts_is_said_as_asked(client):
    # until=2024-03-01 stands for the midnight after it: the answer said "since
    # 2024-03-02T00:00 is not before until 2024-03-02T00:00", not what was asked
    asked = "/api/v1/jobs?since=2024-03-02&until=2024-03-01"
    message = error_of(client.get(asked, headers=L.bearer(L.BOSS)), 422)

    assert message == "since: '2024-03-02' is not before until '2024-03-01' (the end of that day)"


def test_usage_is_scoped_to_the_user_for_a_user_and_whole_for_a_manager(client):
    alice = client.get("/api/v1/usage?group_by=user", headers=L.bearer(L.ALICE)).json()
    boss = client.get("/api/v1/usage?group_by=user", headers=L.bearer(L.BOSS)).json()

    assert alice["user"] == "alice"
    assert [(r["user"], r["alloc_gpu_h"]) for r in alice["rows"]] == [("alice", pytest.approx(3.0))]
    # a1 1 GPU-h + a2 2 GPU-h for alice, b1 1 GPU-h for bob; the day the data ends on
    assert [(r["user"], r["alloc_gpu_h"]) for r in boss["rows"]] == [
        ("alice", pytest.approx(3.0)),
        ("bob", pytest.approx(1.0)),
    ]
    assert boss["last_day"] == "2024-03-01"
    # only a1's samples carried power: bob's energy is unknown, not 0.0 kWh
    energy = {r["user"]: r["energy_kwh"] for r in boss["rows"]}
    assert energy == {"alice": pytest.approx(0.4, rel=1e-3), "bob": None}


@pytest.mark.parametrize(
    ("group_by", "expected"),
    [
        ("cluster", [("della", 4.0, 3)]),
        ("account", [("physics", 3.0, 2), ("chem", 1.0, 1)]),
        ("partition", [("gpu", 3.0, 2), ("debug", 1.0, 1)]),
    ],
)
def test_usage_groups(client, group_by, expected):
    body = client.get(f"/api/v1/usage?group_by={group_by}", headers=L.bearer(L.BOSS)).json()

    assert [(r[group_by], r["alloc_gpu_h"], r["jobs"]) for r in body["rows"]] == [
        (name, pytest.approx(h), n) for name, h, n in expected
    ]
    # busy 0.8 for 1 h on a1 and 0.5 for 1 h on b1; a2 never active
    effective = sum(r["effective_gpu_h"] for r in body["rows"])
    assert effective == pytest.approx(1.3, rel=1e-6)


def test_findings_a_user_sees_only_their_own(client):
    alice = client.get("/api/v1/findings", headers=L.bearer(L.ALICE)).json()
    boss = client.get("/api/v1/findings", headers=L.bearer(L.BOSS)).json()

    assert [f["finding_id"] for f in alice["findings"]] == ["f-a1"]
    assert sorted(f["finding_id"] for f in boss["findings"]) == ["f-a1", "f-b1", "f-node"]


def test_recommendations_are_for_managers(client):
    error_of(client.get("/api/v1/recommendations", headers=L.bearer(L.ALICE)), 403)
    response = client.get("/api/v1/recommendations", headers=L.bearer(L.BOSS))
    assert response.status_code == 200 and response.json() == {"recommendations": []}


def test_occupancy_series_ends_with_the_data(client):
    body = client.get("/api/v1/occupancy", headers=L.bearer(L.ALICE)).json()
    series = body["series"]

    assert series and {row["cluster"] for row in series} == {"della"}
    assert body["until"].startswith("2024-03-01T03:00")  # the end of the data, not today
    # 00:00-01:00 one job on one GPU, busy: one active GPU
    assert series[0]["active"] == pytest.approx(1.0)


def test_occupancy_comes_in_pages_of_at_most_limit_buckets(client):
    """A window from 1970 returned every 5-minute bucket of the lake's history in one answer."""
    whole = client.get("/api/v1/occupancy", headers=L.bearer(L.ALICE)).json()
    first = client.get("/api/v1/occupancy?limit=10", headers=L.bearer(L.ALICE)).json()
    rest = client.get(
        "/api/v1/occupancy", params={"since": first["next_since"]}, headers=L.bearer(L.ALICE)
    ).json()

    assert len(whole["series"]) == 36 and "next_since" not in whole  # 3 h of 5-minute buckets
    assert first["series"] == whole["series"][:10]
    at = dt.datetime.fromisoformat
    assert at(first["next_since"]) == at(whole["series"][10]["bucket"])
    assert rest["series"] == whole["series"][10:] and "next_since" not in rest


def test_the_last_end_date_is_the_one_the_error_names(client):
    refused = client.get("/api/v1/jobs?until=9999-01-01", headers=L.bearer(L.BOSS))

    assert error_of(refused, 422) == "until: '9999-01-01' lies outside 1970-01-01 … 9998-12-31"
    assert client.get("/api/v1/jobs?until=9998-12-31", headers=L.bearer(L.BOSS)).status_code == 200


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("/api/v1/usage?since=yesterday", "since"),
        ("/api/v1/occupancy?until=2024-13-01", "until"),
        ("/api/v1/jobs?limit=0", "limit"),
        ("/api/v1/jobs?limit=many", "limit"),
        ("/api/v1/usage?group_by=node", "group_by"),
        ("/api/v1/findings?severity=loud", "severity"),
        ("/api/v1/usage?since=2024-03-02&until=2024-03-01", "since"),
        # past the calendar's ends (an end date's next day, a time's offset, the default
        # window before it): an OverflowError was a 500
        ("/api/v1/jobs?until=9999-12-31", "until"),
        ("/api/v1/usage?until=0001-01-01", "until"),
        ("/api/v1/findings?until=0001-01-01T00:00:00%2B01:00", "until"),
        ("/api/v1/occupancy?since=9999-12-31T23:59:59-01:00", "since"),
    ],
)
def test_a_bad_parameter_is_a_422_naming_it(client, query, named):
    assert error_of(client.get(query, headers=L.bearer(L.BOSS)), 422).startswith(named)


def test_a_hostile_parameter_is_only_a_value(client):
    response = client.get("/api/v1/jobs", params={"user": "x' OR '1'='1"}, headers=L.bearer(L.BOSS))
    assert response.status_code == 200 and response.json()["jobs"] == []


def test_unknown_endpoints_and_other_methods_are_json_errors(client):
    assert "openapi.json" in error_of(client.get("/api/v1/nothing", headers=L.bearer(L.BOSS)), 404)
    assert "read-only" in error_of(client.post("/api/v1/jobs", headers=L.bearer(L.BOSS)), 405)
    # (OPTIONS and TRACE got the framework's {"detail": …}, HEAD an Allow of PUT, DELETE …)
    for method in ("OPTIONS", "TRACE", "PATCH"):
        for path in ("/api/v1/whoami", "/api/v1/nothing"):
            response = client.request(method, path, headers=L.bearer(L.BOSS))
            assert "read-only" in error_of(response, 405)
            assert response.headers["allow"] == "GET"
    head = client.head("/api/v1/nothing", headers=L.bearer(L.BOSS))
    assert head.status_code == 405 and head.headers["allow"] == "GET"


def test_an_error_echoes_at_most_a_line_of_what_it_was_asked(client):
    # a 60,000-character job id came back as a 60 KB answer
    response = client.get(f"/api/v1/jobs/della/{'x' * 60000}", headers=L.bearer(L.BOSS))

    message = error_of(response, 404)
    assert len(message) <= 300 and message.endswith("…")


def test_the_openapi_document_lists_the_routes_and_bearer_auth(client):
    response = client.get("/api/v1/openapi.json")
    doc = json.loads(response.text)

    assert response.status_code == 200
    assert doc["openapi"].startswith("3.")
    assert set(doc["paths"]) == {
        "/api/v1/whoami",
        "/api/v1/clusters",
        "/api/v1/jobs",
        "/api/v1/jobs/{cluster}/{job_id}",
        "/api/v1/usage",
        "/api/v1/findings",
        "/api/v1/recommendations",
        "/api/v1/occupancy",
    }
    assert all(set(ops) == {"get"} for ops in doc["paths"].values())
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    params = {p["name"] for p in doc["paths"]["/api/v1/usage"]["get"]["parameters"]}
    assert {"group_by", "since", "until", "cluster"} <= params


def test_findings_of_several_clusters_are_cut_after_the_most_severe_come_first(
    tmp_path_factory,
):
    # each cluster's feed was cut at `limit` and the lists joined in cluster order: della's
    # three warnings filled limit=2, and zeta's critical finding was never shown
    from tests.marts import rows as r
    from warehouse.attribution import AttributionConfig, build_marts

    root = L.shared(tmp_path_factory)
    zeta = [row | {"cluster": "zeta"} for row in r.samples(range(0, 600, 30))]
    r.land(root, "gpu_samples", zeta, batch_id="zeta")
    critical = {
        "cluster": "zeta",
        "finding_id": "f-zeta",
        "detector": "xid_fatal",
        "severity": "critical",
        "subject_kind": "gpu",
        "subject_id": "g001/0",
        "job_id": None,
        "user": None,
        "node": "g001",
        "start_ts": r.at(0),
        "detected_ts": r.at(300),
        "message": "fell off the bus",
    }
    r.land(root, "findings", [critical], batch_id="zeta")
    build_marts(connect(root), root, AttributionConfig())
    app = create_api_app(Lake.at(root), L.settings(tmp_path_factory.mktemp("etc")))
    with TestClient(app) as client:
        body = client.get("/api/v1/findings?limit=2", headers=L.bearer(L.BOSS)).json()

    assert [(f["cluster"], f["severity"]) for f in body["findings"]] == [
        ("zeta", "critical"),
        ("della", "warn"),
    ]


def test_the_router_mounts_into_another_application(root, tmp_path):
    from fastapi import FastAPI

    from app.api import build_router

    host = FastAPI()

    @host.get("/metrics")
    def metrics() -> dict[str, str]:
        return {"up": "1"}

    host.include_router(build_router(Lake.at(root), L.settings(tmp_path)))
    with TestClient(host) as client:
        assert client.get("/metrics").json() == {"up": "1"}
        assert client.get("/api/v1/whoami", headers=L.bearer(L.BOSS)).json() == {
            "user": "boss",
            "manager": True,
        }
        error_of(client.get("/api/v1/jobs?limit=x", headers=L.bearer(L.BOSS)), 422)
        assert "/api/v1/jobs" in client.get("/api/v1/openapi.json").json()["paths"]


# ---------------------------------------------------------------- a trusted proxy's header

POLICY = AccessPolicy(
    managers=frozenset({"boss"}),
    allowed_domains=frozenset({"corp.example"}),
    users={"ann.lee@corp.example": "alice"},
)


@pytest.fixture(scope="module")
def proxied(root, tmp_path_factory):
    folder = tmp_path_factory.mktemp("proxy")
    settings = L.settings(
        folder,
        trusted_user_header="X-Remote-User",
        trusted_proxies=frozenset({"testclient"}),  # the TestClient's peer address
        policy=POLICY,
    )
    with TestClient(create_api_app(Lake.at(root), settings)) as client:
        yield client


@pytest.mark.parametrize(
    ("remote_user", "whoami"),
    [
        ("alice", {"user": "alice", "manager": False}),
        ("ann.lee@corp.example", {"user": "alice", "manager": False}),
        ("bob@corp.example", {"user": "bob", "manager": False}),
        ("BOSS", {"user": "boss", "manager": True}),
    ],
)
def test_a_trusted_proxys_user_maps_as_sign_ins_do(proxied, remote_user, whoami):
    response = proxied.get("/api/v1/whoami", headers={"X-Remote-User": remote_user})

    assert response.json() == whoami


def test_a_trusted_proxy_on_a_dual_stack_listener_is_known_by_its_ipv4_address(root, tmp_path):
    # `gpuledger serve --address ::` sees 127.0.0.1 as ::ffff:127.0.0.1: the proxy on this
    # host (trusted_proxies 127.0.0.1, the default) was refused
    settings = L.settings(
        tmp_path, trusted_user_header="X-Remote-User", trusted_proxies=frozenset({"127.0.0.1"})
    )
    app = create_api_app(Lake.at(root), settings)
    with TestClient(app, client=("::ffff:127.0.0.1", 50000)) as client:
        response = client.get("/api/v1/whoami", headers={"X-Remote-User": "alice"})
    with TestClient(app, client=("::ffff:10.0.0.9", 50000)) as client:
        other = client.get("/api/v1/whoami", headers={"X-Remote-User": "alice"})

    assert response.json() == {"user": "alice", "manager": False}
    assert other.status_code == 401


def test_a_proxy_user_of_another_domain_is_refused(proxied):
    headers = {"X-Remote-User": "mallory@elsewhere.example"}
    assert "elsewhere.example" in error_of(proxied.get("/api/v1/jobs", headers=headers), 403)


def test_the_proxy_user_reads_only_their_jobs(proxied):
    headers = {"X-Remote-User": "ann.lee@corp.example"}
    assert proxied.get("/api/v1/jobs/della/a1", headers=headers).status_code == 200
    error_of(proxied.get("/api/v1/jobs/della/b1", headers=headers), 404)


def test_the_header_from_an_untrusted_address_is_ignored(root, tmp_path):
    settings = L.settings(
        tmp_path,
        trusted_user_header="X-Remote-User",
        trusted_proxies=frozenset({"127.0.0.1"}),
        policy=POLICY,
    )
    with TestClient(create_api_app(Lake.at(root), settings)) as client:
        response = client.get("/api/v1/whoami", headers={"X-Remote-User": "boss"})
        error_of(response, 401)


def test_with_a_proxy_secret_the_header_is_believed_only_with_it(root, tmp_path):
    """On the proxy's host every local user reaches 127.0.0.1 and can send the header: with
    `[api] proxy_secret`, only the proxy, which also sends the secret, names the user."""
    secret = "proxy-secret-0123456789abcdef"
    settings = L.settings(
        tmp_path,
        trusted_user_header="X-Remote-User",
        trusted_proxies=frozenset({"testclient"}),
        policy=POLICY,
        proxy_secret=Secret(secret),
    )
    with TestClient(create_api_app(Lake.at(root), settings)) as client:

        def whoami(**headers: str) -> object:
            return client.get("/api/v1/whoami", headers={"X-Remote-User": "boss", **headers})

        local_user = whoami()
        wrong = whoami(**{"X-Gpuledger-Proxy-Secret": secret[:-1] + "x"})
        proxy = whoami(**{"X-Gpuledger-Proxy-Secret": secret})

    error_of(local_user, 401)
    error_of(wrong, 401)
    assert proxy.json() == {"user": "boss", "manager": True}


def test_a_short_proxy_secret_is_refused_without_showing_it(tmp_path):
    (tmp_path / "g.toml").write_text('[api]\ntrusted_user_header = "X-Remote-User"\n')
    env = {"GPULEDGER_API_PROXY_SECRET": "short"}

    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "g.toml", environ=env)

    assert "api.proxy_secret: expected at least 16 ASCII characters" in str(err.value)
    assert "short" not in str(err.value).split("(")[-1]


def test_a_wrong_token_is_401_even_from_a_trusted_proxy(proxied):
    headers = {"X-Remote-User": "boss", "Authorization": "Bearer not-a-token-at-all-x"}
    error_of(proxied.get("/api/v1/whoami", headers=headers), 401)


def test_the_user_header_sent_twice_is_refused(proxied):
    # A proxy that adds its header beside the client's (Apache's `RequestHeader add`) passes
    # the client's first: the first copy was taken, and alice named herself the manager.
    headers = [("X-Remote-User", "boss"), ("X-Remote-User", "alice")]
    response = proxied.get("/api/v1/whoami", headers=headers)

    assert "sent 2 times" in error_of(response, 400)


def test_a_basic_sign_in_the_proxy_passes_on_is_no_token(proxied, client):
    # Apache's `AuthType Basic` passes the browser's Authorization header on: its users were
    # all refused ("expected 'Authorization: Bearer <token>'"). From anyone else it stays 401.
    basic = {"Authorization": "Basic YWxpY2U6cGFzc3dvcmQ="}
    response = proxied.get("/api/v1/whoami", headers={**basic, "X-Remote-User": "alice"})

    assert response.json() == {"user": "alice", "manager": False}
    error_of(proxied.get("/api/v1/whoami", headers=basic), 401)
    error_of(client.get("/api/v1/whoami", headers={**basic, "X-Remote-User": "alice"}), 401)


@pytest.mark.parametrize("written", ["0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"])
def test_a_trusted_proxy_written_in_another_form_is_its_address(root, tmp_path, written):
    (tmp_path / "g.toml").write_text(
        f'[api]\ntrusted_user_header = "X-Remote-User"\ntrusted_proxies = ["{written}"]\n'
    )
    from app.api.settings import ApiSettings

    proxies = ApiSettings.from_config(load_config(tmp_path / "g.toml")).trusted_proxies
    settings = L.settings(tmp_path, trusted_user_header="X-Remote-User", trusted_proxies=proxies)
    peer = "::1" if written.startswith("0:") else "127.0.0.1"
    with TestClient(create_api_app(Lake.at(root), settings), client=(peer, 50000)) as client:
        response = client.get("/api/v1/whoami", headers={"X-Remote-User": "alice"})

    assert response.json() == {"user": "alice", "manager": False}


# ---------------------------------------------------------------- a lake that cannot be read


class DamagedLake(LakeReader):
    """A lake whose every read meets a damaged file (or, `crash`, a bug of ours)."""

    def __init__(self, root: Path, crash: bool = False) -> None:
        super().__init__(Lake.at(root))
        self.crash = crash

    def read(self, work: Callable[[Any], T]) -> T:
        if self.crash:
            raise RuntimeError("secret internals")
        raise DamagedFile(self.lake.root / "jobs" / "part-0.parquet", "bad data page")


def test_a_damaged_lake_file_is_a_503_naming_it_and_the_server_still_starts(root, tmp_path):
    app = create_api_app(Lake.at(root), L.settings(tmp_path), reader=DamagedLake(root))
    with TestClient(app) as client:  # the warm-up at start-up met it too: logged, not fatal
        message = error_of(client.get("/api/v1/jobs", headers=L.bearer(L.BOSS)), 503)
    assert "part-0.parquet" in message


def test_a_damaged_lake_file_is_not_named_to_a_user(root, tmp_path):
    # the path under the lake and DuckDB's words are told to managers, as /healthz does
    app = create_api_app(Lake.at(root), L.settings(tmp_path), reader=DamagedLake(root))
    with TestClient(app) as client:
        message = error_of(client.get("/api/v1/jobs", headers=L.bearer(L.ALICE)), 503)
    assert "parquet" not in message and str(root) not in message
    assert "cannot be read" in message


def test_an_unexpected_error_is_a_500_that_tells_nothing(root, tmp_path):
    app = create_api_app(Lake.at(root), L.settings(tmp_path), reader=DamagedLake(root, crash=True))
    with TestClient(app) as client:
        message = error_of(client.get("/api/v1/jobs", headers=L.bearer(L.BOSS)), 500)
    assert "secret" not in message


def test_the_lake_is_opened_and_warmed_before_the_first_request(root, tmp_path):
    reader = LakeReader(Lake.at(root))
    with TestClient(create_api_app(Lake.at(root), L.settings(tmp_path), reader=reader)):
        assert reader.generation == 1  # opened by the router's lifespan, no request yet


def test_a_token_revoked_in_the_file_is_refused_at_once_and_a_broken_file_is_503(root, tmp_path):
    path = L.tokens_file(tmp_path)
    app = create_api_app(Lake.at(root), L.settings(tmp_path, tokens=TokensFile.open(path)))
    with TestClient(app) as client:
        assert client.get("/api/v1/whoami", headers=L.bearer(L.BOB)).status_code == 200

        path.write_text(f"{L.ALICE} alice\n", encoding="utf-8")  # Bob's token revoked
        assert "not valid" in error_of(client.get("/api/v1/whoami", headers=L.bearer(L.BOB)), 401)
        assert client.get("/api/v1/whoami", headers=L.bearer(L.ALICE)).status_code == 200

        os.chmod(path, 0o644)
        response = client.get("/api/v1/whoami", headers=L.bearer(L.ALICE))
        assert "tokens file is not usable" in error_of(response, 503)


JUDY = "judy-token-0123456789abcdef"
_FINDING = {
    "cluster": r.CLUSTER,
    "finding_id": "f-j1",
    "detector": "partial_idle",
    "severity": "warn",
    "subject_kind": "job",
    "start_ts": r.at(0),
    "detected_ts": r.at(3600.0),
    "message": "about j1",
}


def test_a_user_name_matches_in_any_case(tmp_path):
    """The scheduler records `Judy`; her token (a proxy, a sign-in) names her `judy`, lower
    case: she sees her jobs, usage and findings, and the report of her job."""
    root = tmp_path / "lake"
    r.land(root, "findings", [{**_FINDING, "job_id": "j1", "subject_id": "j1", "user": "Judy"}])
    r.build_lake(
        root,
        samples=r.samples(range(0, 3600, 30), engine_active=0.5),
        jobs=[r.job("j1", 0, 3600.0, user="Judy")],
        job_gpus=[r.job_gpu("j1", 0, 3600.0)],
    )
    folder = tmp_path / "etc"
    folder.mkdir()
    tokens = folder / "tokens"
    tokens.write_text(f"{JUDY} Judy\n", encoding="utf-8")
    os.chmod(tokens, 0o600)
    app = create_api_app(Lake.at(root), L.settings(folder, tokens=TokensFile.open(tokens)))
    with TestClient(app) as judy:
        get = lambda url: judy.get(url, headers=L.bearer(JUDY)).json()  # noqa: E731

        assert get("/api/v1/whoami")["user"] == "judy"
        assert [j["job_id"] for j in get("/api/v1/jobs")["jobs"]] == ["j1"]
        assert [row["user"] for row in get("/api/v1/usage?group_by=user")["rows"]] == ["Judy"]
        assert [f["job_id"] for f in get("/api/v1/findings")["findings"]] == ["j1"]
        assert get("/api/v1/jobs/della/j1")["job"]["user"] == "Judy"


def test_occupancy_pages_of_several_clusters_hold_each_bucket_once(tmp_path):
    """Each cluster cut at its own `limit` buckets, with one next_since, repeated a later
    cluster's buckets on the next page (a client joining the pages counted them twice)."""
    other = {"cluster": "other"}
    r.build_lake(
        tmp_path / "lake",
        samples=r.samples(range(0, 3 * 3600, 60), engine_active=0.5)
        + [s | other for s in r.samples(range(3600, 4 * 3600, 60), engine_active=0.5)],
        jobs=[r.job("j1", 0, 3 * 3600.0), r.job("j2", 3600.0, 4 * 3600.0) | other],
        job_gpus=[r.job_gpu("j1", 0, 3 * 3600.0), r.job_gpu("j2", 3600.0, 4 * 3600.0) | other],
    ).close()
    folder = tmp_path / "etc"
    folder.mkdir()
    app = create_api_app(Lake.at(tmp_path / "lake"), L.settings(folder))
    with TestClient(app) as client:

        def page(**params: object) -> dict[str, Any]:
            body: dict[str, Any] = client.get(
                "/api/v1/occupancy",
                params={"since": "2024-03-01", **params},
                headers=L.bearer(L.BOSS),
            ).json()
            return body

        whole = page()
        pages, params = [], {"limit": 15}
        while True:
            pages.append(page(**params))
            if "next_since" not in pages[-1]:
                break
            params = {"limit": 15, "since": pages[-1]["next_since"]}

    key = [(row["cluster"], row["bucket"]) for p in pages for row in p["series"]]
    assert len(key) == len(set(key))  # no bucket twice
    assert sorted(key) == sorted((row["cluster"], row["bucket"]) for row in whole["series"])
    assert len(pages) > 2


# ---------------------------------------------------------------- caches follow the lake


def test_a_client_that_only_polls_clusters_and_one_report_sees_the_lake_change(
    tmp_path_factory, tmp_path
):
    # The probe: /clusters and a job's report are cached per opening of the lake, and only a
    # read looked at its files again: a new cluster stayed "no cluster 'two'" (404) and a new
    # finding out of the report for as long as nobody asked anything else.
    root = L.shared(tmp_path_factory, into=tmp_path / "lake")
    now = [0.0]
    reader = LakeReader(Lake.at(root), refresh_s=60.0, clock=lambda: now[0])
    app = create_api_app(Lake.at(root), L.settings(tmp_path), reader=reader)
    with TestClient(app) as client:

        def clusters() -> list[str]:
            response = client.get("/api/v1/clusters", headers=L.bearer(L.BOSS))
            return [c["cluster"] for c in response.json()["clusters"]]

        assert clusters() == ["della"]
        r.land(root, "jobs", [r.job("t1", 0, L.H) | {"cluster": "two"}], batch_id="two")
        now[0] = 61.0
        clusters()  # stale: this request starts the lake's check in the background
        deadline = time.monotonic() + 30
        while reader.generation < 2:
            assert time.monotonic() < deadline, "the lake was not reopened"
            time.sleep(0.05)
        assert clusters() == ["della", "two"]
        report = client.get("/api/v1/jobs/two/t1", headers=L.bearer(L.BOSS))
        assert report.status_code == 200


class CountingReader(LakeReader):
    """A reader that counts the job reports it builds."""

    def __init__(self, root: Path) -> None:
        super().__init__(Lake.at(root))
        self.built: list[str] = []

    def job_report(self, job_id: str, cluster: str | None) -> Any:
        self.built.append(job_id)
        return super().job_report(job_id, cluster)


def test_another_users_job_is_refused_before_its_report_is_built(root, tmp_path):
    # Built first and refused after, another's job took twice as long as no job at all (160
    # against 75 ms): the answer's time told which ids exist.
    reader = CountingReader(root)
    app = create_api_app(Lake.at(root), L.settings(tmp_path), reader=reader)
    with TestClient(app) as client:
        reader.built.clear()  # (the warm-up at start-up reads one)
        error_of(client.get("/api/v1/jobs/della/b1", headers=L.bearer(L.ALICE)), 404)
        error_of(client.get("/api/v1/jobs/della/zz9", headers=L.bearer(L.ALICE)), 404)
        assert reader.built == []
        assert client.get("/api/v1/jobs/della/a1", headers=L.bearer(L.ALICE)).status_code == 200
        assert client.get("/api/v1/jobs/della/b1", headers=L.bearer(L.BOSS)).status_code == 200
    assert reader.built == ["a1", "b1"]
