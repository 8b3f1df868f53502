"""The summary marts (job_usage, job_outcomes, usage_daily, cluster_occupancy, fairness_weekly),
built whole or brought up to date from the day partitions of the sample-level marts.

`build_summary_marts` builds them whole. `refresh_summary_marts` compares the day partitions
of the sample-level marts and the scheduler's batch files (`jobs`, `job_gpus`) with the ones
the summary marts were last built from and, when only some days or scheduler batches changed
(and nothing else they read: the other raw tables, the SQL, the config), updates only the rows
they can touch. A late scheduler record — a batch new, rewritten (the Slurm collector closes
an allocation so) or removed — puts its jobs in scope and adds every day they held GPUs, ran or
had samples on, before and after (`sql/attribution/late_days.sql`), to the changed days:

- `usage_daily`: the (cluster, date) partitions of the changed days, and of the days between
  the old and the new end of the data (allocations still open run to it; where a cluster's
  data begins or ends, from its earliest open allocation's start);
- `job_usage`, `job_outcomes`: the jobs that had or have samples on those days, that hold an
  allocation overlapping them, or that are still running where the data's end moved —
  recomputed from all of their days, their shares of GPUs held by several jobs at once
  (`job_gpu_shares`) cut from every job's intervals on those GPUs, in scope or not;
- `cluster_occupancy`: the buckets of those days and of the days where the data's end moved,
  from the partials reaching them; every bucket where the data's start or device count moved;
- `fairness_weekly`: the weeks of those days and every week a job in scope spans (a job
  spanning weeks changes the weeks before the new day too), from every job reaching them;

and of the last two only the partitions whose rows changed are written.

Each is the mart's own SQL reading views restricted to the rows in scope, so there is one
definition per mart. `gpu_job_buckets`, which the summary marts read only for the data's
start, end and devices, is stood in for by a small per-day index kept in
`<lake>/_state/summary_index/` (`sql/attribution/summary_index.sql`). Anything unexpected —
no state, other raw tables or SQL changed, mart or index files changed by someone else,
sample files outside the partition layout — rebuilds them whole, as before.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import sql
from warehouse import compaction_log, layout, queries, state_files
from warehouse.connection import (
    DERIVED_VIEWS,
    WarehouseConfig,
    open_engine,
    register_files,
    register_reference,
    register_table,
)
from warehouse.emissions import register_intensity
from warehouse.partitions import SAMPLE_MARTS, DayKey
from warehouse.schema import MARTS, RAW_TABLES
from warehouse.writer import replace_partition, replace_partitions

if TYPE_CHECKING:
    import duckdb

    from warehouse.attribution import AttributionConfig

__all__ = [
    "SUMMARY_MARTS",
    "SummaryUpdate",
    "build_summary_marts",
    "land_mart",
    "mart_rows",
    "record_summary_state",
    "refresh_summary_marts",
]

# The marts built from the sample-level ones (and jobs, allocations, events), in build order.
SUMMARY_MARTS: tuple[tuple[str, str], ...] = (
    ("job_usage", "marts/job_usage"),
    ("job_outcomes", "marts/job_outcomes"),
    ("usage_daily", "marts/usage_daily"),
    ("cluster_occupancy", "marts/cluster_occupancy"),
    ("fairness_weekly", "marts/fairness_weekly"),
)
_HELPERS = (
    "attribution/summary_index",
    "attribution/scope_jobs",
    "attribution/open_starts",
    "attribution/scope_weeks",
    "attribution/late_days",
    "attribution/share_peers",
    "attribution/scope_week_jobs",
    "views/job_co2e_hourly",
    *DERIVED_VIEWS.values(),
)
# Derived views several summary marts read, in the order they read each other.
_BUILT_ONCE = ("job_gpu_intervals", "job_gpu_shares")
_INDEX_DIR = "summary_index"
# The scheduler's tables: a batch file of them new, rewritten (an allocation closed) or removed
# since the last build holds late records, whose jobs are updated in place.
_SCHEDULER = ("jobs", "job_gpus")
# What the detectors, the evaluation and the simulator's truth write: no mart reads them, so
# a `detect` (which lands findings every round) leaves the summary marts as they are.
_NOT_READ = ("findings", "recommendations", "evaluation_scores", "sim_truth")
# The raw tables the summary marts read whole (a change of their files rebuilds them).
_OTHER_RAW = tuple(
    t for t in RAW_TABLES if t != "gpu_samples" and t not in _SCHEDULER and t not in _NOT_READ
)
_DAY_S = 86400
_EPOCH = dt.date(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class SummaryUpdate:
    """What `refresh_summary_marts` did: `mode` is "unchanged", "incremental" or "rebuilt";
    `days` the day partitions that changed, `jobs` the jobs whose rows were recomputed, `weeks`
    the (cluster, week)s of fairness_weekly recomputed, `late_jobs` the jobs of late scheduler
    records."""

    mode: str
    counts: dict[str, int]
    days: tuple[DayKey, ...] = ()
    jobs: int = 0
    weeks: int = 0
    late_jobs: int = 0
    reason: str = ""


def land_mart(root: Path, mart: str, result: pa.Table) -> int:
    """Replace every partition of `mart` by `result`, cluster by cluster; return its rows."""
    schema = MARTS[mart].schema
    table = result.select(schema.names).cast(schema)
    clusters = pc.unique(table.column("cluster")).to_pylist()
    for cluster in clusters:
        rows = table.filter(pc.equal(table.column("cluster"), cluster))
        replace_partitions(root, mart, rows, cluster)
    return int(table.num_rows)


def build_summary_marts(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    config: AttributionConfig,
    progress: Callable[[str], None] | None = None,
) -> dict[str, int]:
    """Rebuild the job- and cluster-level marts whole from the sample-level ones; return rows.

    They read the small per-bucket and per-day tables, never samples, so this costs a
    fraction of one pass over the samples.
    """
    for table in (*RAW_TABLES, *(m for m, _ in SAMPLE_MARTS)):  # what is in the lake now
        register_table(con, root, table)
    register_intensity(con, config.emissions)
    # Read by several marts: each computed once for this build (then views again, below).
    for view in _BUILT_ONCE:
        con.from_arrow(con.sql(sql.load(DERIVED_VIEWS[view])).to_arrow_table()).create_view(view)
    counts = {}
    try:
        for mart, query in SUMMARY_MARTS:
            if progress:
                progress(mart)
            result = queries.run_arrow(con, query, **config.params(query, con))
            counts[mart] = land_mart(root, mart, result)
            register_table(con, root, mart)
    finally:
        for view in _BUILT_ONCE:
            con.sql(sql.load(DERIVED_VIEWS[view])).create_view(view)
    return counts


# --- state -----------------------------------------------------------------------------------


def _state(root: Path) -> sqlite3.Connection:
    return state_files.open_state(root, state_files.ATTRIBUTION)


def _inputs_fingerprint(root: Path, config: AttributionConfig) -> str:
    """What the summary marts read besides the sample-level marts and the scheduler's tables:
    the other raw tables, the SQL of every mart and helper, and the config."""
    others = [layout.files_fingerprint(layout.table_files(root, t)) for t in _OTHER_RAW]
    return _inputs_digest(config, others)


def _inputs_digest(config: AttributionConfig, tables: Iterable[str]) -> str:
    """`_inputs_fingerprint` of the other raw tables' fingerprints `tables` (in _OTHER_RAW's
    order)."""
    digest = hashlib.sha1(repr(config).encode())
    for fingerprint in tables:
        digest.update(fingerprint.encode())
    for query in (*(q for _, q in SAMPLE_MARTS), *(q for _, q in SUMMARY_MARTS), *_HELPERS):
        digest.update(sql.load(query).encode())
    return digest.hexdigest()


def _scheduler_records(root: Path) -> dict[str, str]:
    """Every file of the scheduler's tables -> its size and modification time."""
    records: dict[str, str] = {}
    for table in _SCHEDULER:
        records |= compaction_log.stamps(layout.files_listing(layout.table_files(root, table)))
    return records


def _carry_state(root: Path, config: AttributionConfig) -> tuple[str, dict[str, str]]:
    """The other inputs' fingerprint and the scheduler's files now (as `_inputs_fingerprint`
    and `_scheduler_records`), after carrying the recorded state across the raw tables' merges
    since (warehouse/compaction_log.py): a merge keeps every row, so inputs recorded as the
    files before merges that still hold are the inputs now, and scheduler files recorded as a
    merged partition's files before hold the jobs of its files after."""
    carries = {t: compaction_log.carry(root, "summary", t) for t in (*_OTHER_RAW, *_SCHEDULER)}
    inputs = _inputs_digest(
        config, (layout.listing_fingerprint(carries[t].now) for t in _OTHER_RAW)
    )
    before = _inputs_digest(
        config, (layout.listing_fingerprint(carries[t].before) for t in _OTHER_RAW)
    )
    records: dict[str, str] = {}
    for table in _SCHEDULER:
        records |= compaction_log.stamps(carries[table].now)
    with _state(root) as db:
        if before != inputs:
            db.execute("UPDATE summary_built SET inputs = ? WHERE inputs = ?", (inputs, before))
        for table in _SCHEDULER:
            for merge in carries[table].holds.values():
                _carry_records(db, merge)
    for table, carried in carries.items():
        compaction_log.forget(root, "summary", table, carried.read)
    return inputs, records


def _carry_records(db: sqlite3.Connection, merge: compaction_log.Merge) -> None:
    """Record the files after `merge` in place of those before, with their jobs, when the
    recorded files are exactly those before (else they are late records, as before)."""
    before, after = compaction_log.stamps(merge.before), compaction_log.stamps(merge.after)
    for path, stamp in before.items():
        known = db.execute("SELECT stamp FROM summary_records WHERE path = ?", (path,)).fetchone()
        if known != (stamp,):
            return
    jobs: set[tuple[str, str]] = set()
    for path in before:
        jobs.update(
            db.execute(
                "SELECT cluster, job_id FROM summary_record_jobs WHERE path = ?", (path,)
            ).fetchall()
        )
        db.execute("DELETE FROM summary_records WHERE path = ?", (path,))
        db.execute("DELETE FROM summary_record_jobs WHERE path = ?", (path,))
    for path, stamp in after.items():  # the rows of all files before in each: a superset
        db.execute("INSERT INTO summary_records VALUES (?, ?)", (path, stamp))
        db.executemany(
            "INSERT INTO summary_record_jobs VALUES (?, ?, ?)",
            [(path, cluster, job_id) for cluster, job_id in sorted(jobs)],
        )


def _sample_mart_days(root: Path) -> dict[DayKey, list[Path]] | None:
    """The sample-level mart files of each day partition; None if one is outside the layout."""
    days: dict[DayKey, list[Path]] = {}
    for mart, _ in SAMPLE_MARTS:
        for path in layout.table_files(root, mart):
            key = layout.partition_key(path)
            if key is None:
                return None
            days.setdefault(key, []).append(path)
    return days


def _marts_fingerprint(root: Path) -> str:
    return layout.files_fingerprint(
        p for mart, _ in SUMMARY_MARTS for p in layout.table_files(root, mart)
    )


def _index_path(root: Path, key: DayKey) -> Path:
    return layout.state_dir(root) / _INDEX_DIR / key[0] / f"{key[1].isoformat()}.parquet"


def _index_files(root: Path) -> list[Path]:
    folder = layout.state_dir(root) / _INDEX_DIR
    return sorted(p for p in folder.rglob("*.parquet") if not p.name.startswith("."))


def _index_fingerprint(root: Path) -> str:
    return layout.files_fingerprint(_index_files(root))


def _write_index(root: Path, index: pa.Table, keys: Iterable[DayKey]) -> None:
    """Write the index rows of each day in `keys` to its file (none: the file is removed)."""
    clusters = pc.unique(index.column("cluster")).to_pylist()
    for key in keys:
        path = _index_path(root, key)
        names = pa.array([c for c in clusters if layout.safe_name(c) == key[0]], pa.string())
        rows = index.filter(
            pc.and_(
                pc.is_in(index.column("cluster"), names),
                pc.equal(index.column("date"), pa.scalar(key[1], pa.date32())),
            )
        )
        if not rows.num_rows:
            path.unlink(missing_ok=True)
            continue
        _write_state_file(rows, path)


def _read_index(root: Path, keys: Iterable[DayKey]) -> list[pa.Table]:
    return [pq.read_table(p) for k in keys if (p := _index_path(root, k)).exists()]


def _index_of(con: duckdb.DuckDBPyConnection, files: list[Path]) -> pa.Table:
    register_files(con, "gpu_job_buckets", files, view="gpu_job_buckets")
    return queries.run_arrow(con, "attribution/summary_index")


def record_summary_state(
    root: Path,
    config: AttributionConfig,
    *,
    inputs: str | None = None,
    records: dict[str, str] | None = None,
) -> None:
    """Record what the summary marts were just built whole from, so the next change of some
    day partitions or late scheduler records can update them instead of rebuilding them.
    `inputs`, `records`: the fingerprint of the other inputs and the scheduler's files, taken
    before the build (default: now)."""
    inputs = inputs or _inputs_fingerprint(root, config)
    records = _scheduler_records(root) if records is None else records
    days = _sample_mart_days(root)
    with _state(root) as db:
        db.execute("DELETE FROM summary_built")
        db.execute("DELETE FROM summary_days")
        db.execute("DELETE FROM summary_records")
        db.execute("DELETE FROM summary_record_jobs")
    if days is None:
        return  # not in the layout: every refresh rebuilds whole
    engine = open_engine(WarehouseConfig(root=root))
    try:
        register_reference(engine)
        index = _index_of(engine, layout.table_files(root, "gpu_job_buckets"))
        for path in _index_files(root):
            path.unlink()
        _write_index(root, index, days)
        _write_derived(engine, root, index)
    finally:
        engine.close()
    _save_state(root, inputs, days, records)


def _save_state(
    root: Path, inputs: str, days: dict[DayKey, list[Path]], records: dict[str, str]
) -> None:
    with _state(root) as db:
        db.execute("DELETE FROM summary_built")
        db.execute(
            "INSERT INTO summary_built VALUES (?, ?, ?)",
            (inputs, _marts_fingerprint(root), _index_fingerprint(root)),
        )
        db.execute("DELETE FROM summary_days")
        db.executemany(
            "INSERT INTO summary_days VALUES (?, ?, ?)",
            [
                (k[0], k[1].isoformat(), layout.files_fingerprint(files))
                for k, files in days.items()
            ],
        )
        known = dict(db.execute("SELECT path, stamp FROM summary_records").fetchall())
        for path in sorted(p for p in set(known) | set(records) if known.get(p) != records.get(p)):
            db.execute("DELETE FROM summary_records WHERE path = ?", (path,))
            db.execute("DELETE FROM summary_record_jobs WHERE path = ?", (path,))
            if path in records:
                db.execute("INSERT INTO summary_records VALUES (?, ?)", (path, records[path]))
                jobs = _late_jobs([Path(path)])
                db.executemany(
                    "INSERT INTO summary_record_jobs VALUES (?, ?, ?)",
                    [(path, c, j) for c, j in zip(*jobs.to_pydict().values(), strict=True)],
                )


def _stale_reason(
    root: Path, inputs: str, records: dict[str, str]
) -> tuple[str, dict[DayKey, str], pa.Table | None]:
    """Why the summary marts cannot be updated in place ("" when they can), the digest of each
    day partition they were built from, and the jobs of late scheduler records (None: none):
    those in files new or rewritten since, and those the rewritten or removed files had.
    `inputs`, `records`: the inputs' fingerprint and the scheduler's files now."""
    with _state(root) as db:
        built = db.execute("SELECT inputs, marts, index_fp FROM summary_built").fetchall()
        recorded = {
            (cluster, dt.date.fromisoformat(date)): digest
            for cluster, date, digest in db.execute(
                "SELECT cluster, date, digest FROM summary_days"
            )
        }
        known = dict(db.execute("SELECT path, stamp FROM summary_records").fetchall())
        gone = [p for p, stamp in known.items() if records.get(p) != stamp]
        old_jobs = [
            row
            for path in gone
            for row in db.execute(
                "SELECT cluster, job_id FROM summary_record_jobs WHERE path = ?", (path,)
            )
        ]
    reason = _stale_why(root, inputs, built)
    fresh = [Path(p) for p, stamp in records.items() if known.get(p) != stamp]
    if reason or (not fresh and not gone):  # rebuilt whole anyway, or no late record
        return reason, recorded, None
    old = pa.table(
        {
            "cluster": pa.array([c for c, _ in old_jobs], pa.string()),
            "job_id": pa.array([j for _, j in old_jobs], pa.string()),
        }
    )
    late = pa.concat_tables([old, _late_jobs(fresh)]).group_by(["cluster", "job_id"])
    return reason, recorded, late.aggregate([])


def _stale_why(root: Path, inputs: str, built: list[tuple[str, str, str]]) -> str:
    if len(built) != 1:
        return "no record of a whole build"
    built_inputs, marts, index_fp = built[0]
    if marts != _marts_fingerprint(root):
        return "the summary marts' files changed since they were built"
    if index_fp != _index_fingerprint(root):
        return "the summary index changed since it was written"
    if built_inputs != inputs:
        return "raw tables other than samples and the scheduler's, the SQL or the config changed"
    if any(layout.partition_key(p) is None for p in layout.table_files(root, "gpu_samples")):
        return "sample files outside the partition layout"
    return ""


# --- the update ------------------------------------------------------------------------------


def refresh_summary_marts(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    config: AttributionConfig,
    progress: Callable[[str], None] | None = None,
    *,
    force: bool = False,
    warehouse: WarehouseConfig | None = None,
) -> SummaryUpdate:
    """Bring the summary marts up to date with the sample-level ones and the scheduler's
    records: in place where only some day partitions changed or new scheduler batches landed,
    whole otherwise (or with `force`). Views of the summary marts in `con` are refreshed; the
    update itself runs in its own connection."""
    days = _sample_mart_days(root)
    inputs, records = _carry_state(root, config)
    reason, recorded, late = ("forced", {}, None) if force else _stale_reason(root, inputs, records)
    if days is None:
        reason = reason or "sample-level mart files outside the partition layout"
    changed: tuple[DayKey, ...] = ()
    if not reason and days is not None:
        digests = {key: layout.files_fingerprint(files) for key, files in days.items()}
        changed = tuple(
            sorted(k for k in set(digests) | set(recorded) if digests.get(k) != recorded.get(k))
        )
        if not changed and late is None:
            if progress:
                for mart, _ in SUMMARY_MARTS:
                    progress(mart)
            return SummaryUpdate("unchanged", {m: mart_rows(root, m) for m, _ in SUMMARY_MARTS})
        engine = open_engine(warehouse or WarehouseConfig(root=root))
        try:
            register_reference(engine)
            jobs, weeks = _update(engine, root, config, days, changed, late, progress)
        finally:
            engine.close()
        _save_state(root, inputs, days, records)
        for mart, _ in SUMMARY_MARTS:
            register_table(con, root, mart)
        counts = {m: mart_rows(root, m) for m, _ in SUMMARY_MARTS}
        late_jobs = 0 if late is None else late.num_rows
        return SummaryUpdate("incremental", counts, changed, jobs, weeks, late_jobs)
    for mart, _ in SAMPLE_MARTS:
        register_table(con, root, mart)
    counts = build_summary_marts(con, root, config, progress)
    record_summary_state(root, config, inputs=inputs, records=records)
    return SummaryUpdate("rebuilt", counts, reason=reason)


def mart_rows(root: Path, mart: str) -> int:
    """Rows in `mart`'s files, from their footers."""
    return sum(pq.read_metadata(p).num_rows for p in layout.table_files(root, mart))


def _arrow_view(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    """Make `table` readable as `name` (registered: never also a view of that name)."""
    con.register(name, table)


def _restricted(con: duckdb.DuckDBPyConnection, base: str, view: str, scope: str) -> None:
    """Create `view` as the rows of `base` whose (cluster, job_id) is in `scope`."""
    con.table(base).join(con.table(scope), ["cluster", "job_id"], how="semi").create_view(view)


def _day_start(date: dt.date) -> float:
    return float((date - _EPOCH).days * _DAY_S)


def _ends(index: pa.Table) -> dict[str, float]:
    """The end of each cluster's data (max of epoch(ts) + interval_s over its samples)."""
    ends = index.group_by("cluster").aggregate([("interval_end_e", "max")])
    return dict(
        zip(
            ends.column("cluster").to_pylist(),
            ends.column("interval_end_e_max").to_pylist(),
            strict=True,
        )
    )


def _scope_days(
    both_changed: pa.Table,
    changed: tuple[DayKey, ...],
    before: dict[str, float],
    after: dict[str, float],
    open_from: dict[str, float],
    touched: Iterable[tuple[str, dt.date]] = (),
) -> tuple[pa.Table, list[str]]:
    """The (cluster, day)s whose usage_daily rows can change, and the clusters whose data end
    moved: the changed days (by the clusters their rows name), every day between a cluster's
    old and new end of data (allocations still open run to it; where the cluster had no data
    before or has none now, every day from its earliest open allocation's start, `open_from`,
    as such an allocation holds nothing without an end of data), and the days late scheduler
    records `touched`."""
    wanted = set(changed)
    days = {(c, d) for c, d in _pairs(both_changed) if (layout.safe_name(c), d) in wanted}
    days.update(touched)
    moved = []
    for cluster in sorted(set(before) | set(after)):
        ends = [e for e in (before.get(cluster), after.get(cluster)) if e is not None]
        if len(ends) == 2 and ends[0] == ends[1]:
            continue
        moved.append(cluster)
        if len(ends) == 1 and cluster in open_from:
            ends.append(open_from[cluster])
        for n in range(int(min(ends) // _DAY_S), int(max(ends) // _DAY_S) + 1):
            days.add((cluster, _EPOCH + dt.timedelta(days=n)))
    ordered = sorted(days)
    table = pa.table(
        {
            "cluster": pa.array([c for c, _ in ordered], pa.string()),
            "date": pa.array([d for _, d in ordered], pa.date32()),
            "start_e": pa.array([_day_start(d) for _, d in ordered], pa.float64()),
            "end_e": pa.array([_day_start(d) + _DAY_S for _, d in ordered], pa.float64()),
        }
    )
    return table, moved


def _late_jobs(files: Iterable[Path]) -> pa.Table:
    """The distinct (cluster, job_id) of the rows in scheduler batch `files`."""
    keys = pa.schema([("cluster", pa.string()), ("job_id", pa.string())])
    rows = [_job_keys(p, keys) for p in files]
    return pa.concat_tables(rows or [keys.empty_table()]).group_by(keys.names).aggregate([])


def _job_keys(path: Path, keys: pa.Schema) -> pa.Table:
    """`path`'s (cluster, job_id) rows; a cluster the file leaves out (or null) is its folder's,
    as the views read it (warehouse.connection.register_files)."""
    present = [name for name in keys.names if name in pq.read_schema(path).names]
    rows = pq.read_table(path, columns=present)
    folder = pa.scalar(layout.folder_cluster(path), pa.string())
    if "cluster" not in present:
        rows = rows.append_column("cluster", pa.nulls(rows.num_rows, pa.string()))
    rows = rows.set_column(
        rows.schema.get_field_index("cluster"),
        "cluster",
        pc.fill_null(rows.column("cluster").cast(pa.string()), folder),
    )
    return rows.select(keys.names).cast(keys)


def _late_records(
    con: duckdb.DuckDBPyConnection, root: Path, jobs_latest: pa.Table, intervals: pa.Table
) -> tuple[pa.Table, list[tuple[str, dt.date]]]:
    """jobs_latest with the rows of the jobs in `late_jobs` taken anew from every record, and
    the (cluster, day)s those jobs touch before and after (sql/attribution/late_days.sql)."""
    _register_raw(con, root, ("jobs",))
    for table in ("jobs", "job_gpus"):
        _restricted(con, f"{table}_all", table, "late_jobs")
    fresh = con.sql(sql.load(DERIVED_VIEWS["jobs_latest"])).to_arrow_table()
    _arrow_view(con, "late_jobs_latest", fresh)
    late_intervals = con.sql(sql.load(DERIVED_VIEWS["job_gpu_intervals"])).to_arrow_table()
    _arrow_view(con, "late_job_gpu_intervals", late_intervals)
    _arrow_view(con, "jobs_latest_before", jobs_latest)
    _arrow_view(con, "job_gpu_intervals_before", intervals)
    touched = _pairs(queries.run_arrow(con, "attribution/late_days"))
    others = con.from_arrow(jobs_latest).join(
        con.table("late_jobs"), ["cluster", "job_id"], how="anti"
    )
    merged = others.union(con.from_arrow(fresh.cast(jobs_latest.schema))).to_arrow_table()
    con.table("job_gpus_all").create_view("job_gpus")
    return merged, touched


def _pairs(table: pa.Table) -> list[tuple[str, dt.date]]:
    """The distinct (cluster, date) pairs of `table`'s rows."""
    pairs = table.group_by(["cluster", "date"]).aggregate([])
    return list(
        zip(pairs.column("cluster").to_pylist(), pairs.column("date").to_pylist(), strict=True)
    )


def _folder_keys(pairs: Iterable[tuple[str, dt.date]]) -> set[DayKey]:
    """The partition folders' keys of (cluster, date) pairs."""
    return {(layout.safe_name(c), d) for c, d in pairs}


def _days_holding(index: pa.Table, jobs: pa.Table) -> set[DayKey]:
    """The day partitions holding rows of `jobs` (cluster, job_id), by the index."""
    held = index.join(jobs, ["cluster", "job_id"], join_type="left semi")
    return _folder_keys(_pairs(held))


def _extent(index: pa.Table) -> dict[str, tuple[float, float, int]]:
    """Per cluster: the data's first time, last span end and devices, as cluster_occupancy
    reads them from gpu_job_buckets."""
    t = index.group_by("cluster").aggregate(
        [("first_e", "min"), ("last_end_e", "max"), ("device", "count_distinct")]
    )
    return {
        c: (f, e, n)
        for c, f, e, n in zip(
            t.column("cluster").to_pylist(),
            t.column("first_e_min").to_pylist(),
            t.column("last_end_e_max").to_pylist(),
            t.column("device_count_distinct").to_pylist(),
            strict=True,
        )
    }


def _occupancy_days(
    old_index: pa.Table, new_index: pa.Table, days: set[tuple[str, dt.date]]
) -> set[tuple[str, dt.date]] | None:
    """The (cluster, day)s whose cluster_occupancy rows can change, or None when every row can.

    A bucket's row depends on its partials in bucket_occupancy, the cluster's first time, last
    span end and device count. Where the first time and device count stayed, only the days in
    scope (`days`: their partials changed) and the days where the last span end moved can."""
    before, after = _extent(old_index), _extent(new_index)
    if set(before) != set(after):
        return None
    out = set(days)
    for cluster, (first, last, devices) in after.items():
        old_first, old_last, old_devices = before[cluster]
        if (first, devices) != (old_first, old_devices):
            return None
        if last != old_last:
            lo, hi = sorted((last, old_last))
            out.update(
                (cluster, _EPOCH + dt.timedelta(days=n))
                for n in range(int(lo // _DAY_S), int(hi // _DAY_S) + 1)
            )
    return out


def _reaching(index: pa.Table, days: set[tuple[str, dt.date]]) -> set[DayKey]:
    """The day partitions whose samples' spans reach into any of `days`: those days, and the
    earlier ones whose last span runs past midnight into them (their carried partials)."""
    ends = index.group_by(["cluster", "date"]).aggregate([("last_end_e", "max")])
    wanted: dict[str, list[dt.date]] = {}
    for cluster, day in days:
        wanted.setdefault(cluster, []).append(day)
    out: set[DayKey] = set()
    for cluster, date, end in zip(
        ends.column("cluster").to_pylist(),
        ends.column("date").to_pylist(),
        ends.column("last_end_e_max").to_pylist(),
        strict=True,
    ):
        if any(date == d or (date < d and end > _day_start(d)) for d in wanted.get(cluster, ())):
            out.add((layout.safe_name(cluster), date))
    return out


def _week_ranges(weeks: pa.Table) -> list[tuple[str, dt.date, int]]:
    """(cluster, first Monday, weeks) of each cluster's range of weeks in `weeks`."""
    return [
        (c, _EPOCH + dt.timedelta(days=4 + 7 * first), last - first + 1)
        for c, first, last in zip(
            weeks.column("cluster").to_pylist(),
            weeks.column("first_week_n").to_pylist(),
            weeks.column("last_week_n").to_pylist(),
            strict=True,
        )
    ]


def _week_starts(weeks: pa.Table) -> set[tuple[str, dt.date]]:
    """The (cluster, Monday) of every week in scope: fairness_weekly's partitions."""
    return {
        (c, monday + dt.timedelta(days=7 * n))
        for c, monday, count in _week_ranges(weeks)
        for n in range(count)
    }


def _week_days(weeks: pa.Table) -> set[tuple[str, dt.date]]:
    """The (cluster, day) of every day of the weeks in scope."""
    return {
        (c, monday + dt.timedelta(days=n))
        for c, monday, count in _week_ranges(weeks)
        for n in range(7 * count)
    }


def _partition_day(mart: str, table: pa.Table) -> list[dt.date | None]:
    column = MARTS[mart].date_column
    if column is None:
        return [None] * table.num_rows
    values = table.column(column)
    if not pa.types.is_date32(values.type):
        values = pc.cast(pc.cast(values, pa.timestamp("ms", tz="UTC")), pa.date32())
    return list(values.to_pylist())


def _land_changed(
    root: Path, mart: str, result: pa.Table, partitions: set[tuple[str, dt.date]] | None = None
) -> None:
    """Write the date partitions of `mart` whose rows differ from `result`'s; remove those
    `result` has no rows for. With `partitions` (cluster, day), only those are considered."""
    schema = MARTS[mart].schema
    table = result.select(schema.names).cast(schema)
    groups: dict[tuple[str, dt.date], list[int]] = {}
    clusters = table.column("cluster").to_pylist()
    for row, (cluster, day) in enumerate(zip(clusters, _partition_day(mart, table), strict=True)):
        if day is not None and (partitions is None or (cluster, day) in partitions):
            groups.setdefault((cluster, day), []).append(row)
    folders = _folder_keys(groups)
    present: set[tuple[str, dt.date]] = set()
    for path in layout.table_files(root, mart):
        if (found := layout.partition_key(path)) is not None:
            present.add(found)
    considered = None if partitions is None else _folder_keys(partitions)
    for folder_key in sorted(present - folders):
        if considered is None or folder_key in considered:
            replace_partition(root, mart, schema.empty_table(), folder_key[0], folder_key[1])
    for (cluster, day), rows in sorted(groups.items()):
        part = table.take(pa.array(rows, pa.int64()))
        folder = layout.partition_dir(root, mart, cluster, day)
        old = [pq.read_table(p).select(schema.names) for p in sorted(folder.glob("*.parquet"))]
        if old and pa.concat_tables(old).cast(schema).equals(part):
            continue
        replace_partition(root, mart, part, cluster, day)


def _merge_jobs(root: Path, mart: str, new: pa.Table, scope: pa.Table) -> pa.Table:
    """`mart` (one row per job) with the rows of the jobs in `scope` replaced by `new`'s,
    landed for the clusters in scope; return the whole merged mart."""
    schema = MARTS[mart].schema
    old_files = layout.table_files(root, mart)
    old = [pq.read_table(p, columns=schema.names).cast(schema) for p in old_files]
    fresh = new.select(schema.names).cast(schema)
    parts = [fresh]
    clusters = set(scope.column("cluster").to_pylist())
    for table in old:
        for cluster in pc.unique(table.column("cluster")).to_pylist():
            rows = table.filter(pc.equal(table.column("cluster"), cluster))
            if cluster in clusters:
                in_scope = scope.filter(pc.equal(scope.column("cluster"), cluster))
                rows = rows.filter(pc.invert(pc.is_in(rows.column("job_id"), in_scope["job_id"])))
            parts.append(rows)
    merged = pa.concat_tables(parts).sort_by([("cluster", "ascending"), ("job_id", "ascending")])
    for cluster in sorted(clusters):
        replace_partitions(
            root, mart, merged.filter(pc.equal(merged.column("cluster"), cluster)), cluster
        )
    return merged


def _derived_path(root: Path, view: str) -> Path:
    return layout.state_dir(root) / _INDEX_DIR / "_derived" / f"{view}.parquet"


def _write_state_file(table: pa.Table, path: Path) -> None:
    """Write a state file (re-derivable, so no fsync: a torn one fails the fingerprint check)."""
    layout.ensure_dir(path.parent)
    fd, tmp = layout.create_temp(path)  # like every state file: the lake's group only
    try:
        with os.fdopen(fd, "wb") as handle:
            pq.write_table(table, handle)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # renamed into place already, unless the write failed


def _register_raw(con: duckdb.DuckDBPyConnection, root: Path, tables: Iterable[str]) -> None:
    for table in tables:
        register_files(con, table, layout.table_files(root, table), view=f"{table}_all")
        con.table(f"{table}_all").create_view(table)


def _write_derived(con: duckdb.DuckDBPyConnection, root: Path, index: pa.Table) -> None:
    """Cache `jobs_latest` and `job_gpu_intervals` as of this build: they read only raw tables
    other than samples (unchanged while updates are incremental) and, for allocations still
    open, the data's end (whose jobs an update recomputes)."""
    _register_raw(con, root, ("jobs", "job_gpus", "gpus"))
    _arrow_view(con, "gpu_job_buckets", index)
    for view in ("jobs_latest", "job_gpu_intervals"):
        con.sql(sql.load(DERIVED_VIEWS[view])).create_view(view)
        _write_state_file(con.table(view).to_arrow_table(), _derived_path(root, view))


def _shares(con: duckdb.DuckDBPyConnection, intervals: pa.Table, jobs: str) -> pa.Table:
    """`job_gpu_shares` of the jobs in view `jobs` (cluster, job_id), from every job's
    `intervals`: a job's share of a GPU depends on all the jobs that held it at the same time,
    in scope or not, so the shares are cut from every interval on their devices that meets
    theirs in time (sql/attribution/share_peers.sql). Leaves `job_gpu_intervals` registered as
    those intervals: the caller sets it after."""
    _arrow_view(con, "share_pool", intervals)
    con.table(jobs).create_view("share_jobs")
    _arrow_view(con, "job_gpu_intervals", queries.run_arrow(con, "attribution/share_peers"))
    shares = con.sql(sql.load(DERIVED_VIEWS["job_gpu_shares"]))
    return shares.join(con.table(jobs), ["cluster", "job_id"], how="semi").to_arrow_table()


def _update(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    config: AttributionConfig,
    days: dict[DayKey, list[Path]],
    changed: tuple[DayKey, ...],
    late: pa.Table | None,
    progress: Callable[[str], None] | None,
) -> tuple[int, int]:
    """Update the summary marts for the `changed` day partitions and the `late` scheduler
    records' jobs; return the jobs and the (cluster, week)s in scope."""
    # The index before (as recorded) and after (the changed days indexed again).
    old_changed = _read_index(root, changed)
    kept = _read_index(root, (k for k in days if k not in set(changed)))
    buckets = [
        p for k in changed for p in days.get(k, []) if p.is_relative_to(root / "gpu_job_buckets")
    ]
    new_changed = _index_of(con, buckets)
    schema = new_changed.schema
    old_index = pa.concat_tables(
        [t.cast(schema) for t in (*kept, *old_changed)] or [schema.empty_table()]
    )
    new_index = pa.concat_tables([*(t.cast(schema) for t in kept), new_changed])
    both_changed = pa.concat_tables([*(t.cast(schema) for t in old_changed), new_changed])
    _write_index(root, new_changed, changed)

    # jobs_latest and the allocations as last built, the late records' jobs anew.
    _register_raw(con, root, ("job_gpus", "gpus", "app_throughput", "gpu_events", "associations"))
    _arrow_view(con, "gpu_job_buckets", new_index)  # stands in: the data's extent and devices
    _arrow_view(con, "summary_index", new_index)
    jobs_latest = pq.read_table(_derived_path(root, "jobs_latest"))
    intervals = pq.read_table(_derived_path(root, "job_gpu_intervals"))
    _arrow_view(con, "late_jobs", _late_jobs(()) if late is None else late)
    touched: list[tuple[str, dt.date]] = []
    if late is not None:
        jobs_latest, touched = _late_records(con, root, jobs_latest, intervals)
    starts = queries.run_arrow(con, "attribution/open_starts")
    open_from = dict(zip(starts["cluster"].to_pylist(), starts["start_e"].to_pylist(), strict=True))
    scope_days, moved = _scope_days(
        both_changed, changed, _ends(old_index), _ends(new_index), open_from, touched
    )

    # The jobs in scope.
    _arrow_view(con, "jobs_latest_all", jobs_latest)
    con.table("jobs_latest_all").create_view("jobs_latest")
    _arrow_view(con, "scope_days", scope_days)
    _arrow_view(con, "changed_index", both_changed)
    _arrow_view(con, "moved_ends", pa.table({"cluster": pa.array(moved, pa.string())}))
    scope = queries.run_arrow(con, "attribution/scope_jobs")
    _arrow_view(con, "scope_jobs", scope)

    # job_usage and job_outcomes of the jobs in scope, from all of their days.
    for table in ("job_gpus", "app_throughput", "jobs_latest"):
        _restricted(con, f"{table}_all", table, "scope_jobs")
    fresh = con.sql(sql.load(DERIVED_VIEWS["job_gpu_intervals"])).to_arrow_table()
    others = con.from_arrow(intervals).join(
        con.table("scope_jobs"), ["cluster", "job_id"], how="anti"
    )
    intervals = others.union(con.from_arrow(fresh.cast(intervals.schema))).to_arrow_table()
    _arrow_view(con, "job_gpu_shares", _shares(con, intervals, "scope_jobs"))
    _arrow_view(con, "job_gpu_intervals", fresh)
    weeks = queries.run_arrow(con, "attribution/scope_weeks")  # fairness_weekly's, below
    daily_files = layout.table_files(root, "job_gpu_daily")
    held = _days_holding(new_index, scope)  # the days the jobs in scope have rows on
    register_files(
        con,
        "job_gpu_daily",
        [p for p in daily_files if layout.partition_key(p) in held],
        view="job_gpu_daily_all",
    )
    _restricted(con, "job_gpu_daily_all", "job_gpu_daily", "scope_jobs")
    energy_files = layout.table_files(root, "job_energy_hourly")
    register_files(
        con,
        "job_energy_hourly",
        [p for p in energy_files if layout.partition_key(p) in held],
        view="job_energy_hourly_all",
    )
    _restricted(con, "job_energy_hourly_all", "job_energy_hourly", "scope_jobs")
    register_intensity(con, config.emissions)
    params = config.values()

    def run(mart: str) -> pa.Table:
        if progress:
            progress(mart)
        query = dict(SUMMARY_MARTS)[mart]
        wanted = queries.parameters(con, query)
        return queries.run_arrow(con, query, **{k: params[k] for k in wanted})

    usage = run("job_usage")
    _arrow_view(con, "job_usage", usage)
    outcomes = run("job_outcomes")

    # usage_daily of the days in scope: every job in it is in scope_jobs.
    keys = set(
        zip(
            scope_days.column("cluster").to_pylist(),
            scope_days.column("date").to_pylist(),
            strict=True,
        )
    )
    folders = _folder_keys(keys)
    files = [p for p in daily_files if layout.partition_key(p) in folders]
    register_files(con, "job_gpu_daily", files, view="job_gpu_daily_days")
    dates = con.from_arrow(scope_days.select(["cluster", "date"]))
    in_scope = ["cluster", "date"]
    con.table("job_gpu_daily_days").join(dates, in_scope, how="semi").create_view("job_gpu_daily")
    files = [p for p in energy_files if layout.partition_key(p) in folders]
    register_files(con, "job_energy_hourly", files, view="job_energy_hourly_days")
    energy_days = con.table("job_energy_hourly_days").join(dates, in_scope, how="semi")
    energy_days.create_view("job_energy_hourly")
    daily = con.from_arrow(run("usage_daily")).join(dates, in_scope, how="semi").to_arrow_table()
    _land_changed(root, "usage_daily", daily, keys)
    merged_usage = _merge_jobs(root, "job_usage", usage, scope)
    merged_outcomes = _merge_jobs(root, "job_outcomes", outcomes, scope)

    # cluster_occupancy of the days it can change on (all, where the data's start or device
    # count moved), from the partials reaching them; changed partitions land.
    occupancy_days = _occupancy_days(old_index, new_index, keys)
    occupancy_files = layout.table_files(root, "bucket_occupancy")
    if occupancy_days is not None:
        reaching = _reaching(new_index, occupancy_days)
        occupancy_files = [p for p in occupancy_files if layout.partition_key(p) in reaching]
    register_files(con, "bucket_occupancy", occupancy_files)
    _land_changed(root, "cluster_occupancy", run("cluster_occupancy"), occupancy_days)

    # fairness_weekly of the weeks in scope, from every job reaching them and their days of
    # usage_daily; changed partitions land.
    for table in ("job_gpus", "app_throughput", "jobs_latest"):
        con.table(f"{table}_all").create_view(table)
    _arrow_view(con, "job_gpu_intervals_all", intervals)
    con.table("job_gpu_intervals_all").create_view("job_gpu_intervals")
    _arrow_view(con, "scope_weeks", weeks)
    _arrow_view(con, "scope_week_jobs", queries.run_arrow(con, "attribution/scope_week_jobs"))
    _arrow_view(con, "job_gpu_shares", _shares(con, intervals, "scope_week_jobs"))
    for table in ("jobs_latest", "job_gpu_intervals"):
        _restricted(con, f"{table}_all", table, "scope_week_jobs")
    _arrow_view(con, "job_usage", merged_usage)
    _arrow_view(con, "job_outcomes", merged_outcomes)
    in_weeks = _folder_keys(_week_days(weeks))
    register_files(
        con,
        "usage_daily",
        [p for p in layout.table_files(root, "usage_daily") if layout.partition_key(p) in in_weeks],
    )
    in_scope_weeks = _week_starts(weeks)
    _land_changed(root, "fairness_weekly", run("fairness_weekly"), in_scope_weeks)
    _write_state_file(intervals, _derived_path(root, "job_gpu_intervals"))
    if late is not None:
        _write_state_file(jobs_latest, _derived_path(root, "jobs_latest"))
    return int(scope.num_rows), len(in_scope_weeks)
