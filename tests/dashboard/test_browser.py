"""A real browser loads every page from a running `gpuledger dashboard` (headless Chromium).

Screenshots land in test-artifacts/dashboard/ for a person to look at.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "dashboard"
# url path -> the page's title (or its start, where it names the job)
PAGES = {
    "": "GPU-hours at a glance",
    "jobs": "Jobs",
    "job": "Job ",
    "users": "Users & accounts",
    "fairness": "Fairness",
    "health": "GPU health",
    "alerts": "Alerts & recommendations",
}

pytestmark = [
    pytest.mark.live,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, server: subprocess.Popen[bytes], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"the dashboard exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"the dashboard did not answer on {url} within {timeout_s} s")


@pytest.fixture(scope="module")
def dashboard_url(demo_lake: Path) -> Iterator[str]:
    port = free_port()
    gpuledger = shutil.which("gpuledger", path=str(Path(sys.executable).parent))
    assert gpuledger, "the gpuledger console script is not installed next to this Python"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    server = subprocess.Popen(
        [gpuledger, "dashboard", "--lake", str(demo_lake), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
        yield url
    finally:
        server.terminate()  # gpuledger passes it on to the Streamlit server it started
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)  # its own session: nothing else is in it
            server.wait()


def test_stopping_the_dashboard_stops_its_streamlit_server(demo_lake):
    port = free_port()
    gpuledger = shutil.which("gpuledger", path=str(Path(sys.executable).parent))
    assert gpuledger
    server = subprocess.Popen(
        [gpuledger, "dashboard", "--lake", str(demo_lake), "--port", str(port)],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server)
        server.terminate()
        assert server.wait(timeout=30) is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _group_alive(server.pid):
            time.sleep(0.2)
        assert not _group_alive(server.pid), "the Streamlit server outlived gpuledger"
    finally:
        if _group_alive(server.pid):
            os.killpg(server.pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_every_page_shows_its_title_and_a_rendered_chart(dashboard_url):
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--headless=new"]
        )
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 2400})
            for path, title in PAGES.items():
                page.goto(f"{dashboard_url}/{path}", wait_until="networkidle")
                heading = page.locator("h1").filter(has_text=title).first
                expect(heading).to_be_visible(timeout=60_000)
                chart = page.locator(
                    '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg'
                ).first
                expect(chart).to_be_visible(timeout=60_000)
                assert page.locator('[data-testid="stException"]').count() == 0, path
                page.wait_for_timeout(500)  # let the charts finish drawing
                page.screenshot(path=str(ARTIFACTS / f"{path or 'overview'}.png"), full_page=True)
                if path == "jobs":  # a download gives the table as shown
                    with page.expect_download(timeout=60_000) as download:
                        page.locator('[data-testid="stDownloadButton"] button').filter(
                            has_text="CSV"
                        ).first.click()
                    header = Path(download.value.path()).read_text().splitlines()[0]
                    assert header.startswith("job_id,job_name,user,account,state,gpus,alloc_gpu_h")
        finally:
            browser.close()
