"""The check every HTTP source runs on a URL it is given, before it sends a request."""

from __future__ import annotations

from urllib.parse import urlsplit

from collector.errors import ConfigError

__all__ = ["check_http_url"]


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
            f"{what} URL {url!r} is not an http(s) URL with a host; expected e.g. {example}"
        )
