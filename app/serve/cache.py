"""Keep the exposition text of one lake ready, so a scrape reads memory and never the lake.

The figures are read once at start, then again only when the lake's files changed: every
`refresh_s` a background thread compares the lake's state (the modification times of its
table folders, which every atomic write or compaction touches) with the one the text was
read at. A reading that fails keeps the last text and sets gpuledger_serve_refresh_failed;
its reason is logged once (until it changes) and said by /healthz.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from app.serve.exposition import render_metrics
from app.serve.figures import Figures, read_figures
from app.serve.settings import ServeSettings
from warehouse.errors import WarehouseError
from warehouse.lake import Lake

__all__ = ["MetricsCache", "lake_state"]

log = logging.getLogger(__name__)

Reader = Callable[[Lake, ServeSettings], Figures]
Clock = Callable[[], float]


def lake_state(lake: Lake) -> tuple[tuple[str, int], ...]:
    """The lake's folders (outside `_state/`) with their modification times (ns): a file
    landed, replaced or removed anywhere changes it."""
    if not lake.exists():
        return ()
    state: list[tuple[str, int]] = []
    for top, dirs, _files in os.walk(lake.root):
        if top == str(lake.root):  # its own time changes with _state/: a new table is a new path
            dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
            continue
        try:
            state.append((top, os.stat(top).st_mtime_ns))
        except FileNotFoundError:
            continue  # removed while we walked: the next look sees the change
    return tuple(sorted(state))


class MetricsCache:
    """The latest exposition text of `lake`, refreshed in the background when the lake changes.

    `reader` and `clock` are seams for tests (defaults: the sql/serve/ queries, wall time).
    """

    def __init__(
        self,
        lake: Lake,
        settings: ServeSettings,
        *,
        reader: Reader = read_figures,
        clock: Clock = time.time,
    ) -> None:
        self.lake = lake
        self.settings = settings
        self._reader = reader
        self._clock = clock
        self._lock = threading.Lock()
        self._state: tuple[tuple[str, int], ...] | None = None
        self._figures: Figures | None = None
        self._server: dict[str, float] = {}
        self._text = render_metrics(None, settings)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refreshes = 0
        # why the last reading failed (one line), None once one succeeds: said in /healthz,
        # logged once for each new reason rather than at every look
        self.error: str | None = None

    @property
    def text(self) -> str:
        """The exposition text served at /metrics."""
        with self._lock:
            return self._text

    def refresh(self, *, force: bool = False) -> bool:
        """Reread the figures if the lake changed since the last reading (or `force`);
        returns whether it read them."""
        state = lake_state(self.lake)
        if not force and state == self._state:
            return False
        started = time.monotonic()
        try:
            # read again when a writer replaced files under the reading (attribute rebuilding
            # the marts): that read failed, and /healthz said "stale", at every rebuild
            figures = self.lake.read_settled(lambda: self._reader(self.lake, self.settings))
        except Exception as exc:  # noqa: BLE001 (any failure: keep serving the last figures, say so)
            self._failed(exc)
            return False
        server = {
            "gpuledger_serve_computed_timestamp_seconds": self._clock(),
            "gpuledger_serve_compute_duration_seconds": time.monotonic() - started,
            "gpuledger_serve_refresh_failed": 0.0,
        }
        text = render_metrics(figures, self.settings, server=server)
        with self._lock:
            self._figures, self._server, self._text, self._state = figures, server, text, state
            self.refreshes += 1
        if self.error is not None:
            log.info("gpuledger serve: the figures of %s are read again", self.lake)
        self.error = None
        return True

    def _failed(self, exc: Exception) -> None:
        """Keep the last figures, flag them, and say why: a lake error (a damaged or unreadable
        file, named) in one line, anything else with its traceback; each reason once, not at
        every look until the lake is mended."""
        known = isinstance(exc, WarehouseError | OSError)
        reason = str(exc) if known else f"{type(exc).__name__}: {exc}"
        reason = reason.strip().splitlines()[0] if reason.strip() else type(exc).__name__
        if reason != self.error:
            message = "gpuledger serve: reading the figures of %s failed: %s; serving the last"
            if known:
                log.error(message, self.lake, reason)
            else:
                log.exception(message, self.lake, reason)
        self.error = reason
        with self._lock:
            self._server["gpuledger_serve_refresh_failed"] = 1.0
            self._text = render_metrics(self._figures, self.settings, server=self._server)

    def start(self) -> None:
        """Read the figures now, then look for changes every `refresh_s` in a daemon thread."""
        self.refresh(force=True)
        self._thread = threading.Thread(target=self._loop, name="gpuledger-serve", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.refresh_s):
            self.refresh()

    def stop(self) -> None:
        """Stop the background thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
