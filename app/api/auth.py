"""Who is asking: a bearer token from the tokens file, else a trusted reverse proxy's header.

A request with `Authorization: Bearer <token>` is the token's user (a manager when the file
says so); a wrong token is 401 whatever else the request carries. Without a token, and only
when `[api] trusted_user_header` is set and the request comes straight from one of
`trusted_proxies` (and, with `[api] proxy_secret`, carrying that secret in
X-Gpuledger-Proxy-Secret), the header names the user, mapped as the dashboard maps sign-ins
(app.access.resolve_remote_user); from any other address the header is ignored, so a client
cannot name itself. Nobody else gets in: the API is never open, even where the dashboard is.
The tokens file is re-read when it changes (app.api.tokens.TokensFile); while it is unusable a
token request gets 503 and nobody is let in by token.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable

from fastapi import Request, Response
from fastapi.responses import PlainTextResponse

from app.access import Denied, Viewer, resolve_remote_user
from app.api.errors import ApiError
from app.api.settings import PROXY_SECRET_HEADER, ApiSettings
from app.api.tokens import TokensFileError

__all__ = ["managers_only", "request_viewer"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="gpuledger"'}


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "expected 'Authorization: Bearer <token>'", _CHALLENGE)
    return token.strip()


def _from_proxy(settings: ApiSettings, request: Request) -> bool:
    """Whether the request carries the proxy's secret (`[api] proxy_secret`; none set: the
    trusted address alone vouches for it), compared in constant time."""
    if settings.proxy_secret is None:
        return True
    sent = request.headers.get(PROXY_SECRET_HEADER, "").encode("latin-1", "replace")
    return hmac.compare_digest(sent, settings.proxy_secret.reveal().encode("ascii"))


def _peer(request: Request) -> str | None:
    """The address the connection came from, an IPv4 one as IPv4 where a dual-stack listener
    (`--address ::`) gives it IPv4-mapped (`::ffff:127.0.0.1`, no trusted proxy's form)."""
    if request.client is None:
        return None
    try:
        address = ipaddress.ip_address(request.client.host)
    except ValueError:
        return request.client.host
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return str(mapped or address)


def request_viewer(settings: ApiSettings, request: Request) -> Viewer:
    """The viewer of `request`; ApiError 401 when it proves no identity, 403 when the proxy's
    user is one the access policy refuses."""
    token = _bearer(request)
    if token is not None:
        try:
            viewer = None if settings.tokens is None else settings.tokens.viewer(token)
        except TokensFileError:
            # Logged with its reason by TokensFile; the client learns only that it must wait.
            raise ApiError(
                503, "the API's tokens file is not usable now; an administrator must fix it"
            ) from None
        if viewer is None:
            raise ApiError(401, "the bearer token is not valid", _CHALLENGE)
        return viewer
    header = settings.trusted_user_header
    client = _peer(request)
    if header is not None and client in settings.trusted_proxies and _from_proxy(settings, request):
        named = request.headers.get(header)
        if named is not None:
            resolved = resolve_remote_user(settings.policy, named)
            if isinstance(resolved, Denied):
                raise ApiError(403, resolved.reason)
            return resolved
    raise ApiError(401, "sign in: send 'Authorization: Bearer <token>'", _CHALLENGE)


def managers_only(settings: ApiSettings) -> Callable[[Request], Response | None]:
    """A guard for `gpuledger serve`'s /metrics beside the API: its series name every running
    job's user and account, so where the API lets users in by their own identity, /metrics
    answers only a manager (Prometheus sends a manager's token: `authorization` in its scrape
    config). The guard returns the refusal to send (plain text, as a scraper reads it), or
    None to let the request through."""

    def guard(request: Request) -> Response | None:
        try:
            viewer = request_viewer(settings, request)
        except ApiError as refused:
            return PlainTextResponse(
                refused.message + "\n", refused.status, headers=refused.headers
            )
        if not viewer.is_manager:
            return PlainTextResponse(
                f"{viewer.user} is not a manager: /metrics holds every user's jobs\n", 403
            )
        return None

    return guard
