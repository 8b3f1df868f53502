"""The only code that reads gpuledger's environment (the full TOML configuration comes later)."""

from __future__ import annotations

import os
from pathlib import Path

from app.access import AccessPolicy

__all__ = ["dashboard_access_policy", "dashboard_cost_per_gpu_hour", "lake_root"]

DEFAULT_COST_PER_GPU_HOUR = 2.0


def lake_root() -> Path:
    """The lake root: $GPULEDGER_LAKE, else ./lake (DESIGN §3)."""
    return Path(os.environ.get("GPULEDGER_LAKE") or "lake")


def dashboard_access_policy() -> AccessPolicy:
    """Who may see what on the dashboard.

    $GPULEDGER_DASHBOARD_MANAGERS: comma-separated user names or e-mail addresses who see every
    job. When it is unset or empty, access is open (no sign-in, everyone sees everything).
    """
    raw = os.environ.get("GPULEDGER_DASHBOARD_MANAGERS", "")
    managers = frozenset(m.strip().lower() for m in raw.split(",") if m.strip())
    return AccessPolicy(managers=managers)


def dashboard_cost_per_gpu_hour() -> float:
    """Price of one GPU-hour for the dashboard's cost figures.

    From $GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR, else DEFAULT_COST_PER_GPU_HOUR.

    Raises ValueError naming the value when it is not a non-negative number.
    """
    raw = os.environ.get("GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR")
    if not raw:
        return DEFAULT_COST_PER_GPU_HOUR
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ValueError(
            f"GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR={raw!r} is not a non-negative number"
        )
    return value
