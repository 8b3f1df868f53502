"""The service's HTTP endpoint: `/metrics` for Prometheus and `/healthz` for probes."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from app.service.metrics import Metrics

__all__ = ["serve_endpoint"]


Health = Callable[[], tuple[bool, dict[str, object]]]
CLIENT_TIMEOUT_S = 10.0


def serve_endpoint(
    metrics: Metrics,
    health: Health,
    host: str,
    port: int,
    *,
    liveness: Health | None = None,
    client_timeout_s: float = CLIENT_TIMEOUT_S,
) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; `server.shutdown()` stops it. Port 0 picks a free one.

    `/healthz`: `health` (503 when it says failing); `/healthz?live=1`: `liveness` (by default
    the same), what a liveness probe should ask: only what a restart mends. A client that
    sends nothing, or reads nothing, for `client_timeout_s` is disconnected: a slow or idle
    client ties up one thread that long, never the server.
    """

    class Handler(BaseHTTPRequestHandler):
        timeout = client_timeout_s  # socket timeout of each connection (StreamRequestHandler)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path, _, query = self.path.partition("?")
            if path == "/metrics":
                self._send(200, "text/plain; version=0.0.4", metrics.render().encode())
            elif path in ("/healthz", "/health"):
                live = "live=1" in query.split("&") or "live" in query.split("&")
                ok, detail = (liveness or health)() if live else health()
                body = json.dumps({"status": "ok" if ok else "failing", **detail}, default=str)
                self._send(200 if ok else 503, "application/json", body.encode())
            else:
                self._send(404, "text/plain", b"not found: try /metrics or /healthz\n")

        def _send(self, code: int, kind: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # scrapes every 15 s would flood the service log

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    # a stop is noticed within 0.1 s (the default 0.5 s delays every shutdown of the service)
    threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.1},
        name="gpuledger-endpoint",
        daemon=True,
    ).start()
    return server
