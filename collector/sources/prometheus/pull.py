"""Pull dcgm-exporter telemetry out of Prometheus into the lake, window by window, resumably.

Time is cut into windows on a fixed grid (`window_s`, dividing a day, so a window never spans two
date partitions). The families pulled are those of `PullConfig.columns` (`prometheus.columns`:
by default the gpu_samples columns something downstream reads) that Prometheus holds. Raw
samples are read, never a step-resampled `query_range`, one of two ways (`protocol`):

- remote read (`prometheus.remote_read`): Prometheus ships its stored XOR chunks for every
  family of several consecutive windows in one request (about `GROUP_SAMPLES` samples, at most
  `GROUP_SPAN_S`, sized from the first window), decoded here; `auto` uses it where the server
  answers streamed chunks and falls back to JSON (once, logged) where it does not;
- the JSON API: per window and family, a range selector in an instant query
  (`DCGM_FI_DEV_GPU_UTIL{sel}[3600001ms]` at the window's last ms), the way
  `get_metric_range_data` chunks.

Both land identical rows. Requests run on a bounded thread pool with timeouts and exponential
backoff; a window is pivoted
(`prometheus.pivot`) and landed under a batch id derived from (cluster, selector, window), so
landing it again replaces it. The checkpoint (`prometheus.state`) then moves past every window
that was complete; a rerun restarts there. Without `until` the pull follows live data.
Configured application throughput counters (`PullConfig.throughput`, as given: the selector is
not added) are fetched per window the same way and land in `app_throughput` under the window's
batch id (`prometheus.throughput`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import logging
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

import pyarrow as pa

from collector.errors import ConfigError
from collector.sources.dcgm_exporter.fields import FIELDS, METRIC_COLUMNS
from collector.sources.dcgm_exporter.rows import to_ms
from collector.sources.prometheus.blocks import (
    PrometheusResponseError,
    ResponseNotJson,
    SeriesBlock,
    block_from_body,
)
from collector.sources.prometheus.columns import READ_COLUMNS, families_of
from collector.sources.prometheus.pivot import (
    EVENT_COLUMNS,
    LOOKBACK_MS,
    TargetLabels,
    WindowRows,
    pivot_window,
)
from collector.sources.prometheus.remote_read import (
    Matcher,
    RangeQuery,
    RemoteReadUnsupported,
    blocks_from_stream,
    encode_read_request,
    parse_selector,
)
from collector.sources.prometheus.state import Checkpoint, CheckpointStore, source_key
from collector.sources.prometheus.throughput import (
    DEFAULT_JOB_LABEL,
    pivot_throughput,
    validate_throughput,
)
from collector.sources.prometheus.transport import (
    ChunkReader,
    PrometheusQueryError,
    PrometheusUnavailable,
    QueryTooLarge,
    Transport,
)
from warehouse.lake import Lake
from warehouse.writer import write_batch

__all__ = [
    "PROTOCOLS",
    "PullConfig",
    "PullSummary",
    "WindowLanded",
    "batch_id_for",
    "pull",
    "range_query",
]

logger = logging.getLogger(__name__)

DAY_S: Final = 86_400
MIN_SPLIT_MS: Final = 60_000  # a query for less than a minute is not split further
MAX_BACKOFF_S: Final = 30.0
PROTOCOLS: Final = ("auto", "remote-read", "json")
GROUP_SAMPLES: Final = 250_000  # samples one remote read aims at (memory, and time to first row)
# remote reads in flight: one decoding (CPU, mostly under the GIL) while the next is sent
GROUPS_AHEAD: Final = 2
GROUP_SPAN_S: Final = 6 * 3600  # the most time one remote read covers
_WRITES_AHEAD: Final = 2  # windows pivoted and waiting for the writer, at most
_TABLES_AT_ONCE: Final = 3  # gpu_samples, job_gpus, gpu_events (app_throughput waits its turn)
SAVE_EVERY_S: Final = 1.0  # the checkpoint's SQLite commit (an fsync) at most this often
_EVENT_FAMILIES: Final = frozenset(n for n, s in FIELDS.items() if s.column in EVENT_COLUMNS)
# Both exporter generations (and 1.x names); the families pulled are those Prometheus holds.
_NAME_MATCH: Final = "DCGM_FI_.+|dcgm_.+"

Clock = Callable[[], dt.datetime]
_Answer = TypeVar("_Answer")


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class PullConfig:
    """What to pull. `selector`: label matchers added to every query, e.g. `cluster="a"`.

    `since`/`until` bound the pull (None: resume from the checkpoint, else the last hour; and
    follow live data). `settle_s`: how old a window's end must be before it counts as complete
    (a scrape can land that late). `interval_s`: the span of a row; None measures it.
    `columns`: the gpu_samples columns to fill (`prometheus.columns.parse_columns`).
    `protocol`: `auto` (remote read where the server streams chunks, else JSON),
    `remote-read` or `json`.
    """

    cluster: str
    selector: str = ""
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    window_s: int = 3600
    parallel: int = 4
    retries: int = 4
    backoff_s: float = 1.0
    poll_s: float = 30.0
    settle_s: float = 60.0
    interval_s: float | None = None
    reset: bool = False
    # application throughput: (counter name, series selector) pairs, and the label naming the job
    throughput: tuple[tuple[str, str], ...] = ()
    throughput_job_label: str = DEFAULT_JOB_LABEL
    columns: tuple[str, ...] = READ_COLUMNS
    protocol: str = "auto"

    def validate(self) -> None:
        if not self.cluster.strip():
            raise ConfigError("cluster must not be empty")
        if not 60 <= self.window_s <= DAY_S or DAY_S % self.window_s:
            raise ConfigError(
                f"window {self.window_s!r} s must divide a day and be 60 s to 1 day "
                "(e.g. 600, 3600, 21600)"
            )
        if "{" in self.selector or "}" in self.selector:
            raise ConfigError(
                f"selector {self.selector!r}: give label matchers without braces, "
                'e.g. cluster="a",job="dcgm"'
            )
        for name, when in (("since", self.since), ("until", self.until)):
            if when is not None and when.tzinfo is None:
                raise ConfigError(f"{name} {when!r} has no time zone; expected UTC")
        if self.since and self.until and self.until <= self.since:
            raise ConfigError(f"until {self.until.isoformat()} must be after since")
        if self.parallel < 1 or self.retries < 0 or self.poll_s <= 0:
            raise ConfigError("parallel must be >= 1, retries >= 0 and poll_s > 0")
        validate_throughput(self.throughput, self.throughput_job_label)
        unknown = sorted(set(self.columns) - set(METRIC_COLUMNS))
        if not self.columns or unknown:
            raise ConfigError(
                f"columns: {', '.join(unknown) or 'none given'}; expected gpu_samples metric "
                f"columns ({', '.join(METRIC_COLUMNS)})"
            )
        if self.protocol not in PROTOCOLS:
            raise ConfigError(f"protocol {self.protocol!r}: expected one of {', '.join(PROTOCOLS)}")
        if self.protocol == "remote-read":
            parse_selector(self.selector)  # remote read needs plain label matchers


@dataclass(frozen=True, slots=True)
class WindowLanded:
    """Progress: one window landed (`complete`: it will not change and the checkpoint moved)."""

    start: dt.datetime
    end: dt.datetime
    samples: int
    events: int
    job_gpus: int
    complete: bool
    done: int  # windows landed so far in this pass
    total: int  # windows in this pass
    throughput: int = 0  # app_throughput rows


@dataclass(slots=True)
class PullSummary:
    """What a pull landed, what it skipped by reason, and where the checkpoint stands."""

    windows: int = 0
    samples: int = 0
    events: int = 0
    job_gpus: int = 0
    throughput: int = 0  # app_throughput rows
    passes: int = 0
    families: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    first: dt.datetime | None = None
    last: dt.datetime | None = None
    checkpoint: dt.datetime | None = None
    stopped: bool = False
    # why a pass asked Prometheus for nothing (the range done already, or not begun yet)
    nothing_to_pull: str | None = None


@dataclass(frozen=True, slots=True)
class _Pending:
    """A window asked for: its DCGM blocks come from `group` (a remote read of several
    windows) or `dcgm` (JSON queries, one per family); `app` its throughput queries."""

    begin: int
    asked_ms: int
    group: Future[dict[int, tuple[list[SeriesBlock], WindowRows]]] | None
    dcgm: list[Future[list[SeriesBlock]]]
    app: list[Future[list[SeriesBlock]]]


class _Stopped(Exception):
    """Internal: the stop event was set while waiting to retry."""


def _from_ms(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def batch_id_for(cluster: str, source: str, start_ms: int, window_s: int) -> str:
    """The batch id of one window: landing the window again replaces it."""
    return f"prometheus-{cluster}-{source}-{_from_ms(start_ms):%Y%m%dT%H%M%S}Z-{window_s}s"


def range_query(family: str, selector: str, start_ms: int, end_ms: int) -> tuple[str, float]:
    """The instant query of a range selector that returns `family`'s samples in [start, end).

    Evaluated at the last millisecond of the window; the range reaches one ms before `start`
    so that both the closed ranges of Prometheus 2 and the left-open ones of 3 include it
    (the pivot drops what lies outside).
    """
    matchers = f"{{{selector}}}" if selector.strip() else ""
    return _ranged(f"{family}{matchers}", start_ms, end_ms)


def _ranged(series: str, start_ms: int, end_ms: int) -> tuple[str, float]:
    """`series` (a selector) with the range of `range_query`, and the time to evaluate it at."""
    return f"{series}[{end_ms - start_ms + 1}ms]", (end_ms - 1) / 1000.0


class _Puller:
    def __init__(
        self, cfg: PullConfig, root: Path, transport: Transport, clock: Clock, stop: threading.Event
    ) -> None:
        self.cfg = cfg
        self.root = root
        self.transport = transport
        self.clock = clock
        self.stop = stop
        self.source = source_key(cfg.selector)
        self.store = CheckpointStore(root)
        self._refuse_a_twin_selector()
        self.window_ms = cfg.window_s * 1000
        self.summary = PullSummary()
        self.targets: TargetLabels = {}
        self.spacing_s: float | None = None  # the last window's measured sample spacing
        self.wanted = families_of(cfg.columns)
        self.reader, self.matchers = self._remote_reader()
        self.group: int | None = None  # windows per remote read; None: not measured yet
        self.write_failed = False
        self.table_pool: ThreadPoolExecutor | None = None  # writes a window's tables at once
        self.unsaved: int | None = None  # complete windows landed up to here, not yet saved
        self.saved_at = time.monotonic()

    def _refuse_a_twin_selector(self) -> None:
        """ConfigError where this lake pulled the cluster with the same matchers written
        otherwise (in another order, spaced differently), or with a selector whose matchers
        are a part of these or these a part of its (the one with fewer selects every series
        the other does: none at all selects every series). The selector's text names a pull's
        checkpoint and batches, so the series both select would land a second time."""
        try:
            mine = frozenset(parse_selector(self.cfg.selector))
        except ConfigError:
            return  # not plain matchers: only its own text selects the same
        for source, selector in self.store.selectors(self.cfg.cluster):
            try:
                theirs = frozenset(parse_selector(selector))
            except ConfigError:
                continue
            if source == self.source:
                continue
            where = f"cluster {self.cfg.cluster!r}: this lake was pulled with the selector"
            if theirs == mine:
                raise ConfigError(
                    f"{where} {selector!r}, the same matchers as {self.cfg.selector!r} written "
                    f"otherwise; write it as {selector!r}, or its windows land twice"
                )
            if theirs <= mine or mine <= theirs:
                wider, narrower = (selector, self.cfg.selector)
                if mine <= theirs:
                    wider, narrower = narrower, wider
                widest = repr(wider) if wider else "no selector"
                raise ConfigError(
                    f"{where} {selector!r}: {widest} selects every series {narrower!r} does, "
                    "so those would land twice; pull the cluster with one selector, or with "
                    "selectors that share no series"
                )

    def _remote_reader(self) -> tuple[ChunkReader | None, tuple[Matcher, ...]]:
        """The transport as a remote reader, and the selector's matchers; None: use JSON."""
        if self.cfg.protocol == "json":
            return None, ()
        if not isinstance(self.transport, ChunkReader):
            if self.cfg.protocol == "remote-read":
                raise ConfigError("protocol remote-read: this transport has no remote read")
            return None, ()
        try:
            return self.transport, parse_selector(self.cfg.selector)
        except ConfigError:
            if self.cfg.protocol == "remote-read":
                raise
            logger.info(
                "selector %r is not plain label matchers: using the JSON API", self.cfg.selector
            )
            return None, ()

    # ------------------------------------------------------------------ requests

    def _retrying(self, what: str, call: Callable[[], _Answer]) -> _Answer:
        attempts = self.cfg.retries + 1
        for attempt in range(attempts):
            try:
                return call()
            except PrometheusUnavailable as exc:
                if attempt + 1 == attempts:
                    raise PrometheusUnavailable(
                        f"Prometheus at {self.transport.url} did not answer {what} after "
                        f"{attempts} attempt(s): {exc}"
                    ) from exc
                delay = min(self.cfg.backoff_s * 2**attempt, MAX_BACKOFF_S)
                logger.warning("%s failed (%s); retrying in %.1f s", what, exc, delay)
                if self.stop.wait(delay):
                    raise _Stopped from exc
        raise AssertionError("unreachable")

    def _fetch(
        self, family: str, start_ms: int, end_ms: int, series: str | None = None
    ) -> list[SeriesBlock]:
        """One family's samples in [start, end), split in halves while Prometheus says too big.

        `series`: a full series selector to query instead of `family{selector}` (throughput
        counters; the block is still named `family`).
        """
        if series is None:
            query, at_s = range_query(family, self.cfg.selector, start_ms, end_ms)
        else:
            query, at_s = _ranged(series, start_ms, end_ms)

        def block() -> SeriesBlock:
            body = self.transport.range_vector(query, at_s)
            try:
                return block_from_body(family, body)
            except ResponseNotJson as exc:  # cut short: asked again, as a failed request
                raise PrometheusUnavailable(str(exc)) from exc

        try:
            return [self._retrying(f"query {query}", block)]
        except QueryTooLarge:
            if end_ms - start_ms <= MIN_SPLIT_MS:
                raise
            mid = start_ms + (end_ms - start_ms) // 2
            return self._fetch(family, start_ms, mid, series) + self._fetch(
                family, mid, end_ms, series
            )

    def _window_blocks(self, family: str, start_ms: int, end_ms: int) -> list[SeriesBlock]:
        lookback = LOOKBACK_MS if family in _EVENT_FAMILIES else 0
        return self._fetch(family, start_ms - lookback, end_ms)

    def _read_group(
        self, reader: ChunkReader, start_ms: int, end_ms: int, families: list[str], now_ms: int
    ) -> dict[int, tuple[list[SeriesBlock], WindowRows]]:
        """Every family's samples of the windows in [start, end) in one remote read, over the
        times the JSON queries of those windows would cover (event families with look-back),
        cut per window and pivoted here, in the worker (without the spacing fallback, which
        only the window before can give: `_rows_of` pivots again where it matters)."""
        queries = [
            RangeQuery(
                # the bounds of `range_query` (Prometheus 2's closed range: 2 ms before start)
                start_ms - lookback - 2,
                end_ms - 1,
                (Matcher("__name__", "=~", "|".join(names)), *self.matchers),
            )
            for lookback, names in (
                (0, [f for f in families if f not in _EVENT_FAMILIES]),
                (LOOKBACK_MS, [f for f in families if f in _EVENT_FAMILIES]),
            )
            if names
        ]
        request = encode_read_request(queries)
        what = f"the remote read of {_from_ms(start_ms):%Y-%m-%d %H:%M}–{_from_ms(end_ms):%H:%M}"
        body = self._retrying(what, lambda: reader.read_chunks(request))
        read = blocks_from_stream(body, queries)
        if self.group is None:  # size the groups: about GROUP_SAMPLES samples each
            per_window = (
                max(sum(b.samples for b in read), 1) * self.window_ms // (end_ms - start_ms)
            )
            span = max(GROUP_SPAN_S // self.cfg.window_s, 1)
            self.group = min(max(GROUP_SAMPLES // per_window, 1), span)
        out: dict[int, tuple[list[SeriesBlock], WindowRows]] = {}
        for begin in range(start_ms, end_ms, self.window_ms):
            last = begin + self.window_ms - 1
            blocks = [
                b.between(begin - 2 - (LOOKBACK_MS if b.family in _EVENT_FAMILIES else 0), last)
                for b in read
            ]
            out[begin] = (blocks, self._pivot(begin, blocks, now_ms, None))
        return out

    def _json_window(self, families: list[str], start_ms: int) -> list[SeriesBlock]:
        """One window's blocks through the JSON API, family after family (in this thread)."""
        end_ms = start_ms + self.window_ms
        return [b for f in families for b in self._window_blocks(f, start_ms, end_ms)]

    def _throughput_blocks(self, start_ms: int, end_ms: int) -> list[SeriesBlock]:
        """Every configured throughput counter's samples in [start, end), one block each."""
        return [
            block
            for name, series in self.cfg.throughput
            for block in self._fetch(name, start_ms, end_ms, series)
        ]

    def target_labels(self, start_ms: int, end_ms: int) -> TargetLabels:
        """Per scrape target (`instance`), the labels the target itself adds, from `up`'s series.

        Kubernetes service discovery puts the exporter's own pod on every series it scrapes;
        they must not be taken for the pod that holds a GPU. Read from the series index (no
        samples are loaded); history loaded without scrapes has no `up`: nothing to drop.
        """
        matchers = f"{{{self.cfg.selector}}}" if self.cfg.selector.strip() else ""
        found_series = self._retrying(
            "the scrape-target lookup",
            lambda: self.transport.series(f"up{matchers}", start_ms / 1000, end_ms / 1000),
        )
        found: dict[str, dict[str, set[str]]] = {}
        for labels in found_series:
            target = found.setdefault(labels.get("instance", ""), {})
            for name, value in labels.items():
                target.setdefault(name, set()).add(value)
        return {i: {k: frozenset(v) for k, v in t.items()} for i, t in found.items()}

    def discover(self, start_ms: int, end_ms: int) -> list[str]:
        """The DCGM families Prometheus holds for the selector, in the alias table's order."""
        sel = f",{self.cfg.selector}" if self.cfg.selector.strip() else ""
        match = f'{{__name__=~"{_NAME_MATCH}"{sel}}}'
        names = self._retrying(
            "the metric-name lookup",
            lambda: self.transport.family_names(match, start_ms / 1000, end_ms / 1000),
        )
        held = {str(n) for n in names}
        unknown = sorted(n for n in held if n not in FIELDS)
        if unknown:
            logger.info("families with no gpu_samples column (not pulled): %s", ", ".join(unknown))
        unread = sorted(n for n in held if n in FIELDS and n not in self.wanted)
        if unread:
            logger.info("families of columns not asked for (not pulled): %s", ", ".join(unread))
        return [name for name in FIELDS if name in held and name in self.wanted]

    # ------------------------------------------------------------------ windows

    def start_ms(self, checkpoint: Checkpoint | None, now_ms: int) -> int:
        """Where this run begins, snapped down to the window grid."""
        since = to_ms(self.cfg.since) if self.cfg.since else None
        if checkpoint is not None and not self.cfg.reset:
            start = max(checkpoint.done_until_ms, since or 0)
        elif since is not None:
            start = since
        else:
            start = now_ms - 3_600_000
        return start - start % self.window_ms

    def _pivot(
        self, start_ms: int, blocks: list[SeriesBlock], now_ms: int, fallback: float | None
    ) -> WindowRows:
        end_ms = start_ms + self.window_ms
        return pivot_window(
            blocks,
            cluster=self.cfg.cluster,
            start_ms=start_ms,
            end_ms=end_ms,
            open_window=end_ms > now_ms,
            interval_s=self.cfg.interval_s,
            targets=self.targets,
            fallback_interval_s=fallback,
        )

    def prepare(
        self,
        start_ms: int,
        rows: WindowRows,
        now_ms: int,
        throughput: list[SeriesBlock] | None = None,
    ) -> tuple[list[tuple[str, pa.Table]], WindowLanded]:
        """The tables one window lands (counted in the summary), from its pivoted rows."""
        end_ms = start_ms + self.window_ms
        if rows.spacing_s is not None:
            self.spacing_s = rows.spacing_s
        tables = [
            ("gpu_samples", rows.samples),
            ("gpu_events", rows.events),
            ("job_gpus", rows.job_gpus),
        ]
        app_rows = 0
        if self.cfg.throughput:
            app = pivot_throughput(
                throughput or [],
                cluster=self.cfg.cluster,
                start_ms=start_ms,
                end_ms=end_ms,
                job_label=self.cfg.throughput_job_label,
            )
            tables.append(("app_throughput", app.table))
            app_rows = app.table.num_rows
            self.summary.counts.update({f"app_throughput {k}": n for k, n in app.counts.items()})
        s = self.summary
        s.windows += 1
        s.samples += rows.samples.num_rows
        s.events += rows.events.num_rows
        s.job_gpus += rows.job_gpus.num_rows
        s.throughput += app_rows
        s.counts.update(rows.counts)
        first, last = _from_ms(start_ms), _from_ms(min(end_ms, now_ms))
        s.first = first if s.first is None else min(s.first, first)
        s.last = last if s.last is None else max(s.last, last)
        return tables, WindowLanded(
            start=_from_ms(start_ms),
            end=_from_ms(end_ms),
            samples=rows.samples.num_rows,
            events=rows.events.num_rows,
            job_gpus=rows.job_gpus.num_rows,
            complete=end_ms + self.cfg.settle_s * 1000 <= now_ms,
            done=0,
            total=0,
            throughput=app_rows,
        )

    def write(
        self, start_ms: int, tables: list[tuple[str, pa.Table]], done_until_ms: int | None
    ) -> None:
        """Land one window's tables under its batch id, then move the checkpoint (if given).

        After a write failed, the windows queued behind it are not written: the checkpoint
        must not pass the one that failed.
        """
        if self.write_failed:
            return
        batch = batch_id_for(self.cfg.cluster, self.source, start_ms, self.cfg.window_s)
        try:
            if self.table_pool is None:
                for table, data in tables:
                    write_batch(self.root, table, data, batch)
            else:  # the tables at once: each its own files and lock, fsyncs overlapping
                written = [
                    self.table_pool.submit(write_batch, self.root, table, data, batch)
                    for table, data in tables
                ]
                wait(written)
                for future in written:
                    future.result()
        except BaseException:
            self.write_failed = True
            raise
        if done_until_ms is not None:
            self.unsaved = done_until_ms
            if time.monotonic() - self.saved_at >= SAVE_EVERY_S:
                self.save_checkpoint()

    def save_checkpoint(self) -> None:
        """Move the checkpoint past every complete window landed so far (saves are at most
        SAVE_EVERY_S apart while windows land, and made at the end of each pass)."""
        if self.unsaved is not None:
            self._save(self.unsaved)
            self.unsaved = None
        self.saved_at = time.monotonic()

    def run_pass(
        self,
        pool: ThreadPoolExecutor,
        start_ms: int,
        limit_ms: int,
        families: list[str],
        progress: Callable[[WindowLanded], None] | None,
    ) -> int:
        """Land every window from `start_ms` up to `limit_ms`; return the new checkpoint."""
        starts = list(range(start_ms, limit_ms, self.window_ms))
        pending: deque[_Pending] = deque()
        queue = iter(starts)
        done_until = start_ms
        contiguous = True

        def ahead() -> int:
            """Windows in flight: enough requests to keep every worker busy, no more (memory)."""
            if self.reader is not None and families:
                return min(GROUPS_AHEAD, self.cfg.parallel + 1) * (self.group or 1)
            return max(2, math.ceil(2 * self.cfg.parallel / max(len(families), 1)))

        def submit() -> None:
            for begin in queue:
                now = to_ms(self.clock())  # the time the window's data is asked for
                windows = [begin]
                if self.reader is not None and families:
                    # a group of consecutive windows; the first group is one window, to size them
                    windows += list(itertools.islice(queue, (self.group or 1) - 1))
                    end = windows[-1] + self.window_ms
                    read = pool.submit(self._read_group, self.reader, begin, end, families, now)
                    group: Future[dict[int, tuple[list[SeriesBlock], WindowRows]]] | None = read
                    dcgm: list[Future[list[SeriesBlock]]] = []
                else:
                    group = None
                    dcgm = [
                        pool.submit(self._window_blocks, f, begin, begin + self.window_ms)
                        for f in families
                    ]
                for w in windows:
                    app = (
                        [pool.submit(self._throughput_blocks, w, w + self.window_ms)]
                        if self.cfg.throughput
                        else []
                    )
                    pending.append(_Pending(w, now, group, dcgm, app))
                if self.group is None and group is not None:
                    return  # size the groups from this one before asking for more
                if len(pending) >= ahead():
                    return

        # Windows are pivoted (here, or in the thread that read them) and written, in order, by
        # one writer thread, a window's tables at once: pivoting goes on while files are
        # fsynced. The checkpoint moves in the writer, after the window's files (a commit at
        # most every SAVE_EVERY_S, and at the end); progress is told once they are there.
        writes: deque[tuple[WindowLanded, Future[None]]] = deque()
        landed = 0

        def finish(wait: bool) -> None:
            nonlocal landed
            while writes and (wait or writes[0][1].done() or len(writes) > _WRITES_AHEAD):
                window, written = writes.popleft()
                written.result()
                landed += 1
                if progress is not None:
                    progress(dataclasses.replace(window, done=landed, total=len(starts)))

        writer = ThreadPoolExecutor(1, thread_name_prefix="prometheus-land")
        self.table_pool = ThreadPoolExecutor(_TABLES_AT_ONCE, thread_name_prefix="prometheus-table")
        try:
            submit()
            while pending:
                item = pending.popleft()
                rows = self._rows_of(item, families)
                app = [b for f in item.app for b in f.result()]
                if self.stop.is_set():
                    raise _Stopped
                tables, window = self.prepare(item.begin, rows, item.asked_ms, app)
                save: int | None = None
                if contiguous and window.complete:
                    done_until = save = item.begin + self.window_ms
                else:
                    contiguous = False
                writes.append((window, writer.submit(self.write, item.begin, tables, save)))
                finish(wait=False)
                submit()
            finish(wait=True)
        finally:
            for rest in pending:
                if rest.group is not None:
                    rest.group.cancel()
                for future in (*rest.dcgm, *rest.app):
                    future.cancel()
            writer.shutdown(wait=True)  # windows pivoted are landed (unless a write failed)
            self.table_pool.shutdown(wait=True)
            self.table_pool = None
            self.save_checkpoint()
        return done_until

    def _rows_of(self, item: _Pending, families: list[str]) -> WindowRows:
        """The pivoted rows of one pending window, in window order (the spacing a window
        cannot measure falls back to the window before's)."""
        if item.group is None:
            blocks = [b for f in item.dcgm for b in f.result()]
            return self._pivot(item.begin, blocks, item.asked_ms, self.spacing_s)
        try:
            blocks, rows = item.group.result()[item.begin]
        except (RemoteReadUnsupported, PrometheusResponseError) as exc:
            # no streamed chunks, or chunks that do not decode as they should
            if self.cfg.protocol == "remote-read":
                raise PrometheusQueryError(str(exc)) from exc
            if self.reader is not None:
                logger.warning("%s; pulling through the JSON API instead", exc)
            self.reader = None  # the windows already grouped are fetched here, one by one
            blocks = self._json_window(families, item.begin)
            return self._pivot(item.begin, blocks, item.asked_ms, self.spacing_s)
        if rows.spacing_s is None and self.spacing_s is not None:
            return self._pivot(item.begin, blocks, item.asked_ms, self.spacing_s)
        return rows

    def _save(self, done_until_ms: int) -> None:
        self.store.save(
            Checkpoint(
                cluster=self.cfg.cluster,
                source=self.source,
                selector=self.cfg.selector,
                url=self.transport.url,
                window_s=self.cfg.window_s,
                done_until_ms=done_until_ms,
            )
        )
        self.summary.checkpoint = _from_ms(done_until_ms)


def pull(
    cfg: PullConfig,
    lake: Lake,
    transport: Transport,
    *,
    clock: Clock = utc_now,
    stop: threading.Event | None = None,
    progress: Callable[[WindowLanded], None] | None = None,
) -> PullSummary:
    """Pull `cfg`'s windows into `lake`; return what landed.

    With `cfg.until` the pull ends after the window holding it (windows in the future are not
    asked for); without it the pull follows live data every `poll_s` until `stop` is set
    (SIGINT/SIGTERM in the CLI). Raises PrometheusUnavailable after `retries` failed tries of
    one request, PrometheusQueryError when Prometheus refuses a query, and ConfigError when the
    checkpoint was made with another window size.
    """
    cfg.validate()
    stop = stop or threading.Event()
    puller = _Puller(cfg, lake.root, transport, clock, stop)
    checkpoint = puller.store.get(cfg.cluster, puller.source)
    if checkpoint is not None and cfg.reset:
        puller.store.delete(cfg.cluster, puller.source)
        checkpoint = None
    if checkpoint is not None and checkpoint.window_s != cfg.window_s:
        raise ConfigError(
            f"cluster {cfg.cluster!r} was pulled with windows of {checkpoint.window_s} s "
            f"(checkpoint in {puller.store.path}); pass the same window, or --reset after "
            "removing what it landed"
        )
    summary = puller.summary
    if checkpoint is not None:
        summary.checkpoint = _from_ms(checkpoint.done_until_ms)
    start_ms = first_ms = puller.start_ms(checkpoint, to_ms(clock()))
    until_ms = to_ms(cfg.until) if cfg.until else None
    with ThreadPoolExecutor(cfg.parallel, thread_name_prefix="prometheus") as pool:
        try:
            while True:
                now_ms = to_ms(clock())
                limit_ms = min(until_ms, now_ms) if until_ms is not None else now_ms
                summary.passes += 1
                if limit_ms > start_ms:
                    families = puller.discover(start_ms - LOOKBACK_MS, limit_ms)
                    summary.families = sorted(set(summary.families) | set(families))
                    if families:
                        puller.targets = puller.target_labels(start_ms, limit_ms)
                    if families or cfg.throughput:
                        start_ms = puller.run_pass(pool, start_ms, limit_ms, families, progress)
                elif until_ms is not None and start_ms >= until_ms:
                    done = _from_ms(start_ms).strftime("%Y-%m-%d %H:%M:%S")
                    summary.nothing_to_pull = f"Nothing to pull: complete up to {done} UTC already"
                else:
                    begins = _from_ms(start_ms).strftime("%Y-%m-%d %H:%M:%S")
                    summary.nothing_to_pull = (
                        f"Nothing to pull yet: the range begins at {begins} UTC, after now"
                    )
                if until_ms is not None or stop.wait(cfg.poll_s):
                    break
        except _Stopped:
            summary.stopped = True
        except (PrometheusUnavailable, PrometheusQueryError) as exc:
            stop.set()  # workers waiting to retry give up now
            where = (summary.checkpoint or _from_ms(first_ms)).isoformat()
            raise type(exc)(
                f"{exc} ({summary.windows} window(s) landed this run; the next run resumes "
                f"from {where})"
            ) from exc
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    summary.stopped = summary.stopped or stop.is_set()
    return summary
