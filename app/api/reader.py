"""The lake as the API reads it: one DuckDB connection kept open across requests.

Opening the lake (a view per table over its files) and DuckDB's first reads of the Parquet
footers cost most of a cold query; a warm connection answers the next in a fraction of that
(one job's report reads the job's cluster and days alone: `LakeReader.job_report`). Each
request reads through its own cursor (a DuckDB connection is not thread-safe; cursors share its
views and caches). After `refresh_s` the lake is reopened in the background when its files
changed (names, sizes, times), so files landed since are seen while requests keep the old
connection, and the rendered reports cached for this opening stay; a file replaced under the
open views (compaction, a rebuild) makes DuckDB fail to read it, and the lake is then reopened
at once and the read tried again (`LakeReader.read`).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from warehouse import layout, queries
from warehouse.lake import Lake
from warehouse.schema import TABLES

if TYPE_CHECKING:
    import duckdb
    import polars as pl

    from detectors.job_report import JobReport

__all__ = ["LakeReader"]

T = TypeVar("T")

# What DuckDB says when it reads a file renamed over the one its view listed with the old
# file's footer (warehouse.lake.Lake.read_settled).
_REPLACED_FILE = ("TProtocolException", "Invalid data", "Could not convert", "No magic bytes")


class LakeReader:
    """Reads from `lake` through a connection reopened every `refresh_s` seconds.

    `clock` is a seam (monotonic seconds) for tests of the refresh.
    """

    def __init__(
        self, lake: Lake, refresh_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.lake = lake
        self.refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._opened_at = 0.0
        self._refreshing = False
        self.generation = 0  # bumped each time the lake is reopened: keys the caches
        self._fingerprint_at_open = ""
        self._warmed = -1

    def _fingerprint(self) -> str:
        """A digest of every lake file's name, size and time: it changes when one lands, is
        rewritten or goes."""
        paths = [p for table in TABLES for p in self.lake.table_files(table)]
        try:
            return layout.files_fingerprint(paths)
        except FileNotFoundError:  # removed while listed (compaction): changed
            return ""

    def _open(self) -> duckdb.DuckDBPyConnection:
        fingerprint = self._fingerprint()
        con = self.lake.connect()
        with self._lock:  # the old one closes once the last request reading it lets go
            self._con, self._opened_at = con, self._clock()
            self._fingerprint_at_open = fingerprint
            self.generation += 1
        return con

    def _connection(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            con, age = self._con, self._clock() - self._opened_at
            stale = con is not None and age >= self.refresh_s and not self._refreshing
            if stale:
                self._refreshing = True
        if con is None:
            return self._open()
        if stale:
            threading.Thread(target=self._refresh, name="api-lake-refresh", daemon=True).start()
        return con

    @property
    def refreshing(self) -> bool:
        """Whether a background check of the lake's files (and reopening) is under way."""
        with self._lock:
            return self._refreshing

    def _refresh(self) -> None:
        try:
            if self._fingerprint() == self._fingerprint_at_open:
                with self._lock:  # nothing changed: keep the connection and the caches
                    self._opened_at = self._clock()
                return
            self._open()
        finally:
            with self._lock:
                self._refreshing = False

    def read(self, work: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """`work` on a fresh cursor. When it fails on a file gone (DuckDB's IOException) or
        reading a file replaced since the lake was opened (a rebuild renamed a new file over
        one the views list: "TProtocolException: Invalid data"), the lake is reopened and
        `work` run again, as `Lake.read_settled` runs it while a writer is still landing. Any
        other error is raised: it is the request's, not the race's."""
        import duckdb

        try:
            with queries.damaged_files(con := self._connection()):
                return work(con.cursor())
        except duckdb.Error as exc:
            gone = isinstance(exc, duckdb.IOException)
            # a file read with another's footer, and files that changed since the opening (a
            # live lake's always do: a query's own error is not read again for that)
            replaced = any(mark in str(exc) for mark in _REPLACED_FILE)
            if not gone and not (replaced and self._fingerprint() != self._fingerprint_at_open):
                raise

        def reopened() -> T:
            con = self._open()
            with queries.damaged_files(con):
                return work(con.cursor())

        return self.lake.read_settled(reopened)

    def job_report(self, job_id: str, cluster: str | None) -> JobReport:
        """One job's report, read from the job's cluster and days alone (warehouse/one_job.py),
        as `gpuledger job` reads it: through the open connection's views of the whole lake,
        the bottleneck's owner rule would run over every sample of the lake (5–6 s a report on
        a simulated week of 1,024 GPUs, against ~0.5 s). Raises UnknownJob as
        `load_job_report` does, also when the lake has no jobs yet."""
        from detectors.job_report import UnknownJob, load_job_report
        from warehouse.errors import EmptyWarehouse
        from warehouse.one_job import job_engine

        try:
            with job_engine(self.lake.root, job_id, cluster) as con:
                return load_job_report(con, job_id, cluster)
        except EmptyWarehouse:
            raise UnknownJob(f"No job {job_id!r} in the lake") from None

    def fresh_generation(self) -> int:
        """The lake's generation, its files looked at again first where `refresh_s` has passed
        (in the background, as a read does): what the caches of reports and extents key on. A
        client that only polls one job's report or /clusters read them stale for good: only a
        read looked."""
        self._connection()
        return self.generation

    def run(self, name: str, /, **params: object) -> pl.DataFrame:
        """The shipped query `name` with bound `params`."""
        return self.read(lambda cur: queries.run(cur, name, **params))

    def warm(self) -> None:
        """Open the lake and read the tables a job report reads once, so the first request is
        as fast as the next. Once per opening of the lake: a second call does nothing."""
        from detectors.job_report import UnknownJob

        if self._con is not None and self._warmed == self.generation:
            return

        def touch(cur: duckdb.DuckDBPyConnection) -> None:
            always = {"start": dt.datetime.min.replace(tzinfo=dt.UTC)}
            last = queries.run(
                cur,
                "api/jobs_recent",
                cluster=None,
                user=None,
                **always,
                end=dt.datetime.max.replace(tzinfo=dt.UTC),
                limit=1,
            ).to_dicts()
            if last:
                try:
                    self.job_report(last[0]["job_id"], last[0]["cluster"])
                except UnknownJob:
                    pass

        self.read(touch)
        self._warmed = self.generation
