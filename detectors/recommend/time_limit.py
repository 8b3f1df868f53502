"""stub"""

from __future__ import annotations

from typing import Any

KIND = "time_limit"


def recommend(*args: Any) -> list[Any]:
    return []
