"""The check every HTTP source runs on a URL it is given, before it sends a request, and the one
way a URL is shown: without the `user:password@` a URL may carry, nor the value of a query
parameter that names a credential (`?token=…`, `api_key`, `password`…) (`redact_url`)."""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote, urlsplit, urlunsplit

from collector.errors import ConfigError

__all__ = ["check_http_url", "redact_url", "redact_urls", "split_credentials"]

# `scheme://user:pass@` (or `scheme://user@`) inside any text: the userinfo part of a URL
_USERINFO: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")
# a query parameter naming a credential (`?token=…`, `&api_key=…`, `access_token`, `sig`…),
# its value up to the next `&`, `#` or space
_SECRET_PARAM: Final = re.compile(
    r"(?i)([?&](?:[a-z0-9]+[_.-])*(?:token|secret|password|passwd|apikey|key|sig|signature|auth)"
    r"(?:[_.-][a-z0-9_.-]*)?=)[^&#\s]*"
)


def redact_url(url: str) -> str:
    """`url` without its userinfo (`http://u:pw@host/x` → `http://host/x`) and with the value of
    each query parameter naming a credential hidden (`?token=***`): the form to show in errors,
    logs, `config check`, status files. Anything else is returned unchanged."""
    return redact_urls(url)


def redact_urls(text: str) -> str:
    """`text` (an error message, say) with the userinfo of every URL in it removed, and the
    value of each query parameter naming a credential hidden."""
    return _SECRET_PARAM.sub(r"\1***", _USERINFO.sub(r"\1", text))


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """(`url` without userinfo, user, password) — user and password percent-decoded, None when
    the URL carries none."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    host = parts.netloc.rpartition("@")[2]
    clean = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return clean, user, password


def check_http_url(url: str, what: str, example: str) -> None:
    """Raise ConfigError unless `url` is an http(s) URL with a host (and a valid port), naming
    `what` it is for ("exporter", "Prometheus") and an `example` of a good one."""
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018  # raises ValueError on a port that is not a number 0-65535
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(
            f"{what} URL {redact_url(url)!r} is not an http(s) URL with a host; "
            f"expected e.g. {example}"
        )
