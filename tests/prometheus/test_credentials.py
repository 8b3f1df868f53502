"""Prometheus credentials (#22 LOW 8): basic auth or a bearer token reach every request's
Authorization header, and are never shown — not by `config check`, errors, logs or
`_state/service.json`; every URL is shown without its `user:password@`.

A tiny HTTP server on 127.0.0.1 stands in for Prometheus (or the auth proxy in front of it): it
records each request's Authorization header and answers as Prometheus does, or 401."""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from app.cli import cli
from collector.errors import ConfigError
from collector.sources.http_url import redact_url, redact_urls, split_credentials
from collector.sources.prometheus.transport import (
    ApiClientTransport,
    PrometheusAuth,
    PrometheusQueryError,
)

PASSWORD = "pw-prom-4711"
TOKEN = "tok-bearer-0815"
URL_PASSWORD = "url-pw-1234"

EMPTY_LABELS = {"status": "success", "data": []}
EMPTY_QUERY = {"status": "success", "data": {"resultType": "matrix", "result": []}}


@dataclass
class Recorder:
    """What the stand-in saw, and whether it lets requests in."""

    authorizations: list[str | None] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    deny: bool = False
    status: int = 200  # any other: answered with an error body
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class FakePrometheus:
    port: int
    seen: Recorder

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _handler(seen: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            with seen.lock:
                seen.authorizations.append(self.headers.get("Authorization"))
                seen.paths.append(self.path)
            if seen.deny:
                status, body = 401, {"status": "error", "error": "Unauthorized"}
            elif seen.status != 200:
                status, body = seen.status, {"status": "error", "error": "unavailable"}
            elif "/api/v1/query" in self.path:
                status, body = 200, EMPTY_QUERY
            else:
                status, body = 200, EMPTY_LABELS
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = _answer
        do_POST = _answer

    return Handler


@pytest.fixture
def fake_prometheus() -> Iterator[FakePrometheus]:
    seen = Recorder()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(seen))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield FakePrometheus(int(server.server_address[1]), seen)
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("GPULEDGER_"):
            monkeypatch.delenv(name)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# ---------------------------------------------------------------- the URL helper


def test_redact_url_strips_user_and_password_everywhere():
    assert redact_url("http://scraper:s3cr%40t@prom:9090/x?q=a@b") == "http://prom:9090/x?q=a@b"
    assert redact_url("https://token@prom/") == "https://prom/"
    assert redact_url("http://prom:9090") == "http://prom:9090"
    # a credential in the query string: its value hidden, the other parameters kept
    assert redact_url("http://prom/api?token=abc&step=30") == "http://prom/api?token=***&step=30"
    assert redact_url("https://h/x?api_key=Z#f") == "https://h/x?api_key=***#f"
    assert (
        redact_url("https://s3/x?X-Amz-Signature=ab&d=1") == "https://s3/x?X-Amz-Signature=***&d=1"
    )
    assert redact_url("http://h/?monkey=1&query=up") == "http://h/?monkey=1&query=up"
    text = "failed http://u:p@a:1/x and https://b/ and ftp://v:w@c"
    assert redact_urls(text) == "failed http://a:1/x and https://b/ and ftp://c"
    assert split_credentials("http://u%3A1:p%40ss@h:9/x") == ("http://h:9/x", "u:1", "p@ss")


def test_both_basic_auth_and_a_bearer_token_is_refused():
    with pytest.raises(ConfigError, match="not both"):
        PrometheusAuth(username="u", password="p", bearer_token="t")
    assert PASSWORD not in repr(PrometheusAuth(username="u", password=PASSWORD))


# ---------------------------------------------------------------- the transport


@pytest.mark.live
def test_basic_auth_reaches_every_request(fake_prometheus):
    auth = PrometheusAuth(username="scraper", password=PASSWORD)
    with ApiClientTransport(fake_prometheus.url, timeout_s=5, auth=auth) as api:
        api.family_names("{__name__=~'DCGM.*'}", 0, 60)
        api.range_vector("DCGM_FI_DEV_GPU_UTIL[1m]", 60)
        api.series("DCGM_FI_DEV_GPU_UTIL", 0, 60)
    assert fake_prometheus.seen.authorizations == [basic("scraper", PASSWORD)] * 3


@pytest.mark.live
def test_a_bearer_token_reaches_every_request(fake_prometheus):
    with ApiClientTransport(
        fake_prometheus.url, timeout_s=5, auth=PrometheusAuth(bearer_token=TOKEN)
    ) as api:
        api.family_names("{__name__=~'DCGM.*'}", 0, 60)
        api.range_vector("DCGM_FI_DEV_GPU_UTIL[1m]", 60)
    assert fake_prometheus.seen.authorizations == [f"Bearer {TOKEN}"] * 2


@pytest.mark.live
def test_url_credentials_become_basic_auth_and_are_never_shown(fake_prometheus):
    url = f"http://scraper:{URL_PASSWORD}@127.0.0.1:{fake_prometheus.port}"
    fake_prometheus.seen.deny = True
    with ApiClientTransport(url, timeout_s=5) as api:
        assert api.url == fake_prometheus.url
        with pytest.raises(PrometheusQueryError) as err:
            api.range_vector("up[1m]", 60)
        with pytest.raises(PrometheusQueryError) as err2:
            api.family_names("up", 0, 60)
    assert "HTTP 401" in str(err.value)
    for shown in (str(err.value), str(err2.value), repr(err.value.__cause__)):
        assert URL_PASSWORD not in shown
    assert fake_prometheus.seen.authorizations == [basic("scraper", URL_PASSWORD)] * 2


def test_credentials_in_the_url_and_the_configuration_are_refused():
    with pytest.raises(ConfigError, match="keep them in one place") as err:
        ApiClientTransport(
            f"http://u:{URL_PASSWORD}@127.0.0.1:9", auth=PrometheusAuth(bearer_token=TOKEN)
        )
    assert URL_PASSWORD not in str(err.value) and TOKEN not in str(err.value)


def test_a_bad_url_error_does_not_show_its_password():
    with pytest.raises(ConfigError) as err:
        ApiClientTransport(f"ftp://u:{URL_PASSWORD}@prom:9090")
    assert URL_PASSWORD not in str(err.value)


# ---------------------------------------------------------------- configuration and commands


def owner_only(path: Path, text: str) -> Path:
    path.write_text(text + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def test_config_check_masks_the_credentials_and_url_passwords(tmp_path):
    secret = owner_only(tmp_path / "prom-password", PASSWORD)
    cfg = tmp_path / "gpuledger.toml"
    cfg.write_text(
        f'[prometheus]\nusername = "scraper"\npassword_file = "{secret}"\n'
        f'[[sources]]\nkind = "prometheus"\ncluster = "della"\nurl = "http://prom:9090"\n'
        f'[[sources]]\nkind = "prometheus"\ncluster = "other"\n'
        f'url = "http://scraper:{URL_PASSWORD}@prom:9090"\n'
    )
    result = CliRunner().invoke(cli, ["config", "check", "--config", str(cfg)])
    assert "password = ********" in result.output
    assert "url = 'http://prom:9090'" in result.output
    assert PASSWORD not in result.output and URL_PASSWORD not in result.output
    # both kinds of credentials for one source: the transport would refuse them each round
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "Error: sources[1].url: 'http://prom:9090' carries a user:password@ and [prometheus] "
        "sets credentials too; keep them in one place (the password_file / bearer_token_file "
        "settings)"
    )
    bad = tmp_path / "bad.toml"
    bad.write_text(
        f'[[sources]]\nkind = "prometheus"\ncluster = "a"\nurl = "x://u:{URL_PASSWORD}@p"'
    )
    result = CliRunner().invoke(cli, ["config", "check", "--config", str(bad)])
    assert result.exit_code == 1 and "sources[0].url" in result.output
    assert URL_PASSWORD not in result.output


def test_run_refuses_url_credentials_beside_configured_ones_before_it_starts(tmp_path):
    cfg = tmp_path / "gpuledger.toml"
    cfg.write_text(
        f'[[sources]]\nkind = "prometheus"\ncluster = "della"\n'
        f'url = "http://scraper:{URL_PASSWORD}@127.0.0.1:9"\n'
    )
    env = {"GPULEDGER_PROMETHEUS_BEARER_TOKEN": TOKEN}
    lake = tmp_path / "lake"
    result = CliRunner().invoke(cli, ["run", "--config", str(cfg), "--lake", str(lake)], env=env)
    assert result.exit_code == 1
    assert result.output.startswith("Error: sources[0].url: 'http://127.0.0.1:9' carries a ")
    assert result.output.count("\n") == 1
    assert URL_PASSWORD not in result.output and TOKEN not in result.output
    assert not lake.exists()  # nothing started


def test_a_token_from_the_environment_is_masked():
    env = {"GPULEDGER_PROMETHEUS_BEARER_TOKEN": TOKEN}
    result = CliRunner().invoke(cli, ["config", "check"], env=env)
    assert result.exit_code == 0, result.output
    assert "bearer_token = ********  # env GPULEDGER_PROMETHEUS_BEARER_TOKEN" in result.output
    assert TOKEN not in result.output


@pytest.mark.live
def test_collect_prometheus_sends_the_configured_token_and_never_prints_it(
    tmp_path, fake_prometheus, caplog
):
    caplog.set_level(logging.DEBUG)
    token_file = owner_only(tmp_path / "token", TOKEN)
    cfg = tmp_path / "gpuledger.toml"
    cfg.write_text(f'[prometheus]\nbearer_token_file = "{token_file}"\n')
    fake_prometheus.seen.deny = True
    args = ["collect", "prometheus", "--url", fake_prometheus.url, "--cluster", "della"]
    args += ["--since", "2026-01-01T00:00:00", "--until", "2026-01-01T01:00:00", "--retries", "0"]
    result = CliRunner().invoke(
        cli, [*args, "--config", str(cfg), "--lake", str(tmp_path / "lake")]
    )
    assert result.exit_code == 1, result.output
    assert "HTTP 401" in result.output and "Traceback" not in result.output
    assert f"Bearer {TOKEN}" in fake_prometheus.seen.authorizations
    assert TOKEN not in result.output and TOKEN not in caplog.text


@pytest.mark.live
@pytest.mark.slow  # the service's puller retries a 503 four times (1 + 2 + 4 + 8 s)
def test_run_logs_in_with_the_configured_password_and_never_shows_it(tmp_path, fake_prometheus):
    fake_prometheus.seen.status = 503
    secret = owner_only(tmp_path / "prom-password", PASSWORD)
    cfg = tmp_path / "gpuledger.toml"
    cfg.write_text(
        f'[prometheus]\nusername = "scraper"\npassword_file = "{secret}"\n'
        f'[service]\nmetrics_port = 0\n[[sources]]\nkind = "prometheus"\ncluster = "della"\n'
        f'url = "{fake_prometheus.url}"\n'
    )
    lake = tmp_path / "lake"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    run = [sys.executable, "-m", "app.cli", "run", "--once", "--config", str(cfg)]
    done = subprocess.run(
        [*run, "--lake", str(lake)], env=env, capture_output=True, text=True, timeout=120
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output  # the source failed: 503
    status = (lake / "_state" / "service.json").read_text()
    assert f"Prometheus at {fake_prometheus.url} did not answer" in status
    assert set(fake_prometheus.seen.authorizations) == {basic("scraper", PASSWORD)}
    for shown in (output, status):
        assert PASSWORD not in shown
