"""Another process's hold on a lake's writer lock, for tests/warehouse/test_writer_lock.py.

A module of its own: the `spawn` child imports the module of its target before it runs it,
and this one needs only `warehouse.writer_lock` (0.06 CPU-s), where the test module would
bring the whole CLI with it (0.65 CPU-s, on the path of each test that waits for the child).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from warehouse.writer_lock import writer_lock

WAIT_S = 60.0


def hold(lake: str, held: Any, release: Any) -> None:
    """Hold the lake's writer lock as `gpuledger detect` would, until told to release it."""
    with writer_lock(Path(lake), "detect", command="gpuledger detect"):
        held.set()
        release.wait(WAIT_S)
