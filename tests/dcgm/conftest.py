"""Fixtures of the dcgm-exporter tests: recorded scrapes, a parser bound to a test scrape time, an
HTTP server on 127.0.0.1 serving them, and a reader of what landed in a lake.

Handed out as fixtures (not imported from a helper module) so the tests work under
`--import-mode=importlib` without a `tests/__init__.py`.
"""

from __future__ import annotations

import datetime as dt
import http.server
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from collector.sources.dcgm_exporter.exposition import ParseResult, parse_exposition
from warehouse import layout

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm-exporter"
T0 = dt.datetime(2026, 11, 2, 8, 0, 0, tzinfo=dt.UTC)


@pytest.fixture
def fixture_text() -> Callable[[str], str]:
    """Read one recorded exposition from tests/fixtures/dcgm-exporter/."""
    return lambda name: (FIXTURES / name).read_text(encoding="utf-8")


@pytest.fixture
def parse() -> Callable[..., ParseResult]:
    """parse_exposition at T0, cluster 'della', 30 s rows, source 'dcgm-exporter'."""

    def _parse(text: str, **kwargs: Any) -> ParseResult:
        kwargs.setdefault("default_node", None)
        return parse_exposition(
            text, cluster="della", ts=T0, interval_s=30.0, source="dcgm-exporter", **kwargs
        )

    return _parse


@pytest.fixture
def t0() -> dt.datetime:
    return T0


class _Pages:
    """What the test server answers: path → (status, body); mutable between requests."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, str]] = {}
        self.hits: dict[str, int] = {}


@pytest.fixture
def exporter_server() -> Iterator[tuple[str, _Pages]]:
    """A real http.server on 127.0.0.1 (ephemeral port); yields (base URL, pages)."""
    pages = _Pages()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            pages.hits[self.path] = pages.hits.get(self.path, 0) + 1
            status, body = pages.pages.get(self.path, (404, "not found\n"))
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", pages
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def dead_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"


@pytest.fixture
def read_lake() -> Callable[[Path, str], pa.Table]:
    """Every row of `table` in the lake at `root` (without the writer's `_batch` column)."""

    def _read(root: Path, table: str) -> pa.Table:
        files = layout.table_files(root, table)
        if not files:
            return pa.table({})
        tables = [pq.read_table(f) for f in files]
        return pa.concat_tables(tables).drop_columns(["_batch"])

    return _read
