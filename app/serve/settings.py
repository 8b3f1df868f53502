"""The `[serve]` section: how `gpuledger serve` bounds its series and how often it rereads.

```toml
[serve]
address = "127.0.0.1"
port = 9747
max_job_series = 500   # per-job series for at most this many running jobs per cluster
refresh_s = 15         # look for a changed lake (and recompute) at most this often
```
"""

from __future__ import annotations

from dataclasses import dataclass

from app.config import positive_at_most_a_year, register_section, setting

__all__ = ["DEFAULT_WINDOWS_S", "ServeConfig", "ServeSettings"]

# The usage windows every cluster/account/partition series comes in, by label.
DEFAULT_WINDOWS_S: tuple[tuple[str, int], ...] = (("1d", 86400), ("7d", 7 * 86400))


def _port(v: int) -> str | None:
    return None if 0 <= v <= 65535 else "expected a port number 1-65535 (0: any free port)"


def _non_negative(v: int) -> str | None:
    return None if v >= 0 else "expected 0 or more"


@register_section("serve")
@dataclass(frozen=True, slots=True)
class ServeConfig:
    """Where `gpuledger serve` listens and how many series it exposes."""

    address: str = setting("127.0.0.1", "Address `gpuledger serve` listens on (0.0.0.0: all).")
    port: int = setting(9747, "Port of `gpuledger serve` (/metrics, /healthz).", _port)
    max_job_series: int = setting(
        500,
        "Per-job series for at most this many running jobs per cluster (the largest by GPUs); "
        "gpuledger_running_jobs_not_exported counts the rest.",
        _non_negative,
    )
    refresh_s: float = setting(
        15.0,
        "Seconds between looks at the lake: figures are recomputed when its files changed, "
        "so a scrape only reads memory.",
        positive_at_most_a_year,
    )


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """What the server needs: the `[serve]` section and the marts' bucket width (used where the
    lake cannot tell the width it was built with: sql/attribution/bucket_width.sql)."""

    max_job_series: int = 500
    refresh_s: float = 15.0
    bucket_s: int = 300
    windows_s: tuple[tuple[str, int], ...] = DEFAULT_WINDOWS_S
