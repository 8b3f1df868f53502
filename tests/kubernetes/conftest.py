"""Fixtures of the Kubernetes collector tests: recorded API responses and a fake API server.

`FakeKubernetes` stands in for the client transport (an injected seam, not a patched library):
it answers each list call with the `items` of a recorded response under
tests/fixtures/kubernetes/<snapshot>/ (see PROVENANCE.md there), falling back to the `t1`
snapshot for a file the later snapshot does not change, and None for a custom resource the
cluster does not serve. It filters namespaced lists by namespace, as the API server does.

`api_server` serves the same snapshots over HTTP the way kube-apiserver does (paths, paging
with `limit`/`continue`, `Status` errors), for tests of the real client transport and the CLI;
`kubeconfig` points a kubeconfig at it.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from collector.sources.kubernetes.api import KubernetesApiError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kubernetes"


def read_list(snapshot: str, name: str) -> dict[str, Any] | None:
    """The recorded list response `name` (e.g. `pods.json`) of `snapshot`, else of `t1`."""
    for folder in (snapshot, "t1"):
        path = FIXTURES / folder / name
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    return None


class FakeKubernetes:
    """A `KubernetesApi` answering from one recorded snapshot; it records the calls made."""

    def __init__(
        self,
        snapshot: str = "t1",
        *,
        served: tuple[str, ...] = ("kueue.x-k8s.io/v1beta1", "scheduling.volcano.sh/v1beta1"),
        fail: dict[str, KubernetesApiError] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.served = served
        self.fail = fail or {}
        self.calls: list[tuple[str, ...]] = []

    def _items(self, name: str, namespace: str | None) -> list[dict[str, Any]]:
        body = read_list(self.snapshot, name)
        items = [] if body is None else body["items"]
        if namespace is not None:
            items = [i for i in items if i["metadata"].get("namespace") == namespace]
        return items

    def _call(self, *call: str) -> None:
        self.calls.append(call)
        if call[0] in self.fail:
            raise self.fail[call[0]]

    def list_pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        self._call("pods", namespace or "")
        return self._items("pods.json", namespace)

    def list_nodes(self) -> list[dict[str, Any]]:
        self._call("nodes")
        return self._items("nodes.json", None)

    def list_custom(
        self, group: str, version: str, plural: str, namespace: str | None = None
    ) -> list[dict[str, Any]] | None:
        self._call(plural, group, version, namespace or "")
        if f"{group}/{version}" not in self.served:
            return None
        return self._items(f"{group}/{plural}.json", namespace)


@pytest.fixture
def fake_kubernetes() -> type[FakeKubernetes]:
    return FakeKubernetes


class _Handler(BaseHTTPRequestHandler):
    """Serves recorded list responses the way kube-apiserver does, paged by limit/continue."""

    server: FakeApiServer

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str, message: str) -> None:
        self._send(
            code,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": reason,
                "code": code,
            },
        )

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        self.server.requests.append((url.path, self.headers.get("Authorization")))
        if self.server.status is not None:
            self._status(*self.server.status)
            return
        parts = url.path.strip("/").split("/")
        namespace = None
        if parts[:2] == ["api", "v1"]:
            rest, name = parts[2:], None
            if rest[:1] == ["namespaces"] and len(rest) == 3:
                namespace, rest = rest[1], rest[2:]
            name = {"pods": "pods.json", "nodes": "nodes.json"}.get(rest[0]) if rest else None
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
            if rest[:1] == ["namespaces"] and len(rest) == 3:
                namespace, rest = rest[1], rest[2:]
            served = f"{group}/{version}" in self.server.served
            name = f"{group}/{rest[0]}.json" if served and len(rest) == 1 else None
        else:
            name = None
        body = read_list(self.server.snapshot, name) if name else None
        if body is None:
            self._status(404, "NotFound", "the server could not find the requested resource")
            return
        items = body["items"]
        if namespace is not None:
            items = [i for i in items if i["metadata"].get("namespace") == namespace]
        if "continue" in query and self.server.expire_pages > 0:
            self.server.expire_pages -= 1
            self._status(410, "Expired", "The provided continue parameter is too old")
            return
        offset = int(query.get("continue", ["0"])[0])
        limit = int(query.get("limit", [str(len(items) or 1)])[0])
        page = items[offset : offset + limit]
        more = offset + limit < len(items)
        meta = dict(body.get("metadata") or {})
        meta["continue"] = str(offset + limit) if more else ""
        if self.server.stuck_token:
            meta["continue"] = str(limit)
        self._send(200, {**body, "items": page, "metadata": meta})


class FakeApiServer(ThreadingHTTPServer):
    """A local HTTP server answering Kubernetes list calls from a recorded snapshot."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.snapshot = "t1"
        self.served: tuple[str, ...] = (
            "kueue.x-k8s.io/v1beta1",
            "scheduling.volcano.sh/v1beta1",
        )
        self.status: tuple[int, str, str] | None = None  # answer every call with this error
        self.expire_pages = 0  # answer this many continue calls 410 Gone (the token expired)
        self.stuck_token = False  # send the first page's continue token on every page
        self.requests: list[tuple[str, str | None]] = []

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


def write_kubeconfig(path: Path, server: str, token: str = "test-token") -> Path:
    """A kubeconfig (JSON is YAML) with context `fake` → `server`, `closed` → a closed port."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "fake", "cluster": {"server": server}},
            {"name": "closed", "cluster": {"server": closed}},
        ],
        "users": [{"name": "fake", "user": {"token": token}}],
        "contexts": [
            {"name": "fake", "context": {"cluster": "fake", "user": "fake"}},
            {"name": "closed", "context": {"cluster": "closed", "user": "fake"}},
        ],
        "current-context": "fake",
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.fixture
def api_server() -> Iterator[FakeApiServer]:
    server = FakeApiServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def kubeconfig(tmp_path: Path, api_server: FakeApiServer) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", api_server.url)
