"""Day partitions of the sample-level marts, rebuilt only when the samples they read change.

`gpu_job_buckets` (and `job_gpu_daily`, `job_energy_hourly`, `bucket_occupancy` built from it)
are the only marts that read samples. Each of their (cluster, UTC day) partitions is built from
that day's sample files plus the first sample of each device on the next day, and is rebuilt
only when those files (or the SQL, or the config) change. When only the next day changed (a new
day landed), just the day's last buckets are recomputed (the tail: only each device's last
sample depends on the next day). So a new day of samples costs one day's pass plus a few minutes
of the day before; a re-attributed file costs its day plus that tail. The days are built one at
a time in one DuckDB connection (its memory limit bounds the engine, and one day's results are
released before the next day is read), so memory is bounded by one day of samples whatever the
lake's history. Consecutive small days (`GROUP_BYTES` of sample files in all) are built in one
pass, which gives each day the partitions its own pass would, for the fixed cost of one.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

import sql
from warehouse import compaction_log, layout, queries, state_files
from warehouse.allocations import hold_allocations
from warehouse.connection import (
    WarehouseConfig,
    open_engine,
    quote_ident,
    register_files,
    register_reference,
)
from warehouse.errors import WarehouseError
from warehouse.schema import MARTS
from warehouse.writer import replace_partition

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "SAMPLE_MARTS",
    "GROUP_BYTES",
    "DayKey",
    "PartitionReport",
    "PRUNED",
    "PrunedBucketWidth",
    "allocation_digests",
    "build_day",
    "build_sample_marts",
    "built_bucket_s",
    "built_days",
    "clear_engine",
    "current_inputs",
    "forget_built_days",
    "mark_pruned",
    "sample_days",
]

# The marts built per day from samples, in build order (the later ones read the first).
SAMPLE_MARTS: tuple[tuple[str, str], ...] = (
    ("gpu_job_buckets", "marts/gpu_job_buckets"),
    ("job_gpu_daily", "marts/job_gpu_daily"),
    ("job_energy_hourly", "marts/job_energy_hourly"),
    ("bucket_occupancy", "marts/bucket_occupancy"),
)
_HELPERS = (
    "attribution/next_day_head",
    "attribution/partition_samples",
    "attribution/sample_owners",
    "views/owned_samples",
    "views/sample_devices",
    "views/sample_steps",
    "views/sample_spans",
)

# The reference tables the sample-level marts read (sql/marts/job_gpu_daily.sql).
_REFERENCE = ("gpu_models",)

DayKey = tuple[str, dt.date]
# sample_days_built.own of a day whose raw samples were pruned: its partitions are kept
PRUNED = "pruned"

logger = logging.getLogger(__name__)
# Rows per record batch streamed from the engine to a partition file.
_STREAM_ROWS = 65_536
# Consecutive days to rebuild whose sample files hold at most this many bytes in all are built
# in one pass (a day's pass has a fixed cost: ~25 statements, 0.2-0.4 s on a slow machine): a
# small cluster's history, a test's lake. 64 MiB of the simulator's Parquet is ~1.2 M samples,
# about 40 % of a day of the 1,024-GPU bench lake: memory stays within what one large day takes.
GROUP_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PartitionReport:
    """What one run did: days rebuilt whole, days whose tail was rebuilt (the next day changed),
    days left as they were (among them, days whose files or next day's files were only
    compacted: the same rows), days removed (no samples left)."""

    rebuilt: tuple[DayKey, ...]
    tails: tuple[DayKey, ...]
    unchanged: int
    removed: tuple[DayKey, ...]
    carried: tuple[DayKey, ...] = ()  # of the unchanged: their (next) day's files compacted


def sample_days(root: Path, *, today: dt.date | None = None) -> dict[DayKey, list[Path]]:
    """The sample files of each (cluster folder, day), from the lake's partition folders (a
    file not in the layout has no day to build it under), but days dated after tomorrow."""
    return _dated(root, today)[0]


def _dated(
    root: Path, today: dt.date | None = None
) -> tuple[dict[DayKey, list[Path]], list[DayKey]]:
    """`sample_days`, and the days it leaves out: those dated after tomorrow (UTC) by this
    machine's clock, `today` where given. Samples from the future come from a clock that is
    wrong (a node's, or another tool's files): taken as data, they would make the end of the
    data, every rule's "now", that day, and the summary marts span every bucket and week up to
    it. They are built once their day comes."""
    days = layout.day_files(root, "gpu_samples")
    last = (today or dt.datetime.now(dt.UTC).date()) + dt.timedelta(days=1)
    ahead = sorted(key for key in days if key[1] > last)
    return {key: files for key, files in days.items() if key[1] <= last}, ahead


def _state(root: Path) -> sqlite3.Connection:
    return state_files.open_state(root, state_files.ATTRIBUTION)


def _tail_start(con: duckdb.DuckDBPyConnection, root: Path, key: DayKey) -> object | None:
    """The first bucket a next-day change can alter in the built partition, or None if unbuilt."""
    built = layout.partition_files(root, "gpu_job_buckets", key)  # not the whole table's
    if not built:
        return None
    register_files(con, "gpu_job_buckets", built, view="built_buckets")
    # as a Python value from the engine (an Arrow scalar's `as_py` would load pandas)
    from_ts: object | None = queries.rows(con, "attribution/tail_start")[0]["from_ts"]
    return from_ts


def build_day(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    key: DayKey,
    files: list[Path],
    next_files: list[Path],
    params: Mapping[str, float | int],
    *,
    tail_only: bool = False,
    through: dt.date | None = None,
) -> dict[str, int]:
    """Build one day's partition of every sample-level mart and land it; return row counts.

    With `tail_only` (the day's own files are unchanged, the next day's changed) only the
    buckets from the devices' last ones on are recomputed, from the samples in them; the
    earlier buckets are kept as built. The result is the same as a whole rebuild. `con` is
    the engine every day is built in (one for the run, so its memory is reused, not re-grown).
    `through`: the days from `key`'s to this one (consecutive, of one cluster folder) are
    built in one pass, `files` being all of theirs and `next_files` the day after's; each
    day's partitions are the same as its own pass gives (`build_sample_marts` groups small
    days: a pass's fixed cost, ~25 statements, is paid once).
    """
    cluster_folder, day = key
    last_day = day if through is None else through
    if tail_only and last_day != day:
        raise ValueError("a tail is rebuilt one day at a time")
    try:
        from_ts = None
        if tail_only:
            register_files(con, "gpu_samples", files, view="day_files")
            from_ts = _tail_start(con, root, key)
        if from_ts is None:  # the day's files read as they are: no view over a view of them
            register_files(con, "gpu_samples", files, view="day_samples")
        else:
            tail = queries.run_arrow(con, "attribution/samples_from", from_ts=from_ts)
            con.from_arrow(tail).create_view("day_samples")
        register_files(con, "gpu_samples", next_files, view="next_day_samples")
        # held in the engine (a row per device), not in Arrow: with an Arrow scan beside the
        # day's files, the samples that sql/views/owned_samples.sql reads three times through
        # one CTE were buffered whole for its second and third readers
        queries.create_table(con, "next_day_head", sql.load("attribution/next_day_head"), {})
        queries.define_view(con, "unowned_samples", sql.load("attribution/partition_samples"))
        # each sample's owner decided here (raw files keep their source's job_id; the rule of
        # sql/attribution/sample_owners.sql, which Spark applies), and the samples sorted by
        # device and time once: the rows sample_spans reads three times are held (under the
        # engine's memory limit), not planned again at each read
        queries.define_view(con, "owned_samples", sql.load("views/owned_samples"))
        # the devices numbered once (a few rows): the sort and the groups carry their numbers
        queries.create_table(con, "sample_devices", sql.load("views/sample_devices"), {})
        if from_ts is None:  # (a tail's rows were counted when the whole day was built)
            _say_unusable(con, key, last_day)
        queries.create_table(con, "sample_steps", sql.load("views/sample_steps"), {})
        queries.define_view(con, "sample_spans", sql.load("views/sample_spans"))
        # the clusters the day's samples name: a mart with no rows that day (no job ran) still
        # replaces its partition under the cluster's own name, never the folder's safe form of
        # it ('gpu farm' is in cluster=gpu_farm: that name is another cluster's)
        named = con.execute("SELECT DISTINCT cluster FROM sample_devices ORDER BY 1").fetchall()
        day_clusters = [c for (c,) in named] or [cluster_folder]
        counts = {}
        for mart, query in SAMPLE_MARTS:
            schema = MARTS[mart].schema
            columns = ", ".join(quote_ident(name) for name in schema.names)
            bound: dict[str, object] = {k: params[k] for k in queries.parameters(con, query)}
            text = queries.checked_text(con, query, bound)
            # rows of the next day's head samples fall on the next day: not these partitions'
            select = (
                f"SELECT {columns} FROM (\n{text}\n) WHERE date BETWEEN $first_day AND $last_day"
            )
            if from_ts is not None and mart == SAMPLE_MARTS[0][0]:
                kept = queries.checked_text(con, "attribution/buckets_before", {"from_ts": from_ts})
                select = f"SELECT {columns} FROM (\n{kept}\n) UNION ALL {select}"
                bound["from_ts"] = from_ts
            # Held in the engine (under its memory limit, spilled past it), not in Python: the
            # later marts read it there, by the mart's own name (a table, not a view of one),
            # and each cluster's rows are streamed to its file.
            queries.create_table(
                con, mart, select, {**bound, "first_day": day, "last_day": last_day}
            )
            built = con.table(mart)
            # one statement (a relation's unique() binds at each step); a name of ours
            found = con.execute(f"SELECT DISTINCT cluster FROM {mart}").fetchall()
            clusters = [c for (c,) in found] or day_clusters
            counts[mart] = 0
            for when in _days(day, last_day):
                for cluster in clusters:
                    part = built  # one cluster and one day, the usual case
                    if len(clusters) > 1 or last_day != day:
                        part = built.filter(_equal("cluster", cluster) & _equal("date", when))
                    counts[mart] += replace_partition(
                        root, mart, _conformed(part, schema), str(cluster), when
                    )
    except BaseException:
        # a failure mid-stream leaves a result open, which refuses the drops: the failure is
        # what to say, not that
        import duckdb  # (loaded already: `con` is one of its connections)

        with contextlib.suppress(duckdb.Error):
            _let_go(con)
        raise
    _let_go(con)
    return counts


def _let_go(con: duckdb.DuckDBPyConnection) -> None:
    """Drop a day's views and tables before the next day is read."""
    for view in ("day_files", "unowned_samples", "owned_samples", "sample_spans"):
        con.execute(f"DROP VIEW IF EXISTS {view}")  # names of ours, not values
    # `day_samples` may be a view of Arrow rows (a tail): what holds them goes with it
    con.execute("DROP VIEW IF EXISTS day_samples")
    tables = ("next_day_head", "sample_devices", "sample_steps")
    for table in (*tables, *(mart for mart, _ in SAMPLE_MARTS)):
        con.execute(f"DROP TABLE IF EXISTS {table}")  # a name of ours, not a value


def _say_unusable(con: duckdb.DuckDBPyConnection, key: DayKey, last_day: dt.date) -> None:
    """Warn of the day's samples the marts cannot use whole: those naming neither their GPU's
    UUID nor its index (left out: no GPU to count them on), those without a usable
    interval_s (they stand for no time) and those dated another day than their folder's (in
    no partition built), as files another tool wrote may hold."""
    counts = queries.rows(con, "attribution/unusable_samples", first_day=key[1], last_day=last_day)[
        0
    ]
    days = str(key[1]) if last_day == key[1] else f"{key[1]} to {last_day}"
    if counts["nameless"]:
        logger.warning(
            "%s %s: %d sample(s) name neither a GPU UUID nor a GPU index; with no GPU to count "
            "them on, the marts leave them out",
            key[0],
            days,
            counts["nameless"],
        )
    if counts["elsewhere"]:
        logger.warning(
            "%s %s: %d sample(s) in its files are dated another day (UTC); the day partitions "
            "are built from each day's own date= folder, so the marts leave them out (land each "
            "sample under the folder of its own day)",
            key[0],
            days,
            counts["elsewhere"],
        )
    if counts["no_interval"]:
        logger.warning(
            "%s %s: %d sample(s) have no usable interval_s (null, NaN, infinite, 0 or less, "
            "or above 3600 s: seconds, not milliseconds); they stand for no time in the marts",
            key[0],
            days,
            counts["no_interval"],
        )


def _conformed(relation: duckdb.DuckDBPyRelation, schema: pa.Schema) -> pa.RecordBatchReader:
    """`relation` streamed as record batches of `schema` (the engine's types cast to the
    contract's: microsecond times to milliseconds, doubles to the floats they are)."""
    reader = relation.to_arrow_reader(_STREAM_ROWS)
    return pa.RecordBatchReader.from_batches(schema, (b.cast(schema) for b in reader))


def _bytes(files: list[Path]) -> int:
    """The size of `files` (0 for one gone since it was listed: the build then says so)."""
    total = 0
    for path in files:
        with contextlib.suppress(OSError):
            total += path.stat().st_size
    return total


def _days(first: dt.date, last: dt.date) -> list[dt.date]:
    return [first + dt.timedelta(days=n) for n in range((last - first).days + 1)]


def _equal(column: str, value: object) -> duckdb.Expression:
    import duckdb  # here, not at import time: importing the package stays light

    return duckdb.ColumnExpression(column) == duckdb.ConstantExpression(value)


def _salt(params: Mapping[str, float | int]) -> str:
    """What every day's inputs digest with its files: the config and the SQL of the pass."""
    return repr(sorted(params.items())) + "".join(
        sql.load(q) for q in (*_HELPERS, *(query for _, query in SAMPLE_MARTS))
    )


def _owners_part(allocations: Mapping[DayKey, str], key: DayKey) -> str:
    """A day's owners are decided from its allocations: a change there rebuilds it."""
    return f"|owners={allocations.get(key, '')}"


def _inputs(
    days: Mapping[DayKey, list[Path]], key: DayKey, salt: str, allocations: Mapping[DayKey, str]
) -> tuple[str, str]:
    """The digests of a day's own inputs (its files, its allocations) and its next day's files,
    as `sample_days_built` records them."""
    next_files = days.get((key[0], key[1] + dt.timedelta(days=1)), [])
    return (
        layout.files_fingerprint(days[key], salt) + _owners_part(allocations, key),
        layout.files_fingerprint(next_files, salt),
    )


def built_days(root: Path) -> dict[DayKey, tuple[str, str]]:
    """What each day's partitions were last built from: (own inputs, next day's files), own
    being PRUNED for a day whose raw samples were pruned (warehouse/retention.py)."""
    with _state(root) as db:
        return {
            (cluster, dt.date.fromisoformat(date)): (own, following)
            for cluster, date, own, following in db.execute(
                "SELECT cluster, date, own, next FROM sample_days_built"
            )
        }


def current_inputs(
    config: WarehouseConfig, params: Mapping[str, float | int], days: Mapping[DayKey, list[Path]]
) -> dict[DayKey, tuple[str, str]]:
    """The digests each of `days` would be recorded with if it were built now (compare with
    `built_days`: equal means its partitions are up to date with its files and owners)."""
    salt = _salt(params)
    allocations = allocation_digests(config, days)
    return {key: _inputs(days, key, salt, allocations) for key in days}


def allocation_digests(config: WarehouseConfig, days: Mapping[DayKey, object]) -> dict[DayKey, str]:
    """Per day of `days`, the digest of the allocations that can own its samples: a change of
    it changes the day's owners (`sql/views/owned_samples.sql`)."""
    con = open_engine(config)
    try:
        register_files(con, "job_gpus", layout.table_files(config.root, "job_gpus"))
        return _allocation_days(con, days)
    finally:
        con.close()


def forget_built_days(root: Path) -> None:
    """Forget what every day's partitions were built from (but days whose raw samples were
    pruned: their partitions are their only record): the next build builds each day again.
    For another engine about to replace the partitions (warehouse/spark.py)."""
    with _state(root) as db:
        db.execute("DELETE FROM sample_days_built WHERE own <> ?", (PRUNED,))


def mark_pruned(root: Path, key: DayKey, bucket_s: int) -> None:
    """Record that `key`'s raw samples are being removed: its partitions, of buckets `bucket_s`
    wide, stay as they are."""
    with _state(root) as db:
        db.execute(
            "UPDATE sample_days_built SET own = ? WHERE cluster = ? AND date = ?",
            (PRUNED, key[0], key[1].isoformat()),
        )
        # the first prune's width stands: later pruned days were built at it (others are not
        # up to date, and attribute refuses another width), or are a pruned day's leftovers
        db.execute("INSERT OR IGNORE INTO pruned_buckets VALUES (?, ?)", (key[0], bucket_s))


def built_bucket_s(con: duckdb.DuckDBPyConnection, configured: int) -> int:
    """The bucket width the lake's marts were built with (the spacing of its buckets), else
    `configured` (no cluster has two buckets): a query given another width than the marts'
    cut their buckets short or counted half of each."""
    [built] = queries.run_arrow(con, "attribution/bucket_width").column("width_s").to_pylist()
    return configured if built is None else round(built)


class PrunedBucketWidth(WarehouseError):
    """The bucket width asked for is not the one pruned days' partitions were built with."""


def _refuse_other_width(root: Path, bucket_s: int) -> None:
    """Raise PrunedBucketWidth where a cluster folder's pruned days hold buckets of another
    width than `bucket_s`: they cannot be built again, and the summary marts cannot add
    buckets of two widths (occupancy would count a GPU twice or half)."""
    with contextlib.closing(_state(root)) as db:
        _record_widths_pruned_before(root, db)
        other = db.execute(
            "SELECT cluster, bucket_s FROM pruned_buckets WHERE bucket_s <> ? ORDER BY cluster",
            (bucket_s,),
        ).fetchall()
    if other:
        (cluster, width), more = other[0], len(other) - 1
        raise PrunedBucketWidth(
            f"the raw samples of cluster folder {cluster!r}"
            + (f" (and {more} more)" if more else "")
            + f" were pruned from partitions of {width} s buckets, which cannot be built again "
            f"at {bucket_s} s: set attribute.bucket_s = {width} for this lake"
        )


def _record_widths_pruned_before(root: Path, db: sqlite3.Connection) -> None:
    """Record the bucket width of each cluster folder whose days were pruned before widths were
    recorded (attribution.sqlite before version 3): read from the spacing of its pruned days'
    buckets. Without it such a lake took another width, and its summary marts added 300 s
    buckets to 600 s ones (half the fleet unobserved) while `check` passed."""
    unrecorded = db.execute(
        "SELECT cluster, date FROM sample_days_built WHERE own = ? "
        "AND cluster NOT IN (SELECT cluster FROM pruned_buckets) ORDER BY cluster, date",
        (PRUNED,),
    ).fetchall()
    found: dict[str, int] = {}
    for cluster, date in unrecorded:
        if cluster not in found:
            width = _bucket_width(root, cluster, date)
            if width is not None:
                found[cluster] = width
    with db:
        db.executemany("INSERT OR IGNORE INTO pruned_buckets VALUES (?, ?)", found.items())


def _bucket_width(root: Path, cluster: str, date: str) -> int | None:
    """The spacing of a cluster folder's buckets on `date` (seconds): the greatest common
    divisor of the gaps between the buckets of its `cluster_occupancy` partition, which has
    every bucket of the data's span (else of its `gpu_job_buckets`); None where it holds fewer
    than two."""
    import math

    import pyarrow.parquet as pq

    for table in ("cluster_occupancy", "gpu_job_buckets"):
        starts: set[int] = set()
        folder = layout.partition_dir(root, table, cluster, None) / f"date={date}"
        for path in layout.folder_files(folder):
            column = pq.read_table(path, columns=["bucket"]).column("bucket")
            starts.update(int(ts.timestamp()) for ts in column.to_pylist() if ts is not None)
        ordered = sorted(starts)
        width = 0
        for before, after in zip(ordered, ordered[1:], strict=False):
            width = math.gcd(width, after - before)
        if width:
            return width
    return None


def _allocation_days(
    con: duckdb.DuckDBPyConnection, days: Mapping[DayKey, object]
) -> dict[DayKey, str]:
    """The digest of the allocations that can own each day's samples (by the day's cluster
    folder), from the `job_gpus` view (sql/attribution/allocation_days.sql)."""
    if not days:
        return {}
    dates = [day for _, day in days]
    digests: dict[DayKey, list[str]] = {}
    for row in queries.rows(
        con, "attribution/allocation_days", first_day=min(dates), last_day=max(dates)
    ):
        key = (layout.safe_name(row["cluster"]), row["date"])
        digests.setdefault(key, []).append(f"{row['cluster']}={row['digest']}")
    return {key: ",".join(sorted(parts)) for key, parts in digests.items()}


def clear_engine(con: duckdb.DuckDBPyConnection) -> None:
    """Drop every table and view in `con` (after `build_sample_marts`: its allocations, its
    views of files and of the reference tables), so the next step sharing the engine finds it
    as bare as a new one."""
    found = con.execute(
        "SELECT 'TABLE', table_name FROM duckdb_tables() WHERE NOT internal "
        "UNION ALL SELECT 'VIEW', view_name FROM duckdb_views() WHERE NOT internal"
    ).fetchall()
    for kind, name in found:  # the catalog's own names, quoted
        con.execute(f"DROP {kind} IF EXISTS {quote_ident(name)}")


def _remove_day(root: Path, key: DayKey) -> None:
    for mart, _ in SAMPLE_MARTS:
        folder = layout.table_dir(root, mart) / f"cluster={key[0]}" / f"date={key[1].isoformat()}"
        if folder.is_dir():
            for path in folder.glob("*.parquet"):
                path.unlink()


def build_sample_marts(
    config: WarehouseConfig,
    params: Mapping[str, float | int],
    progress: Callable[[int, int], None] | None = None,
    *,
    force: bool = False,
    since: dt.date | None = None,
    engine: duckdb.DuckDBPyConnection | None = None,
) -> PartitionReport:
    """Rebuild the day partitions whose inputs changed since they were built; drop stale ones.

    A day's inputs are its sample files, the allocations (`job_gpus`) that can own its samples
    (sql/attribution/allocation_days.sql), the next day's sample files (for the first sample
    of each device), the SQL of the sample-level marts and `params`. A day whose files (or
    next day's files) were only compacted since it was built, exactly the files it was built
    from (warehouse/compaction_log.py), has the same rows: it is not built again. With
    `since`, the days before it are left as they are (neither built nor dropped). `engine`:
    a bare engine (open_engine) to build in, left open with what the pass made in it
    (`clear_engine` makes it bare again); default: one opened and closed here.
    """
    root = config.root
    _refuse_other_width(root, int(params["bucket_s"]))
    # read before the files are listed: a merge in between is one the next run sees
    merged = compaction_log.merges(root, "sample_days", "gpu_samples")
    days, ahead = _dated(root)
    listed = layout.table_files(root, "gpu_samples")
    loose = sum(1 for path in listed if layout.partition_key(path) is None)
    if loose:
        # (another tool's file straight under gpu_samples/ or cluster=X/: no day to build it
        # under; `attribute` said the days were up to date and every job observed nothing)
        logger.warning(
            "%d gpu_samples file(s) outside the cluster=<name>/date=<YYYY-MM-DD> folders left "
            "out: move each into the folder of its cluster and day",
            loose,
        )
    if ahead:
        logger.warning(
            "%d day(s) of samples dated after tomorrow (%s) left out: the clock of the node "
            "or tool that wrote them is wrong; they are attributed once their day comes",
            len(ahead),
            ", ".join(f"{c} {d}" for c, d in ahead[:3]) + (" …" if len(ahead) > 3 else ""),
        )
    salt = _salt(params)

    def same_rows(key: DayKey, was: str | None, now: str, owners: str = "") -> bool:
        """Whether the files of `key` that digested to `was` hold the rows of those now (with
        `owners`, the day's allocations' digest, the same owners too)."""
        if was == now:
            return True
        merge = merged.get(key)
        return (
            merge is not None
            and was == layout.listing_fingerprint(merge.before, salt) + owners
            and now == layout.listing_fingerprint(merge.after, salt) + owners
        )

    built = built_days(root)
    con = open_engine(config) if engine is None else engine
    register_reference(con, _REFERENCE)
    try:
        # held in the engine, only new batch files read (warehouse/allocations.py): every day
        # built reads them, and the scheduler's files grow with the lake's history
        hold_allocations(con, root, "job_gpus")
        allocations = _allocation_days(con, days)
        rebuilt: list[DayKey] = []
        tails: list[DayKey] = []
        carried: list[DayKey] = []
        todo = sorted(key for key in days if since is None or key[1] >= since)
        unchanged = len(days) - len(todo)
        # days to rebuild whole, built together once they stop being consecutive and small:
        # (its place in `todo`, key, its inputs' digests, the next day's)
        group: list[tuple[int, DayKey, str, str]] = []
        group_bytes = 0

        def record(done: int, key: DayKey, own: str, following: str) -> None:
            with _state(root) as db:
                db.execute(
                    "INSERT OR REPLACE INTO sample_days_built VALUES (?, ?, ?, ?)",
                    (key[0], key[1].isoformat(), own, following),
                )
            if progress:
                progress(done, len(todo))

        def build_group() -> None:
            if not group:
                return
            first, last = group[0][1], group[-1][1]
            files = [path for _, key, _, _ in group for path in days[key]]
            next_files = days.get((last[0], last[1] + dt.timedelta(days=1)), [])
            through = last[1] if last != first else None
            build_day(con, root, first, files, next_files, params, through=through)
            for done, key, own, following in group:
                rebuilt.append(key)
                record(done, key, own, following)
            group.clear()

        for done, key in enumerate(todo, start=1):
            next_key = (key[0], key[1] + dt.timedelta(days=1))
            next_files = days.get(next_key, [])
            owners = _owners_part(allocations, key)
            own, following = _inputs(days, key, salt, allocations)
            present = (
                layout.table_dir(root, SAMPLE_MARTS[0][0]) / f"cluster={key[0]}" / f"date={key[1]}"
            ).is_dir()
            was_own, was_next = built.get(key, (None, None))
            if was_own != PRUNED or not present:
                if force or not present or not same_rows(key, was_own, own, owners):
                    size = _bytes(days[key])
                    last = group[-1][1] if group else None
                    joins = (
                        last is not None
                        and last[0] == key[0]
                        and key[1] == last[1] + dt.timedelta(days=1)
                    )
                    if not (joins and group_bytes + size <= GROUP_BYTES):
                        build_group()
                        group_bytes = 0
                    group.append((done, key, own, following))
                    group_bytes += size
                    continue
            build_group()  # before this day's own record, so days are recorded in order
            if was_own == PRUNED and present:
                # its partitions are the day's record now: files landed in it since (or left by
                # a prune that stopped midway) cannot be known to hold all its samples
                logger.warning(
                    "%s %s: its raw samples were pruned; %d file(s) there now are not read "
                    "(the next prune removes them)",
                    *key,
                    len(days[key]),
                )
                unchanged += 1
            elif not same_rows(next_key, was_next, following):
                build_day(con, root, key, days[key], next_files, params, tail_only=True)
                tails.append(key)
            else:
                unchanged += 1
                if (was_own, was_next) != (own, following):
                    carried.append(key)
            if key in tails or key in carried:
                record(done, key, own, following)
            elif progress:
                progress(done, len(todo))
        build_group()
    finally:
        if engine is None:
            con.close()
    # every day now records its files
    compaction_log.forget(root, "sample_days", "gpu_samples", merged)
    # a day whose samples were pruned keeps its partitions: they are its only record now
    removed = tuple(
        sorted(
            k
            for k in set(built) - set(days)
            if built[k][0] != PRUNED and (since is None or k[1] >= since)
        )
    )
    for key in removed:
        _remove_day(root, key)
        with _state(root) as db:
            db.execute(
                "DELETE FROM sample_days_built WHERE cluster = ? AND date = ?",
                (key[0], key[1].isoformat()),
            )
    return PartitionReport(tuple(rebuilt), tuple(tails), unchanged, removed, tuple(carried))
