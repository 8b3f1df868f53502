"""Real local servers for the alert tests: an aiosmtpd SMTP server (optionally STARTTLS + AUTH
with a self-signed certificate made by `openssl`) and an HTTP server standing in for Slack."""

from __future__ import annotations

import asyncio
import email
import email.policy
import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

SMTP_USER = "alerts-bot"
SMTP_PASSWORD = "s3cret-smtp-pw-4711"
SLACK_TOKEN = "xoxb-test-token-0815"
IDEMPOTENCY_HEADER = "X-Gpuledger-Idempotency-Key"


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPULEDGER_* setting leaks in from the developer's shell."""
    for name in list(os.environ):
        if name.startswith("GPULEDGER_"):
            monkeypatch.delenv(name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# ---------------------------------------------------------------- SMTP


@dataclass
class Received:
    """One email as the server got it."""

    rcpt_tos: list[str]
    message: EmailMessage

    @property
    def key(self) -> str:
        return str(self.message[IDEMPOTENCY_HEADER])

    def part(self, subtype: str) -> str:
        body = self.message.get_body(preferencelist=(subtype,))
        assert body is not None and body.get_content_subtype() == subtype
        text: str = body.get_content()  # type: ignore[attr-defined]
        return text


@dataclass
class SmtpHandler:
    received: list[Received] = field(default_factory=list)
    duplicates: int = 0
    authenticated: list[str] = field(default_factory=list)
    reject_data: str | None = None  # an answer to every DATA instead of 250 (a broken relay)
    too_big_for: set[str] = field(default_factory=set)  # DATA to these answered 552 (size)
    refuse_rcpt: set[str] = field(default_factory=set)  # recipients answered 550
    rcpt_seen: list[str] = field(default_factory=list)
    sessions: list[Any] = field(default_factory=list)  # one per SMTP connection that sent mail
    store_s: float = 0.0  # seconds a message takes to store before the answer (a slow relay)

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: Any
    ) -> str:
        self.rcpt_seen.append(address)
        if address in self.refuse_rcpt:
            return "550 5.1.1 No such user"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if not any(s is session for s in self.sessions):
            self.sessions.append(session)
        if self.reject_data is not None:
            return self.reject_data
        if self.too_big_for & set(envelope.rcpt_tos):
            return "552 5.3.4 Message size exceeds fixed limit"
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(msg, EmailMessage)
        key = msg[IDEMPOTENCY_HEADER]
        if key is not None and any(r.key == str(key) for r in self.received):
            self.duplicates += 1  # the receiver dedupes a repeat by its idempotency key
        else:
            self.received.append(Received(list(envelope.rcpt_tos), msg))
        if self.store_s:
            await asyncio.sleep(self.store_s)
        return "250 OK"


class SmtpServer:
    """A real SMTP server on 127.0.0.1 that can be stopped and started again on its port."""

    def __init__(self, port: int, tls_dir: Path | None, mode: str = "starttls") -> None:
        """`mode` (with `tls_dir`): starttls (required before AUTH) or implicit (SMTPS); without
        `tls_dir`: plain (no AUTH) or plain-auth (AUTH offered over the clear connection)."""
        self.port = port
        self.handler = SmtpHandler()
        self.tls_dir = tls_dir
        self.mode = mode
        self.controller: Controller | None = None

    @property
    def received(self) -> list[Received]:
        return self.handler.received

    def start(self) -> None:
        kwargs: dict[str, Any] = {}
        # AUTH offered without STARTTLS (aiosmtpd warns when it is also required then; the
        # tests check who logged in instead)
        auth = {
            "authenticator": self._authenticate,
            "auth_exclude_mechanism": ["LOGIN"],
            "auth_require_tls": False,
        }
        if self.tls_dir is None and self.mode == "plain-auth":
            kwargs = auth
        elif self.tls_dir is not None and self.mode == "implicit":
            import ssl

            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(self.tls_dir / "cert.pem", self.tls_dir / "key.pem")
            # TLS from the first byte: aiosmtpd's auth_require_tls knows only STARTTLS
            kwargs = {**auth, "ssl_context": ctx}
        elif self.tls_dir is not None:
            import ssl

            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(self.tls_dir / "cert.pem", self.tls_dir / "key.pem")
            kwargs = {
                "tls_context": ctx,
                "require_starttls": True,
                "auth_required": True,
                "auth_require_tls": True,
                "authenticator": self._authenticate,
                # smtplib falls back from PLAIN to LOGIN, which aiosmtpd answers slowly
                "auth_exclude_mechanism": ["LOGIN"],
            }
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port, **kwargs)
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    def _authenticate(
        self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any
    ) -> AuthResult:
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == SMTP_USER
            and auth_data.password.decode() == SMTP_PASSWORD
        )
        if ok:
            self.handler.authenticated.append(SMTP_USER)
        return AuthResult(success=ok, handled=False)  # handled=False: the server answers 535


def make_cert(folder: Path) -> Path:
    """A self-signed certificate for 127.0.0.1, made with the openssl CLI."""
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(folder / "key.pem"),
            "-out",
            str(folder / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )
    return folder / "cert.pem"


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    """A plain SMTP server (no TLS, no AUTH)."""
    server = SmtpServer(free_port(), None)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tls")
    make_cert(folder)
    return folder


@pytest.fixture
def smtp_plain_auth_server() -> Iterator[SmtpServer]:
    """An SMTP server that offers AUTH over the clear connection (no TLS at all)."""
    server = SmtpServer(free_port(), None, mode="plain-auth")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def smtps_server(tls_dir: Path) -> Iterator[SmtpServer]:
    """An SMTPS server (implicit TLS, as on port 465) that requires AUTH."""
    server = SmtpServer(free_port(), tls_dir, mode="implicit")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def smtp_tls_server(tls_dir: Path) -> Iterator[SmtpServer]:
    """An SMTP server that requires STARTTLS and then AUTH (user SMTP_USER)."""
    server = SmtpServer(free_port(), tls_dir)
    server.start()
    yield server
    server.stop()


# ---------------------------------------------------------------- Slack


@dataclass
class SlackState:
    posts: list[dict[str, Any]] = field(default_factory=list)
    webhooks: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    duplicates: int = 0
    bad_auth: int = 0
    errors: list[str] = field(default_factory=list)  # bodies Slack would refuse
    # answers to give before succeeding: (status, headers); consumed one per request
    failures: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def keys(self) -> list[str]:
        return [p["metadata"]["event_payload"]["idempotency_key"] for p in self.posts]


def _post_message_problem(body: dict[str, Any]) -> str | None:
    """What Slack's chat.postMessage would refuse in `body` (a subset of its rules)."""
    if not isinstance(body.get("channel"), str) or not body["channel"]:
        return "no channel"
    if not isinstance(body.get("text"), str) or not body["text"]:
        return "no fallback text"
    blocks = body.get("blocks", [])
    if not isinstance(blocks, list) or len(blocks) > 50:
        return "blocks must be a list of at most 50"
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in {"header", "section", "context", "divider"}:
            return f"unknown block {block!r}"
        if kind == "header" and len(block["text"]["text"]) > 150:
            return "header text over 150 characters"
        if kind == "section" and "text" not in block and "fields" not in block:
            return "section without text or fields"
        if kind == "section" and len(block.get("fields", [])) > 10:
            return "more than 10 fields"
    meta = body.get("metadata")
    if not isinstance(meta, dict) or not meta.get("event_type"):
        return "metadata without event_type"
    if not isinstance(meta.get("event_payload", {}).get("idempotency_key"), str):
        return "metadata without an idempotency key"
    return None


def _slack_handler(state: SlackState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            with state.lock:
                state.requests += 1
                if state.failures:
                    status, headers = state.failures.pop(0)
                    self._answer(status, {"ok": False, "error": "ratelimited"}, headers)
                    return
                if self.path.startswith("/webhook/"):
                    keys = [w["gpuledger_key"] for w in state.webhooks]
                    if body.get("gpuledger_key") in keys:
                        state.duplicates += 1
                    else:
                        state.webhooks.append(body)
                    self._answer(200, {"ok": True}, {})
                    return
                if self.path != "/api/chat.postMessage":
                    self._answer(404, {"ok": False, "error": "unknown_method"}, {})
                    return
                if self.headers.get("Authorization") != f"Bearer {SLACK_TOKEN}":
                    state.bad_auth += 1
                    self._answer(200, {"ok": False, "error": "invalid_auth"}, {})
                    return
                problem = _post_message_problem(body)
                if problem:
                    state.errors.append(problem)
                    self._answer(200, {"ok": False, "error": "invalid_arguments"}, {})
                    return
                key = body["metadata"]["event_payload"]["idempotency_key"]
                if key in state.keys():
                    state.duplicates += 1
                else:
                    state.posts.append(body)
                self._answer(200, {"ok": True, "channel": body["channel"], "ts": "1.0"}, {})

    return Handler


class SlackServer:
    def __init__(self) -> None:
        self.state = SlackState()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _slack_handler(self.state))
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/api/"

    @property
    def webhook_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/webhook/T0/B0/XYZsecret"


@pytest.fixture
def slack_server() -> Iterator[SlackServer]:
    server = SlackServer()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()
