"""Who is asking: a bearer token from the tokens file, else a trusted reverse proxy's header.

A request with `Authorization: Bearer <token>` is the token's user (a manager when the file
says so); a wrong token is 401 whatever else the request carries. Without a token, and only
when `[api] trusted_user_header` is set and the request comes straight from one of
`trusted_proxies` (and, with `[api] proxy_secret`, carrying that secret in
X-Gpuledger-Proxy-Secret), the header names the user, mapped as the dashboard maps sign-ins
(app.access.resolve_remote_user); from any other address the header is ignored, so a client
cannot name itself. The header sent twice is refused (400), and another Authorization scheme
than Bearer on a trusted proxy's request (its Basic sign-in passed on) is no token. Nobody else
gets in: the API is never open, even where the dashboard is.
The tokens file is re-read when it changes (app.api.tokens.TokensFile); while it is unusable a
token request gets 503 and nobody is let in by token.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import cast

from fastapi import Request, Response
from fastapi.responses import PlainTextResponse

from app.access import Denied, Viewer, resolve_remote_user
from app.api.errors import ApiError
from app.api.settings import PROXY_SECRET_HEADER, ApiSettings, normal_address
from app.api.tokens import TokensFileError

__all__ = ["managers_only", "request_viewer"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="gpuledger"'}


def _bearer(request: Request, *, other_schemes: bool = False) -> str | None:
    """The request's bearer token (None: no Authorization header). Another scheme is refused,
    but where `other_schemes` (the request is a trusted proxy's, naming its user): the
    proxy's Basic sign-in passed on (Apache's `AuthType Basic`) is no token."""
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" and other_schemes:
        return None
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
        return normal_address(request.client.host)
    except ValueError:
        return request.client.host


def request_viewer(settings: ApiSettings, request: Request) -> Viewer:
    """The viewer of `request`; ApiError 401 when it proves no identity, 403 when the proxy's
    user is one the access policy refuses."""
    proxied = _proxied(settings, request)
    token = _bearer(request, other_schemes=proxied)
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
    if proxied:
        header = cast(str, settings.trusted_user_header)
        named = request.headers.getlist(header)
        if len(named) > 1:
            # a proxy that adds its header beside the client's (Apache's `RequestHeader add`)
            # passes the client's first: taken, a client named itself a manager
            raise ApiError(
                400, f"{header} was sent {len(named)} times; the proxy must send it once"
            )
        resolved = resolve_remote_user(settings.policy, named[0])
        if isinstance(resolved, Denied):
            raise ApiError(403, resolved.reason)
        return resolved
    raise ApiError(401, "sign in: send 'Authorization: Bearer <token>'", _CHALLENGE)


def _proxied(settings: ApiSettings, request: Request) -> bool:
    """Whether `request` is a trusted proxy's naming its user in `trusted_user_header`: from a
    trusted address, with the proxy's secret where one is set."""
    header = settings.trusted_user_header
    return (
        header is not None
        and header in request.headers
        and _peer(request) in settings.trusted_proxies
        and _from_proxy(settings, request)
    )


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
