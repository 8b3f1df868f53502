"""One writer of a lake's derived state at a time: `<lake>/_state/locks/writer.lock`.

The marts, the findings and recommendations, and the attribution state are each rebuilt from
the raw tables by one step (attribute, detect) that reads what is there, then replaces it: two
such steps at once (`gpuledger detect` beside `gpuledger run`) would each keep what it read,
losing the other's writes (a finding's first detection time, a mart partition just written).
Every such step holds this lock while it runs:

- it is an `flock` on the lock file, so the operating system releases it when its holder exits,
  however it exits: no stale lock to remove by hand (on a local file system; NFS needs its
  `flock` emulation, which current Linux clients have);
- the holder writes who it is into the file (pid, host, command, step, start time, as JSON), so
  a second writer waits with a message naming it, or with `wait=False` fails at once naming
  it; a wait that lasts `timeout_s` fails naming it too;
- it is re-entrant within a thread (a command that holds it calls steps that take it again),
  and the threads of one process take turns on it like processes do.

Raw tables have their own lock per table (`layout.table_lock`): sources land beside a writer.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import functools
import inspect
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec, TypeVar

from warehouse import layout
from warehouse.errors import NotWritable, WarehouseError

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "Holder",
    "WriterBusy",
    "holder",
    "lock_path",
    "wait_limit",
    "writer_lock",
    "writer_step",
]

DEFAULT_TIMEOUT_S = 3600.0  # a first build of a large lake's marts takes minutes, not hours
_REPEAT_S = 60.0  # while waiting, say again who holds it this often
logger = logging.getLogger(__name__)
_wait_limit: ContextVar[float | None] = ContextVar("writer_lock_wait_limit", default=None)

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds the lock, as its holder recorded it."""

    pid: int
    host: str
    command: str
    step: str
    started: str  # ISO 8601, UTC

    def describe(self) -> str:
        return (
            f"pid {self.pid} on {self.host} ({self.command}, step {self.step}) since {self.started}"
        )


class WriterBusy(WarehouseError):
    """Another writer holds the lake's writer lock (and this one does not, or no longer, wait)."""

    def __init__(self, path: Path, held_by: Holder | None, waited_s: float | None) -> None:
        self.path = path
        self.holder = held_by
        who = held_by.describe() if held_by else "another process (it did not say which)"
        if waited_s is None:
            what = f"the lake is being written by {who}"
            hint = "run again once it finished, or without --no-wait to wait for it"
        else:
            what = f"gave up after {waited_s:.0f} s waiting for {who}"
            hint = "run again once it finished"
        super().__init__(f"{what} (lock {str(path)!r}); {hint}")


def lock_path(root: Path) -> Path:
    return root / "_state" / "locks" / "writer.lock"


def holder(root: Path) -> Holder | None:
    """Who holds the lake's writer lock now, if anyone said so (a holder that exited leaves its
    record until the next one replaces it: only trust it while the lock is taken)."""
    try:
        raw = json.loads(lock_path(root).read_text(encoding="utf-8") or "null")
        return Holder(**raw) if isinstance(raw, dict) else None
    except (OSError, ValueError, TypeError):
        return None


@dataclass(slots=True)
class _Entry:
    """This process's hold on one lock file: the threads' turn and the flock's depth."""

    turn: threading.RLock
    depth: int = 0
    fd: int = -1


_entries: dict[str, _Entry] = {}
_entries_lock = threading.Lock()


def _entry(path: Path) -> _Entry:
    with _entries_lock:
        return _entries.setdefault(str(path.resolve()), _Entry(threading.RLock()))


def _program() -> str:
    """`gpuledger detect`: the program and its subcommand (never the options: they may name
    files a user would rather not show)."""
    words = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"]
    words += [a for a in sys.argv[1:] if not a.startswith("-")][:1]
    return " ".join(words)


def _record(fd: int, step: str, command: str | None) -> None:
    body = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": command or _program(),
        "step": step,
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    data = json.dumps(body).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _flock(
    fd: int,
    root: Path,
    wait: bool,
    deadline: float,
    timeout_s: float,
    say: Callable[[str], None],
    poll_s: float,
) -> None:
    started = time.monotonic()
    said = -_REPEAT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        held_by = holder(root)
        if not wait:
            raise WriterBusy(lock_path(root), held_by, None)
        now = time.monotonic()
        if now >= deadline:
            raise WriterBusy(lock_path(root), held_by, timeout_s)
        if now - said >= _REPEAT_S:
            who = held_by.describe() if held_by else "another process"
            say(
                f"waiting for the lake's writer lock, held by {who} "
                f"({now - started:.0f} s so far, at most {timeout_s:.0f} s)"
            )
            said = now
        time.sleep(min(poll_s, max(0.0, deadline - now)))


@contextmanager
def wait_limit(seconds: float) -> Iterator[None]:
    """Wait at most `seconds` for the writer lock in the body (its steps' default waits): the
    service bounds a round's wait by its deadline, so waiting for a long `gpuledger attribute`
    fails the round, naming the holder, instead of looking like a hung step."""
    token = _wait_limit.set(seconds)
    try:
        yield
    finally:
        _wait_limit.reset(token)


@contextmanager
def writer_lock(
    root: Path,
    step: str,
    *,
    command: str | None = None,
    wait: bool = True,
    timeout_s: float | None = None,
    progress: Callable[[str], None] | None = None,
    poll_s: float = 0.2,
) -> Iterator[None]:
    """Hold the lake's writer lock while the body runs (see the module doc).

    `step`: what the holder does (attribute, detect), and `command` the program doing it
    (default: `gpuledger <subcommand>` from the command line), both recorded for the waiters.
    `wait=False`: raise WriterBusy at once when another holds it; else wait up to `timeout_s`
    (default: the `wait_limit` in force, else DEFAULT_TIMEOUT_S), telling `progress` (default:
    the log) who holds it when the wait starts and every minute.
    """
    if timeout_s is None:
        timeout_s = _wait_limit.get() or DEFAULT_TIMEOUT_S
    if not root.is_dir():  # no lake (yet): nothing to protect, and the step says so itself
        yield
        return
    say = progress or logger.warning
    path = lock_path(root)
    entry = _entry(layout.ensure_dir(path.parent) / path.name)
    deadline = time.monotonic() + timeout_s
    if not entry.turn.acquire(blocking=False):  # another thread of this process holds it
        if not wait:
            raise WriterBusy(path, holder(root), None)
        who = holder(root)
        say(f"waiting for the lake's writer lock, held by {who.describe() if who else 'a step'}")
        if not entry.turn.acquire(timeout=timeout_s):
            raise WriterBusy(path, holder(root), timeout_s)
    try:
        if entry.depth == 0:
            try:
                fd = layout.open_shared_file(path, os.O_RDWR)
            except OSError as exc:
                raise NotWritable(path, exc, "lock") from exc
            try:
                _flock(fd, root, wait, deadline, timeout_s, say, poll_s)
                _record(fd, step, command)
            except BaseException:
                os.close(fd)
                raise
            entry.fd = fd
        entry.depth += 1
        try:
            yield
        finally:
            entry.depth -= 1
            if entry.depth == 0:
                fd, entry.fd = entry.fd, -1
                try:
                    os.ftruncate(fd, 0)  # nobody holds it: no record to mislead a reader
                finally:
                    os.close(fd)  # releases the lock
    finally:
        entry.turn.release()


def writer_step(step: str, root_arg: str = "root") -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a step function to hold the writer lock of the lake its `root_arg` argument (a
    `Lake` or its root) names while it runs (waiting, as `writer_lock` does by default; a caller
    that holds it already, e.g. a command run with --no-wait, holds it on)."""

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(func)

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            from warehouse.lake import Lake

            where = signature.bind_partial(*args, **kwargs).arguments[root_arg]
            root = where.root if isinstance(where, Lake) else Path(where)
            with writer_lock(root, step):
                return func(*args, **kwargs)

        return wrapper

    return decorate
