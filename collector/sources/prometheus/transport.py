"""Talk to Prometheus' HTTP API through prometheus-api-client; translate its failures.

`ApiClientTransport` builds a `PrometheusConnect` (TLS, auth headers, connection pooling) and
asks it which DCGM families exist (`get_label_values`). Range-vector queries go through the
same client session but keep the raw body, which `prometheus.blocks` reads into Arrow without
a Python object per sample. The library (and requests) is imported only when a transport is
made, so importing the collector stays light.

Credentials (`PrometheusAuth`: basic auth or a bearer token, or `user:password@` in the URL)
go into every request's Authorization header and nowhere else: the transport's `url` — the one
errors, logs and the checkpoint show — never carries them.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from collector.errors import CollectorError, ConfigError
from collector.sources.http_url import check_http_url, redact_urls, split_credentials
from collector.sources.prometheus.remote_read import CONTENT_TYPE, RemoteReadUnsupported

if TYPE_CHECKING:
    import requests

__all__ = [
    "ApiClientTransport",
    "ChunkReader",
    "PrometheusAuth",
    "PrometheusQueryError",
    "PrometheusUnavailable",
    "QueryTooLarge",
    "Transport",
    "check_base_url",
]

# Prometheus' own words when a query needs more samples than `--query.max-samples` allows.
_TOO_LARGE: Final = re.compile(r"too many samples|exceeded maximum resolution", re.IGNORECASE)
_STATUS: Final = re.compile(r"HTTP Status Code (\d{3})")
_NO_DETAIL: Final = 300  # characters of an error body worth quoting


class PrometheusUnavailable(CollectorError):
    """Prometheus could not be reached or answered 5xx/429: worth retrying."""


class PrometheusQueryError(CollectorError):
    """Prometheus refused a query (4xx): retrying the same query will not help."""


class QueryTooLarge(PrometheusQueryError):
    """The query selects more samples than Prometheus allows at once: split its range."""


class Transport(Protocol):
    """What the puller needs from a Prometheus server (a fake in tests)."""

    url: str

    def family_names(self, match: str, start_s: float, end_s: float) -> list[str]:
        """Metric names with series matching `match` between the two times."""
        ...

    def range_vector(self, query: str, at_s: float) -> bytes:
        """The raw JSON body of the instant query `query` (a range selector) at `at_s`."""
        ...

    def series(self, match: str, start_s: float, end_s: float) -> list[dict[str, str]]:
        """Label sets of the series matching `match` between the two times (no samples)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class ChunkReader(Protocol):
    """A transport that also speaks remote read (`prometheus.remote_read`)."""

    url: str

    def read_chunks(self, request: bytes) -> bytes:
        """The streamed-chunks body `/api/v1/read` answers to a snappy-compressed ReadRequest.

        Raises RemoteReadUnsupported when the server answers without streamed chunks.
        """
        ...


_ERRNO: Final = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")


def _network_reason(exc: Exception) -> str:
    """The root cause of a requests failure in a few words (`Connection refused`, …)."""
    text = str(exc)
    found = _ERRNO.search(text)
    if found:
        return found.group(1).strip()
    if "timed out" in text.lower() or "timeout" in type(exc).__name__.lower():
        return "timed out"
    return type(exc).__name__


def _detail(body: str) -> str:
    text = redact_urls(" ".join(body.split()))
    return text if len(text) <= _NO_DETAIL else f"{text[:_NO_DETAIL]}…"


def _refusal(status: int, body: str, what: str) -> CollectorError:
    """The typed error for an HTTP status that is not 200."""
    message = f"Prometheus answered HTTP {status} to {what}: {_detail(body)}"
    if status == 429 or status >= 500:
        return PrometheusUnavailable(message)
    if _TOO_LARGE.search(body):
        return QueryTooLarge(message)
    return PrometheusQueryError(message)


def check_base_url(url: str) -> None:
    """Raise ConfigError unless `url` is an http(s) URL with a host (and a valid port)."""
    check_http_url(url, "Prometheus", "http://prometheus:9090")


@dataclass(frozen=True, slots=True)
class PrometheusAuth:
    """How to log in to Prometheus (or the proxy in front of it): basic auth or a bearer token.

    The secrets are left out of `repr()`; `ConfigError` when both kinds are given.
    """

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    bearer_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.bearer_token and (self.username or self.password):
            raise ConfigError(
                "Prometheus: give either a username/password (basic auth) or a bearer token, "
                "not both"
            )
        if self.password and not self.username:
            raise ConfigError("Prometheus: a password is set but no username to log in with")

    @property
    def basic(self) -> tuple[str, str] | None:
        """(user, password) for HTTP basic auth, or None."""
        return (self.username, self.password or "") if self.username else None

    @property
    def headers(self) -> dict[str, str]:
        """The Authorization header of a bearer token, else none."""
        return {"Authorization": f"Bearer {self.bearer_token}"} if self.bearer_token else {}

    @property
    def empty(self) -> bool:
        return not (self.username or self.bearer_token)


def _auth_of(url: str, auth: PrometheusAuth | None) -> tuple[str, PrometheusAuth]:
    """(the URL without userinfo, the credentials to use): the URL's `user:password@` unless
    `auth` gives credentials too (then ConfigError: one place for them)."""
    clean, user, password = split_credentials(url)
    given = auth or PrometheusAuth()
    if user is None and password is None:
        return clean, given
    if not given.empty:
        raise ConfigError(
            f"Prometheus URL {clean!r} carries a user:password@ and credentials are configured "
            "too; keep them in one place (the password_file / bearer_token_file settings)"
        )
    return clean, PrometheusAuth(username=user or "", password=password)


class ApiClientTransport:
    """A `Transport` over prometheus-api-client's `PrometheusConnect`.

    Args:
        url: Prometheus' base URL, e.g. `http://prometheus:9090`.
        timeout_s: per request; also sent to Prometheus as the query's own timeout.
        insecure: do not verify TLS certificates.
        headers: extra HTTP headers.
        connections: pooled connections, at least the number of queries in flight.
        auth: basic-auth or bearer-token credentials (else the URL's `user:password@`, if any).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 60.0,
        insecure: bool = False,
        headers: dict[str, str] | None = None,
        connections: int = 10,
        auth: PrometheusAuth | None = None,
    ) -> None:
        import requests
        from prometheus_api_client import PrometheusConnect
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        check_base_url(url)
        clean, credentials = _auth_of(url, auth)
        self.url = clean.rstrip("/")  # never with credentials: errors and logs show it
        self.timeout_s = timeout_s
        self._requests = requests
        self._session = requests.Session()
        self._session.verify = not insecure
        # The puller retries with its own backoff and reports each failure: no hidden retries.
        retry = Retry(total=0, redirect=3, raise_on_status=False)
        self._client = PrometheusConnect(
            url=self.url,
            headers={**(headers or {}), **credentials.headers} or None,
            auth=credentials.basic,
            disable_ssl=insecure,
            retry=retry,
            session=self._session,
            timeout=timeout_s,
        )
        # one pooled connection per query in flight (the client mounts a pool of 10)
        adapter = HTTPAdapter(max_retries=retry, pool_maxsize=max(connections, 1))
        self._session.mount(self.url, adapter)

    def _network_errors(self) -> tuple[type[Exception], ...]:
        import urllib3

        r = self._requests.exceptions
        # (a body read a socket read at a time fails as urllib3's errors: cut, timed out)
        return (
            r.ConnectionError,
            r.Timeout,
            r.ChunkedEncodingError,
            r.ContentDecodingError,
            urllib3.exceptions.HTTPError,
        )

    def _client_call(self, what: str, call: Callable[[], Any]) -> Any:
        """Run a `PrometheusConnect` method, translating its failures into our errors."""
        from prometheus_api_client.exceptions import PrometheusApiClientException

        try:
            return call()
        except self._network_errors() as exc:
            raise PrometheusUnavailable(_network_reason(exc)) from exc
        except PrometheusApiClientException as exc:
            found = _STATUS.search(str(exc))
            raise _refusal(int(found.group(1)) if found else 500, str(exc), what) from exc
        except ValueError as exc:  # a body that is not JSON
            raise PrometheusUnavailable(f"{self.url} did not answer JSON to {what}") from exc

    def family_names(self, match: str, start_s: float, end_s: float) -> list[str]:
        params = {"match[]": match, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}"}
        names = self._client_call(
            f"the metric-name lookup for {match}",
            lambda: self._client.get_label_values("__name__", params=params),
        )
        return [str(n) for n in names or []]

    def series(self, match: str, start_s: float, end_s: float) -> list[dict[str, str]]:
        start = dt.datetime.fromtimestamp(start_s, tz=dt.UTC)
        end = dt.datetime.fromtimestamp(end_s, tz=dt.UTC)
        found = self._client_call(
            f"the series lookup for {match}",
            lambda: self._client.get_series(start, end, params={"match[]": match}),
        )
        return [dict(labels) for labels in found or []]

    def _body(self, response: requests.Response, deadline: float) -> bytes:
        """The whole (decoded) body of a streamed `response`, a socket read at a time, until
        `deadline` (time.monotonic): each read waits at most the request's timeout, but a
        server sending a byte every few seconds would be read forever (as a dcgm-exporter
        doing so held that collector past SIGTERM)."""
        import time

        parts: list[bytes] = []
        try:
            while True:
                if time.monotonic() > deadline:
                    raise PrometheusUnavailable(
                        f"{self.url}: the answer did not end within {self.timeout_s + 5.0:g} s"
                    )
                part = response.raw.read1(1 << 16, decode_content=True)
                if not part:
                    return b"".join(parts)
                parts.append(part)
        finally:
            response.close()

    def range_vector(self, query: str, at_s: float) -> bytes:
        import time

        params = {"query": query, "time": f"{at_s:.3f}", "timeout": f"{self.timeout_s:g}s"}
        deadline = time.monotonic() + self.timeout_s + 5.0
        try:
            response: requests.Response = self._session.get(
                f"{self.url}/api/v1/query",
                params=params,
                headers=self._client.headers,
                auth=self._client.auth,
                timeout=self.timeout_s + 5.0,  # let Prometheus' own timeout answer first
                stream=True,
            )
            body: bytes = self._body(response, deadline)
        except self._network_errors() as exc:
            raise PrometheusUnavailable(_network_reason(exc)) from exc
        if response.status_code != 200:
            raise _refusal(response.status_code, body.decode("utf-8", "replace"), query)
        return body

    def read_chunks(self, request: bytes) -> bytes:
        headers = {
            **(self._client.headers or {}),
            "Content-Encoding": "snappy",
            "Content-Type": "application/x-protobuf",
            "X-Prometheus-Remote-Read-Version": "0.1.0",
        }
        import time

        deadline = time.monotonic() + self.timeout_s + 5.0
        try:
            response: requests.Response = self._session.post(
                f"{self.url}/api/v1/read",
                data=request,
                headers=headers,
                auth=self._client.auth,
                timeout=self.timeout_s + 5.0,
                stream=True,
            )
            body: bytes = self._body(response, deadline)
        except self._network_errors() as exc:
            raise PrometheusUnavailable(_network_reason(exc)) from exc
        status, kind = response.status_code, response.headers.get("Content-Type", "")
        if status == 429 or status >= 500:
            raise _refusal(status, body.decode("utf-8", "replace"), "a remote read")
        if status != 200 or not kind.startswith(CONTENT_TYPE):
            raise RemoteReadUnsupported(
                f"{self.url}/api/v1/read answered HTTP {status} ({kind or 'no content type'}), "
                f"not streamed chunks: {_detail(body[:_NO_DETAIL].decode('utf-8', 'replace'))}"
            )
        # The stream has no end marker: only its framing (chunked, as Prometheus sends it, or a
        # length) tells an answer whole from one cut at a frame boundary, where the collector
        # would land a part and move its checkpoint past the rest.
        chunked = "chunked" in response.headers.get("Transfer-Encoding", "").lower()
        if not chunked and "Content-Length" not in response.headers:
            raise RemoteReadUnsupported(
                f"{self.url}/api/v1/read answered streamed chunks without marking where they "
                "end (neither chunked nor a Content-Length: a proxy speaking HTTP/1.0?), so an "
                "answer cut short could not be told from a whole one"
            )
        return body

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ApiClientTransport:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
