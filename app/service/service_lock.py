"""One `gpuledger run` per lake: `<lake>/_state/locks/service.lock`, held for the service's life.

Two services on one lake would overwrite each other's `_state/service.json` (`gpuledger
status` and /healthz describing whichever wrote last), collect every source twice and take
turns on the writer lock. The lock is an `flock`, released by the operating system when its
holder exits however it exits (no stale lock to remove by hand); its file names the holder
(pid, host, start) for the second service's error, and is emptied when the holder stops.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.errors import AppError
from warehouse import layout
from warehouse.errors import NotWritable
from warehouse.lake import Lake

__all__ = ["ServiceRunning", "service_lock"]


class ServiceRunning(AppError):
    """Another `gpuledger run` holds the lake's service lock."""


def _lock_file(lake: Lake) -> Path:
    return layout.ensure_dir(lake.state_dir() / "locks") / "service.lock"


def _holder(fd: int) -> str:
    """The holder the lock file names, in words."""
    try:
        raw = json.loads(os.pread(fd, 4096, 0).decode() or "null")
        return f"pid {int(raw['pid'])} on {raw['host']} since {raw['started']}"
    except (OSError, ValueError, TypeError, KeyError):
        return "another process (it did not say which)"


@contextmanager
def service_lock(lake: Lake) -> Iterator[None]:
    """Hold the lake's service lock while the body runs; ServiceRunning at once if another
    `gpuledger run` holds it."""
    path = _lock_file(lake)
    try:
        fd = layout.open_shared_file(path, os.O_RDWR)
    except OSError as exc:
        raise NotWritable(path, exc, "lock") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ServiceRunning(
                f"another gpuledger run serves the lake {str(lake.root)!r}: {_holder(fd)} "
                f"(lock {str(path)!r}); stop it first (`gpuledger status --lake "
                f"{lake.root}` shows what it does), or run single steps by hand (`gpuledger "
                "attribute`, `detect`: they take turns with it)"
            ) from None
        started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"pid": os.getpid(), "host": socket.gethostname(), "started": started}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(body).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # nobody holds it: no record to mislead a reader
    finally:
        os.close(fd)  # releases the lock
