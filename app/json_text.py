"""JSON as a command prints it: strict JSON, where a figure that is not a number (NaN or
infinite, from a file another tool wrote) is null, as the lake's contract says an unknown is."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

__all__ = ["dumps"]


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def dumps(value: Any, *, default: Callable[[Any], Any] = str, indent: int = 1) -> str:
    """`value` as JSON text (`default` for what JSON has no type for), NaN and ±inf as null."""
    return json.dumps(_finite(value), default=default, indent=indent, allow_nan=False)
