"""The Open OnDemand widget (deploy/ondemand/) in headless Chromium: its partial and script
against a real uvicorn serving the API behind a stand-in for OnDemand's Apache, which rewrites
/gpuledger/api/ to /api/ and names the signed-in user in X-Remote-User, as
deploy/ondemand/apache/gpuledger-api.conf does."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.access import AccessPolicy
from app.api.router import build_router
from tests.api import lake as L
from tests.api.test_api_server import free_port
from warehouse.lake import Lake

CHROMIUM = "/usr/bin/chromium"
ONDEMAND = Path(__file__).resolve().parents[2] / "deploy" / "ondemand"
SIGNED_IN = "alice"

pytestmark = [
    pytest.mark.live,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]


def rendered_partial(user: str) -> str:
    """The partial as Rails renders it for `user`: its comment dropped, ENV['USER'] filled."""
    text = (ONDEMAND / "views" / "widgets" / "_gpuledger_jobs.html.erb").read_text()
    text = re.sub(r"<%#.*?%>", "", text, flags=re.DOTALL)
    text, filled = re.subn(r"<%= ERB::Util\.url_encode\(ENV\['USER'\]\.to_s\) %>", user, text)
    assert filled == 1 and "<%" not in text, "the partial changed: update this stand-in"
    return text


class ApacheStandIn:
    """/gpuledger/api/… → /api/…, with X-Remote-User set to the signed-in user (a client's
    own X-Remote-User dropped)."""

    def __init__(self, app: ASGIApp, user: str) -> None:
        self.app, self.user = app, user.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/gpuledger/api/"):
            path = scope["path"].removeprefix("/gpuledger")
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"x-remote-user"]
            scope = dict(
                scope,
                path=path,
                raw_path=path.encode(),
                headers=[*headers, (b"x-remote-user", self.user)],
            )
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def ondemand_url(tmp_path_factory) -> Iterator[str]:
    root = L.shared(tmp_path_factory)
    settings = L.settings(
        tmp_path_factory.mktemp("etc"),
        trusted_user_header="X-Remote-User",
        trusted_proxies=frozenset({"127.0.0.1"}),
        policy=AccessPolicy(managers=frozenset({"boss"}), allowed_domains=frozenset({"x.org"})),
    )
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(build_router(Lake.at(root), settings))

    @app.get("/pun/sys/dashboard")
    def dashboard() -> HTMLResponse:
        return HTMLResponse(f"<!doctype html><html><body>{rendered_partial(SIGNED_IN)}</body>")

    @app.get("/public/gpuledger-jobs.js")
    def script() -> FileResponse:
        return FileResponse(ONDEMAND / "public" / "gpuledger-jobs.js", media_type="text/javascript")

    config = uvicorn.Config(
        ApacheStandIn(app, SIGNED_IN), host="127.0.0.1", port=free_port(), log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{config.port}"
    server.should_exit = True
    thread.join(timeout=10)


def test_the_widget_shows_the_signed_in_users_last_jobs(ondemand_url):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--headless=new"]
        )
        try:
            page = browser.new_page()
            page.goto(f"{ondemand_url}/pun/sys/dashboard")
            rows = page.locator("[data-gpuledger-jobs] tbody tr")
            expect(rows).to_have_count(2, timeout=30_000)
            texts = rows.all_inner_texts()
        finally:
            browser.close()

    # alice's a2 (started 01:00, 2 GPU-h, never busy) then a1 (00:00, 1 GPU-h, busy 0.8)
    assert texts[0].split("\t")[0] == "a2" and "2.0 GPU-h, 0% busy" in texts[0]
    assert texts[1].split("\t")[0] == "a1" and "1.0 GPU-h, 80% busy" in texts[1]
    assert "2024-03-01 00:00 UTC" in texts[1]
    assert not any("b1" in t for t in texts)
