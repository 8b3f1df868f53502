"""The only code that reads gpuledger's environment (the full TOML configuration comes later)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["lake_root"]


def lake_root() -> Path:
    """The lake root: $GPULEDGER_LAKE, else ./lake (DESIGN §3)."""
    return Path(os.environ.get("GPULEDGER_LAKE") or "lake")
