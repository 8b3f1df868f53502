"""Tests that need a real external program, and the two loops that treat them differently.

A test is `live` when it needs a separate real program the Debian packages of `make system-deps`
bring: a service it starts (slurmctld/slurmd/slurmdbd with MariaDB and munge, Prometheus,
Chromium, a JVM for Spark) or a tool of one (promtool). In-process servers a test starts on
127.0.0.1 (aiosmtpd, http.server) are not live: they are Python, cheap, and always there.

- `make check` (the two-minute loop) runs `-m "not live and not slow"`: it needs no root, no apt
  package and no service.
- `make test` (CI) runs everything with GPULEDGER_REQUIRE_LIVE=1: a live test that skips (its
  program is missing, it cannot start) is reported as a failure, so a broken CI image cannot
  pass by skipping.

A fixture that starts a service is decorated with `live_service`; every test that uses one
(directly or through another fixture) must carry the `live` marker, or collection stops with
the list of offenders (see `unmarked_live`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

REQUIRE_LIVE_ENV = "GPULEDGER_REQUIRE_LIVE"
LIVE_ATTRIBUTE = "_gpuledger_live_service"

F = TypeVar("F", bound=Callable[..., object])


def live_service(func: F) -> F:
    """Mark a fixture function (below `@pytest.fixture`) as starting a real external program."""
    setattr(func, LIVE_ATTRIBUTE, True)
    return func


def is_live_service(func: object) -> bool:
    return bool(getattr(func, LIVE_ATTRIBUTE, False))


def require_live(environ: dict[str, str] | None = None) -> bool:
    """Whether a live test that skips is a failure (`make test` sets GPULEDGER_REQUIRE_LIVE=1)."""
    value = (os.environ if environ is None else environ).get(REQUIRE_LIVE_ENV, "")
    return value not in ("", "0")


def failed_skip(reason: str, *, live: bool, environ: dict[str, str] | None = None) -> str | None:
    """The failure a skip becomes: for a live test under GPULEDGER_REQUIRE_LIVE=1; else None."""
    if not live or not require_live(environ):
        return None
    return (
        f"live test skipped under {REQUIRE_LIVE_ENV}=1 (make test): {reason}; "
        "install the services with `make system-deps` and run as root"
    )


@dataclass(frozen=True)
class Collected:
    """What the marker check needs of one collected test."""

    nodeid: str
    markers: frozenset[str]
    live_fixtures: frozenset[str]  # the fixtures it uses that are decorated `live_service`


def unmarked_live(tests: Iterable[Collected]) -> list[str]:
    """One line per test that uses a live fixture without the `live` marker."""
    return [
        f"{test.nodeid} uses {', '.join(sorted(test.live_fixtures))} but is not marked live"
        for test in tests
        if test.live_fixtures and "live" not in test.markers
    ]
