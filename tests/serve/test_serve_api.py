"""`gpuledger serve` as a user starts it: one real process answering /metrics and, with
`[api] tokens_file` set, the read-only API beside it, with the API's access rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.api import lake as L
from tests.api.test_api_server import free_port
from tests.marts import rows as r

pytestmark = pytest.mark.slow  # three real server processes: ~20 s on an idle machine


def get(url: str, token: str | None = None) -> tuple[int, bytes]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as f:
            return f.status, f.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def serve(tmp_path: Path, config: str) -> tuple[subprocess.Popen[bytes], str]:
    lake = L.build(tmp_path / "lake")
    (tmp_path / "gpuledger.toml").write_text(config, encoding="utf-8")
    port = free_port()
    env = {**os.environ, "GPULEDGER_CONFIG": str(tmp_path / "gpuledger.toml")}
    env.pop("GPULEDGER_LAKE", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--lake", str(lake), "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, proc.communicate()[0].decode()
        try:
            if get(f"{base}/healthz")[0] == 200:
                return proc, base
        except OSError:
            pass
        assert time.monotonic() < deadline, "gpuledger serve did not come up in 60 s"
        time.sleep(0.2)


@pytest.fixture
def stop():
    procs: list[subprocess.Popen[bytes]] = []
    yield procs.append
    for proc in procs:
        proc.terminate()
        proc.communicate(timeout=30)  # waits, and closes its output pipe


def test_one_server_answers_metrics_and_the_api_for_whom_it_may(tmp_path, stop):
    tokens = L.tokens_file(tmp_path)
    proc, base = serve(tmp_path, f'[api]\ntokens_file = "{tokens}"\n')
    stop(proc)

    # every running job's user is in /metrics: beside the API, a manager's only
    assert [get(f"{base}/metrics", token)[0] for token in (None, L.ALICE)] == [401, 403]
    status, metrics = get(f"{base}/metrics", L.BOSS)
    assert status == 200 and b"# TYPE gpuledger_" in metrics
    job = f"{base}/api/v1/jobs/{r.CLUSTER}/b1"
    assert get(job)[0] == 401
    assert get(job, "not-a-token-at-all-0000")[0] == 401
    assert get(job, L.ALICE)[0] == 404  # bob's job: as of none
    status, body = get(job, L.BOSS)
    assert status == 200 and json.loads(body)["job"]["job_id"] == "b1"
    status, body = get(f"{base}/api/v1/openapi.json")
    assert status == 200 and "/api/v1/jobs/{cluster}/{job_id}" in json.loads(body)["paths"]


def test_without_api_keys_only_metrics_are_served(tmp_path, stop):
    proc, base = serve(tmp_path, "")
    stop(proc)

    assert get(f"{base}/metrics")[0] == 200
    assert get(f"{base}/api/v1/jobs/{r.CLUSTER}/b1", L.BOSS)[0] == 404


def whoami(base: str, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(f"{base}/api/v1/whoami", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as f:
            return f.status, f.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_trusted_proxy_is_the_connections_peer_never_a_forwarded_for_header(tmp_path, stop):
    """A local user who names the trusted proxy's address in X-Forwarded-For is not that
    proxy: it signed in as anyone (a manager) by the user header. And the proxy on this host
    adds X-Forwarded-For (Apache's mod_proxy does by default): its users still sign in."""
    proxy = '[api]\ntrusted_user_header = "X-Remote-User"\n'
    proc, base = serve(tmp_path / "remote", proxy + 'trusted_proxies = ["10.9.9.9"]\n')
    stop(proc)
    spoofed = {"X-Remote-User": "boss", "X-Forwarded-For": "10.9.9.9"}
    assert whoami(base, spoofed)[0] == 401
    proc, base = serve(tmp_path / "local", proxy)  # trusted_proxies: 127.0.0.1 and ::1
    stop(proc)
    status, body = whoami(base, {"X-Remote-User": "bob", "X-Forwarded-For": "203.0.113.7"})
    assert status == 200 and json.loads(body)["user"] == "bob"


def test_a_tokens_file_others_can_read_stops_it_in_one_line(tmp_path):
    tokens = L.tokens_file(tmp_path)
    os.chmod(tokens, 0o604)
    (tmp_path / "gpuledger.toml").write_text(f'[api]\ntokens_file = "{tokens}"\n')
    lake = L.build(tmp_path / "lake")
    env = {**os.environ, "GPULEDGER_CONFIG": str(tmp_path / "gpuledger.toml")}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "serve", "--lake", str(lake), "--port", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "mode 0604" in done.stderr and "Traceback" not in done.stderr
    assert L.ALICE not in done.stderr + done.stdout


def test_a_proxy_header_without_a_secret_is_warned_of_at_start(tmp_path):
    # documented, and silent: any local user of a trusted host can name any user, a manager too
    proc, _ = serve(tmp_path / "open", '[api]\ntrusted_user_header = "X-Remote-User"\n')
    proc.terminate()
    said = proc.communicate(timeout=30)[0].decode()
    assert "X-Remote-User is believed from 127.0.0.1, ::1 without a proxy secret" in said

    secret = tmp_path / "secret"
    secret.write_text("proxy-secret-0123456789abcdef\n", encoding="utf-8")
    secret.chmod(0o600)
    proc, _ = serve(
        tmp_path / "closed",
        f'[api]\ntrusted_user_header = "X-Remote-User"\nproxy_secret_file = "{secret}"\n',
    )
    proc.terminate()
    assert "without a proxy secret" not in proc.communicate(timeout=30)[0].decode()
