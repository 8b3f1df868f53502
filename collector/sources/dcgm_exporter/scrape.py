"""Scrape dcgm-exporter /metrics endpoints and land each scrape in the lake.

`fetch(url, timeout_s) -> str` and `clock() -> aware datetime` are injected. Every scrape lands
under a batch id derived from (cluster, url, scrape time), so a retried write never duplicates
rows. A dead exporter is retried with backoff, counted and reported; it never stops the others.
The `interval_s` loop ends at the end of a round once `stop` is set (see `stop_on_signals`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import http.client
import logging
import signal
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Final
from urllib.parse import urlsplit

import pyarrow as pa

from collector.errors import CollectorError, ConfigError
from collector.sources.dcgm_exporter.exposition import parse_exposition
from collector.sources.dcgm_exporter.rows import observed_conditions, to_ms
from collector.sources.http_url import check_http_url, redact_url
from collector.state import arrow_blob
from warehouse import state_files
from warehouse.lake import Lake
from warehouse.writer import write_batch

__all__ = [
    "DEFAULT_SPAN_S",
    "Clock",
    "EventLatch",
    "ExporterUnavailable",
    "Fetch",
    "ScrapeOutcome",
    "ScrapeSummary",
    "batch_id_for",
    "check_url",
    "fetch_url",
    "scrape_exporters",
    "stop_on_signals",
    "utc_now",
]

logger = logging.getLogger(__name__)

SOURCE: Final = "dcgm-exporter"
DEFAULT_SPAN_S: Final = 30.0  # dcgm-exporter's default collect interval: what a --once row spans
DEFAULT_TIMEOUT_S: Final = 10.0
DEFAULT_ATTEMPTS: Final = 3
DEFAULT_BACKOFF_S: Final = 0.5  # first retry delay; doubles per attempt
MAX_COOLDOWN_ROUNDS: Final = 15  # a dead exporter is retried at least every 16 rounds
MAX_BODY_BYTES: Final = 64 << 20
MAX_WORKERS: Final = 16
STATE_FILE: Final = state_files.DCGM_EXPORTER.name

Fetch = Callable[[str, float], str]
Clock = Callable[[], dt.datetime]


class ExporterUnavailable(CollectorError):
    """An exporter could not be read (connection refused, timeout, HTTP error, oversized body)."""


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# Exporters are node-local endpoints: ignore http_proxy & co. from the environment.
_OPENER: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _read_by(response: http.client.HTTPResponse, deadline: float, url: str) -> bytes:
    """The body of `response`, at most MAX_BODY_BYTES + 1 of it, read a socket read at a time
    until it ends; ExporterUnavailable once `deadline` (time.monotonic) has passed."""
    parts: list[bytes] = []
    size = 0
    while size <= MAX_BODY_BYTES:
        if time.monotonic() > deadline:
            raise ExporterUnavailable(f"{redact_url(url)}: the response did not end in time")
        part = response.read1(min(1 << 16, MAX_BODY_BYTES + 1 - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts)


def fetch_url(url: str, timeout_s: float) -> str:
    """GET `url` and return its body as text; raise ExporterUnavailable on any failure.

    `timeout_s` bounds the whole body, not only each wait for a byte: an exporter sending one
    byte every 2 s held a collector past every deadline, and its thread kept the process from
    ending on SIGTERM (the service said "stopped" and went on running)."""
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    deadline = time.monotonic() + timeout_s
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            body = _read_by(response, deadline, url)
            declared = response.headers.get("Content-Length")
    except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError is an OSError
        if isinstance(exc, urllib.error.HTTPError):
            reason: object = f"HTTP {exc.code} {exc.reason}"
        else:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise ExporterUnavailable(f"{redact_url(url)}: {reason}") from exc
    if len(body) > MAX_BODY_BYTES:
        raise ExporterUnavailable(f"{redact_url(url)}: response larger than {MAX_BODY_BYTES} bytes")
    # A connection closed mid-body reads short without an error (read with a size): a cut
    # value ("16." of "16.365") would land as if scraped. The exposition format ends every
    # line, the last too, with a line feed.
    if declared is not None and declared.isdigit() and int(declared) != len(body):
        raise ExporterUnavailable(
            f"{redact_url(url)}: response cut short ({len(body)} of {declared} bytes)"
        )
    if body and not body.endswith(b"\n"):
        raise ExporterUnavailable(f"{redact_url(url)}: response cut short (no final line feed)")
    return body.decode("utf-8", errors="replace")


def batch_id_for(cluster: str, url: str, ts: dt.datetime) -> str:
    """The batch id of one scrape: the same (cluster, url, ms) always gives the same id."""
    ts_ms = to_ms(ts)
    digest = hashlib.sha256(f"{cluster}\n{url}\n{ts_ms}".encode()).hexdigest()[:16]
    return f"dcgm-{ts_ms}-{digest}"


@dataclass(frozen=True, slots=True)
class ScrapeOutcome:
    """One exporter in one round: what landed, or why nothing did."""

    url: str
    ts: dt.datetime | None
    attempts: int
    batch_id: str | None = None
    samples: int = 0
    events: int = 0
    job_gpus: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None


@dataclass(slots=True)
class ScrapeSummary:
    """Totals over every round of a `scrape_exporters` run."""

    rounds: int = 0
    scrapes: int = 0
    samples: int = 0
    events: int = 0
    job_gpus: int = 0
    retries: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)  # url → failed scrapes
    last_error: dict[str, str] = field(default_factory=dict)
    cooldown_skips: int = 0

    def add(self, outcome: ScrapeOutcome) -> None:
        self.retries += max(outcome.attempts - 1, 0)
        if outcome.error is not None:
            self.failures[outcome.url] += 1
            self.last_error[outcome.url] = outcome.error
            return
        self.scrapes += 1
        self.samples += outcome.samples
        self.events += outcome.events
        self.job_gpus += outcome.job_gpus
        self.skipped.update(outcome.counts)


class EventLatch:
    """Turn the health conditions seen at each scrape into transitions, remembered across runs.

    The exporter's XID gauge is sticky and throttle bits stay set for as long as they apply, so
    landing every scrape's conditions would repeat one XID thousands of times. A condition is
    landed when it appears or its code changes (`xid` code, `ecc_dbe` count, clock bitmask), and
    forgotten when a scrape of that GPU no longer shows it. State is kept per
    (cluster, GPU UUID, kind) in `<lake>/_state/dcgm_exporter.sqlite`, or in memory.
    """

    def __init__(
        self,
        path: Path | None,
        spec: state_files.StateFile = state_files.DCGM_EXPORTER,
        kinds: frozenset[str] | None = None,
    ) -> None:
        self._path = path
        self._spec = spec  # NVML_EVENTS for the NVML agent's, in its spool
        # the kinds of event that are conditions (None: every kind); a staged batch may hold
        # others (the NVML agent's XIDs and offline GPUs), which land once and are not latched
        self._kinds = kinds
        self._state: dict[tuple[str, str, str], int | None] = {}
        # batches staged (dcgm-exporter: scrapes run in threads) and not yet remembered
        self._staged: set[str] = set()
        self._lock = threading.Lock()
        if path is not None:
            with closing(self._connect()) as con:
                rows = con.execute("SELECT cluster, gpu_uuid, kind, code FROM event_latch")
                self._state = {(c, u, k): code for c, u, k, code in rows}

    def _connect(self) -> sqlite3.Connection:
        assert self._path is not None
        return state_files.open_state(self._path, self._spec)

    def transitions(self, events: pa.Table) -> pa.Table:
        """The rows of `events` (conditions present now) that are new or changed."""
        keep = [
            (key := (c, u, k)) not in self._state or self._state[key] != code
            for c, u, k, code in zip(*self._columns(events), strict=True)
        ]
        return events.filter(pa.array(keep, pa.bool_()))

    @staticmethod
    def _columns(events: pa.Table) -> tuple[list[str], list[str], list[str], list[int | None]]:
        return (
            events.column("cluster").to_pylist(),
            events.column("gpu_uuid").to_pylist(),
            events.column("kind").to_pylist(),
            events.column("code").to_pylist(),
        )

    def stage(self, batch_id: str, cluster: str, transitions: pa.Table) -> None:
        """Record `transitions` (of `transitions()`, for `cluster`) before they land as
        `batch_id`. A run killed after landing them but before `commit` would land them again,
        as new, at its next scrape; `land_staged` lands a staged batch again under its own
        batch_id instead (which replaces what it landed), so each lands once."""
        if self._path is None or transitions.num_rows == 0:
            return
        with closing(self._connect()) as con, con:
            con.execute(
                "INSERT OR REPLACE INTO event_outbox VALUES (?, ?, ?)",
                (batch_id, cluster, arrow_blob(transitions)),
            )
        with self._lock:
            self._staged.add(batch_id)

    def land_staged(self, cluster: str, land: Callable[[pa.Table, str], object]) -> int:
        """Land each batch of `cluster` staged but not committed (a run killed in between)
        again with `land(rows, batch_id)`, and remember its transitions; return how many.
        A batch the state file cannot decode is dropped with a warning."""
        if self._path is None:
            return 0
        with closing(self._connect()) as con:
            batches = con.execute(
                "SELECT batch_id, events FROM event_outbox WHERE cluster = ? ORDER BY batch_id",
                (cluster,),
            ).fetchall()
        for batch_id, blob in batches:
            rows: pa.Table | None
            try:
                rows = pa.ipc.open_stream(blob).read_all()
            except pa.ArrowException as exc:
                logger.warning(
                    "%s: the staged health events of batch %s do not decode (%s); dropped: "
                    "an event of theirs that landed may land once more",
                    self._path,
                    batch_id,
                    exc,
                )
                rows = None
            if rows is not None:
                land(rows, batch_id)
            with self._lock:
                self._staged.add(batch_id)
            self._remember(rows, gone=[], batch_id=batch_id)
        return len(batches)

    def commit(
        self,
        cluster: str,
        observed: set[tuple[str, str]],
        events: pa.Table,
        batch_id: str | None = None,
    ) -> None:
        """Remember `events` (after the transitions among them landed, staged as `batch_id`)
        as the conditions present now.

        A remembered condition is forgotten only where its (GPU UUID, kind) was `observed`,
        i.e. its source field was read: a sentinel or missing line does not clear it.
        """
        now = {(c, u, k) for c, u, k in zip(*self._columns(events)[:3], strict=True)}
        gone = [
            key
            for key in self._state
            if key[0] == cluster and (key[1], key[2]) in observed and key not in now
        ]
        self._remember(events, gone=gone, batch_id=batch_id)

    def _remember(
        self, events: pa.Table | None, *, gone: list[tuple[str, str, str]], batch_id: str | None
    ) -> None:
        """Forget `gone`, remember `events`' conditions and drop the staged `batch_id` (when it
        was staged), at once."""
        now = (
            {}
            if events is None
            else {
                (c, u, k): code
                for c, u, k, code in zip(*self._columns(events), strict=True)
                if self._kinds is None or k in self._kinds
            }
        )
        changed = {k: v for k, v in now.items() if k not in self._state or self._state[k] != v}
        for key in gone:
            del self._state[key]
        self._state.update(changed)
        with self._lock:
            staged = batch_id in self._staged
            self._staged.discard(batch_id or "")
        batch_id = batch_id if staged else None
        if self._path is None or not (gone or changed or batch_id):
            return
        with closing(self._connect()) as con, con:
            con.executemany(
                "DELETE FROM event_latch WHERE cluster = ? AND gpu_uuid = ? AND kind = ?", gone
            )
            con.executemany(
                "INSERT OR REPLACE INTO event_latch VALUES (?, ?, ?, ?)",
                [(*key, code) for key, code in changed.items()],
            )
            if batch_id is not None:
                con.execute("DELETE FROM event_outbox WHERE batch_id = ?", (batch_id,))


def _has_lines(text: str) -> bool:
    """Whether `text` holds any line besides blanks and # comments."""
    return any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines())


def check_url(url: str) -> None:
    """Raise ConfigError unless `url` is an http(s) URL with a host."""
    check_http_url(url, "exporter", "http://node01:9400/metrics")


def _check_config(
    urls: Sequence[str], cluster: str, interval_s: float | None, attempts: int
) -> list[str]:
    if not cluster.strip():
        raise ConfigError("cluster name is empty; expected e.g. --cluster della")
    if not urls:
        raise ConfigError("no exporter URL given; expected e.g. --url http://node01:9400/metrics")
    for url in urls:
        check_url(url)
    if interval_s is not None and not interval_s > 0:
        raise ConfigError(f"interval {interval_s!r} s must be positive")
    if attempts < 1:
        raise ConfigError(f"attempts {attempts!r} must be at least 1")
    return list(dict.fromkeys(urls))


def scrape_exporters(
    urls: Sequence[str],
    cluster: str,
    lake: Lake,
    *,
    fetch: Fetch = fetch_url,
    clock: Clock = utc_now,
    interval_s: float | None = None,
    span_s: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    attempts: int = DEFAULT_ATTEMPTS,
    backoff_s: float = DEFAULT_BACKOFF_S,
    stop: threading.Event | None = None,
    sleep: Callable[[float], object] | None = None,
    on_scrape: Callable[[ScrapeOutcome], None] | None = None,
    max_rounds: int | None = None,
    event_latch: EventLatch | None = None,
) -> ScrapeSummary:
    """Scrape every URL once (`interval_s` None) or every `interval_s` seconds until `stop`.

    Args:
        span_s: the `interval_s` column of the rows (default: `interval_s`, else 30 s).
        attempts: tries per exporter per round, `backoff_s` × 2^k apart (`sleep`, default
            `stop.wait`). An exporter that failed a round sits out 2^(k-1) - 1 following rounds
            (at most 15) after its k-th consecutive failed round.
        clock: called from the fetching threads, just before each attempt.
        on_scrape: called with each exporter's outcome as soon as it has landed (or failed).
        event_latch: where health-condition transitions are remembered (default: the lake's
            `_state/dcgm_exporter.sqlite`).

    Raises ConfigError on bad configuration; a WarehouseError from the writer stops the run.
    """
    urls = _check_config(urls, cluster, interval_s, attempts)
    stop = stop or threading.Event()
    wait = sleep or stop.wait
    span = float(span_s if span_s is not None else interval_s or DEFAULT_SPAN_S)
    latch = event_latch or EventLatch(lake.state_dir() / STATE_FILE)
    # transitions a killed run landed (or not) without remembering them: landed once, here
    latch.land_staged(
        cluster, lambda rows, batch_id: write_batch(lake.root, "gpu_events", rows, batch_id)
    )
    summary = ScrapeSummary()
    failed_rounds: Counter[str] = Counter()
    cooldown: Counter[str] = Counter()

    def fetch_with_retries(url: str) -> tuple[dt.datetime | None, str | None, int, str | None]:
        error = "not tried"
        for attempt in range(1, attempts + 1):
            ts = clock()
            try:
                return ts, fetch(url, timeout_s), attempt, None
            except (CollectorError, OSError, http.client.HTTPException) as exc:
                error = str(exc).removeprefix(
                    f"{redact_url(url)}: "
                )  # outcomes name the URL themselves
                logger.info(
                    "%s: attempt %d/%d failed: %s", redact_url(url), attempt, attempts, error
                )
            if attempt < attempts and not stop.is_set():
                wait(backoff_s * 2 ** (attempt - 1))
            if stop.is_set():
                return None, None, attempt, f"{error} (stopped before retrying)"
        return None, None, attempts, error

    def land(url: str, ts: dt.datetime, text: str, tries: int) -> ScrapeOutcome:
        parsed = parse_exposition(
            text,
            cluster=cluster,
            ts=ts,
            interval_s=span,
            source=SOURCE,
            default_node=urlsplit(url).hostname,
        )
        found = parsed.samples.num_rows + parsed.events.num_rows + parsed.job_gpus.num_rows
        if found == 0 and _has_lines(text):
            # an HTML page, another exporter's metrics: a wrong URL, not a GPU-less node
            return ScrapeOutcome(
                url=url,
                ts=None,
                attempts=tries,
                counts=parsed.counts,
                examples=parsed.examples,
                error="answered, but with no DCGM metric; expected dcgm-exporter's /metrics "
                "(e.g. http://node01:9400/metrics)",
            )
        batch_id = batch_id_for(cluster, url, ts)
        events = latch.transitions(parsed.events)
        latch.stage(batch_id, cluster, events)
        write_batch(lake.root, "gpu_samples", parsed.samples, batch_id)
        write_batch(lake.root, "job_gpus", parsed.job_gpus, batch_id)
        write_batch(lake.root, "gpu_events", events, batch_id)
        latch.commit(cluster, observed_conditions(parsed.samples), parsed.events, batch_id)
        if parsed.counts:
            logger.info("%s: skipped or nulled %s", redact_url(url), parsed.counts)
        return ScrapeOutcome(
            url=url,
            ts=ts,
            attempts=tries,
            batch_id=batch_id,
            samples=parsed.samples.num_rows,
            events=events.num_rows,
            job_gpus=parsed.job_gpus.num_rows,
            counts=parsed.counts,
            examples=parsed.examples,
        )

    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(urls))) as pool:
        next_round = time.monotonic()
        while True:
            due = [u for u in urls if cooldown[u] == 0]
            for url in urls:
                if cooldown[url]:
                    cooldown[url] -= 1
                    summary.cooldown_skips += 1
            futures = {url: pool.submit(fetch_with_retries, url) for url in due}
            for url in due:  # in the given order; the others keep fetching meanwhile
                ts, text, tries, error = futures[url].result()
                if error is not None or ts is None or text is None:
                    failed_rounds[url] += 1
                    cooldown[url] = min(2 ** (failed_rounds[url] - 1) - 1, MAX_COOLDOWN_ROUNDS)
                    # reported through the outcome (on_scrape, summary), so only at info
                    logger.info(
                        "%s: not scraped after %d attempt(s): %s", redact_url(url), tries, error
                    )
                    outcome = ScrapeOutcome(url=url, ts=None, attempts=tries, error=error)
                else:
                    failed_rounds[url] = 0
                    outcome = land(url, ts, text, tries)
                summary.add(outcome)
                if on_scrape is not None:
                    on_scrape(outcome)
            summary.rounds += 1
            if interval_s is None or stop.is_set():
                break
            if max_rounds is not None and summary.rounds >= max_rounds:
                break
            next_round += interval_s
            delay = next_round - time.monotonic()
            if delay < 0:  # the round overran the interval: start the next one now
                logger.warning("scrape round took %.1f s longer than the interval", -delay)
                next_round = time.monotonic()
                delay = 0.0
            if stop.wait(delay):
                break
    return summary


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """While inside, SIGINT/SIGTERM set `stop` (the current round finishes its writes).

    A second signal raises KeyboardInterrupt, for a fetch that hangs. Only the main thread can
    install handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.getsignal(sig) for sig in signals}

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        logger.warning("signal %d: stopping after the current round", signum)
        stop.set()

    for sig in signals:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
