"""The `[api]` section: how the read-only HTTP API knows who is asking.

```toml
[api]
tokens_file = "/etc/gpuledger/api-tokens"   # lines '<token> <user> [manager]', chmod 600
trusted_user_header = "X-Remote-User"       # optional: a reverse proxy's authenticated user
trusted_proxies = ["127.0.0.1"]             # …believed only from these addresses
# and only with the proxy's secret (GPULEDGER_API_PROXY_SECRET or proxy_secret_file), which
# the proxy sends in X-Gpuledger-Proxy-Secret: on a host where users have shells, anyone can
# reach 127.0.0.1 and send a header
```

Who sees what follows the dashboard (`[dashboard] managers`, `users`, `allowed_domains`):
a token's user sees their own jobs and usage, a `manager` token everything; a user named by
the trusted header is mapped to a scheduler user as sign-ins are (app.access).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.access import AccessPolicy
from app.config import ConfigError, Secret, access_policy, register_section, setting

if TYPE_CHECKING:
    from app.api.tokens import Tokens, TokensFile
    from app.config import Config

__all__ = ["PROXY_SECRET_HEADER", "ApiConfig", "ApiSettings", "normal_address"]


def _header_name(v: str) -> str | None:
    ok = v and all(c.isalnum() or c == "-" for c in v)
    return None if ok else "expected an HTTP header name, e.g. 'X-Remote-User'"


def _addresses(v: tuple[str, ...]) -> str | None:
    for address in v:
        try:
            ipaddress.ip_address(address.strip())
        except ValueError:
            return f"expected IP addresses, e.g. '127.0.0.1' ({address!r})"
    return None


def normal_address(text: str) -> str:
    """An address as the peer's is written (`0:0:0:0:0:0:0:1` is `::1`, an IPv4-mapped one
    IPv4: app.api.auth._peer), so that any form given matches it."""
    address = ipaddress.ip_address(text.strip())
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return str(mapped or address)


def _positive(v: float) -> str | None:
    return None if v > 0 else "expected a number above 0"


def _long_secret(text: str) -> str | None:
    if len(text) < 16 or not text.isascii() or any(c.isspace() for c in text):
        return "expected at least 16 ASCII characters without spaces (a header value)"
    return None


@register_section("api")
@dataclass(frozen=True, slots=True)
class ApiConfig:
    """Who may read the HTTP API (`gpuledger serve`, /api/v1): bearer tokens and, optionally,
    a trusted reverse proxy's user header."""

    tokens_file: Path | None = setting(
        None,
        "File of '<token> <user> [manager]' lines, one per token; not world-readable nor "
        "group-writable (chmod 600).",
    )
    trusted_user_header: str | None = setting(
        None,
        "Header naming the user a reverse proxy authenticated (e.g. X-Remote-User); unset: "
        "only tokens.",
        _header_name,
    )
    trusted_proxies: tuple[str, ...] = setting(
        ("127.0.0.1", "::1"),
        "Addresses whose trusted_user_header is believed; from any other it is ignored.",
        _addresses,
    )
    proxy_secret: Secret | None = setting(
        None,
        "A secret the reverse proxy sends in the X-Gpuledger-Proxy-Secret header with the "
        "user header, which is believed only with it (env or proxy_secret_file only): the "
        "proxy's address alone lets in every local user of its host.",
        _long_secret,
        secret=True,
    )
    refresh_s: float = setting(
        60.0,
        "Seconds before the API reopens the lake to see files landed since (in the background).",
        _positive,
    )


# the header a trusted proxy sends `[api] proxy_secret` in
PROXY_SECRET_HEADER = "X-Gpuledger-Proxy-Secret"


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """What the API runs with: the tokens file (re-read when it changes), the proxy header and
    addresses it trusts, the dashboard's access policy (managers, identity mapping), the
    refresh period."""

    tokens: TokensFile | Tokens | None
    trusted_user_header: str | None
    trusted_proxies: frozenset[str]
    policy: AccessPolicy
    refresh_s: float = 60.0
    proxy_secret: Secret | None = None

    @property
    def enabled(self) -> bool:
        """Whether anyone can be let in: a tokens file or a trusted proxy header is set."""
        return self.tokens is not None or self.trusted_user_header is not None

    @classmethod
    def from_config(cls, config: Config) -> ApiSettings:
        """The `[api]` and `[dashboard]` sections' settings, the tokens file read and checked.

        Raises ConfigError (one line, never a token) when the tokens file is not usable.
        """
        from app.api.tokens import TokensFile, TokensFileError
        from app.config import DashboardConfig

        cfg = config.section(ApiConfig)
        try:
            tokens = None if cfg.tokens_file is None else TokensFile.open(cfg.tokens_file)
        except TokensFileError as exc:
            raise ConfigError(str(exc)) from None
        return cls(
            tokens=tokens,
            trusted_user_header=cfg.trusted_user_header,
            trusted_proxies=frozenset(normal_address(a) for a in cfg.trusted_proxies),
            policy=access_policy(config.section(DashboardConfig)),
            refresh_s=cfg.refresh_s,
            proxy_secret=cfg.proxy_secret,
        )
