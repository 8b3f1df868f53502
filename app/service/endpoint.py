"""The service's HTTP endpoint: `/metrics` for Prometheus and `/healthz` for probes."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from app.service.metrics import Metrics

__all__ = ["serve_endpoint"]


def serve_endpoint(
    metrics: Metrics, health: Callable[[], tuple[bool, dict[str, object]]], host: str, port: int
) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; `server.shutdown()` stops it. Port 0 picks a free one."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?")[0] == "/metrics":
                self._send(200, "text/plain; version=0.0.4", metrics.render().encode())
            elif self.path.split("?")[0] in ("/healthz", "/health"):
                ok, detail = health()
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
    threading.Thread(target=server.serve_forever, name="gpuledger-endpoint", daemon=True).start()
    return server
