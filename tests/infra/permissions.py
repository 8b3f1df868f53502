"""Which files under a folder other users could read, write or enter."""

from __future__ import annotations

import stat
from pathlib import Path


def world_accessible(root: Path) -> list[str]:
    found = []
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        if mode & (stat.S_IROTH | stat.S_IWOTH | stat.S_IXOTH):
            found.append(f"{oct(stat.S_IMODE(mode))} {path.relative_to(root)}")
    return found
