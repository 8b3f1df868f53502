"""`refresh_summary_marts`: bring the summary marts up to date in place where only some day
partitions or scheduler batches changed, whole otherwise.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

import sql
from warehouse import layout, queries
from warehouse.allocations import hold_allocations
from warehouse.arrow_arrays import dates as date_array
from warehouse.arrow_arrays import read_parquet, strings
from warehouse.connection import (
    DERIVED_VIEWS,
    WarehouseConfig,
    open_engine,
    register_files,
    register_reference,
    register_table,
)
from warehouse.emissions import register_intensity
from warehouse.partitions import DayKey, clear_engine
from warehouse.row_counts import table_rows
from warehouse.summary.carry import _carry_state
from warehouse.summary.index import (
    _derived_path,
    _index_of,
    _read_index,
    _read_kept,
    _write_index,
    _write_state_file,
    _write_whole_index,
)
from warehouse.summary.landing import _land_changed, _merge_jobs
from warehouse.summary.scope import (
    _data_ends,
    _days_holding,
    _folder_keys,
    _late_jobs,
    _late_records,
    _occupancy_days,
    _reaching,
    _scope_days,
    _week_days,
    _week_starts,
)
from warehouse.summary.state import (
    _sample_mart_days,
    _save_state,
    _stale_reason,
    record_summary_state,
)
from warehouse.summary.views import _arrow_view, _register_raw, _restricted
from warehouse.summary.whole import SUMMARY_MARTS, build_whole, mart_rows

if TYPE_CHECKING:
    import duckdb

    from warehouse.attribution import AttributionConfig


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


def refresh_summary_marts(
    con: duckdb.DuckDBPyConnection | None,
    root: Path,
    config: AttributionConfig,
    progress: Callable[[str], None] | None = None,
    *,
    force: bool = False,
    warehouse: WarehouseConfig | None = None,
    sample_files: dict[str, list[Path]] | None = None,
    engine: duckdb.DuckDBPyConnection | None = None,
) -> SummaryUpdate:
    """Bring the summary marts up to date with the sample-level ones and the scheduler's
    records: in place where only some day partitions changed or new scheduler batches landed,
    whole otherwise (or with `force`). Views of the summary marts in `con` are refreshed; the
    update itself runs in its own connection. With `con` None nothing is refreshed, and a
    whole rebuild reads the lake through a connection of its own. `sample_files`: each
    sample-level mart's files, as the caller listed them after building them (default: listed
    here); with `con`, its views of the sample-level marts are over those files (a whole
    rebuild reads them so, without registering them again). `engine`: an engine (open_engine)
    the update, or a whole rebuild without `con`, runs in, made bare first (`clear_engine`: the
    per-day pass built in it) and left to the caller to close; default: one opened and closed
    here."""
    days = _sample_mart_days(root, sample_files)
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
        own = engine or open_engine(warehouse or WarehouseConfig(root=root))
        if engine is not None:
            clear_engine(engine)  # what the per-day pass left in it
        try:
            register_reference(own)
            jobs, weeks = _update(own, root, config, days, changed, late, progress)
        finally:
            if engine is None:
                own.close()
        # listed once, for the state and the row counts
        listed = {m: layout.table_files(root, m) for m, _ in SUMMARY_MARTS}
        _save_state(root, inputs, days, records, digests=digests, marts=listed)
        for mart, _ in SUMMARY_MARTS:
            if con is not None:
                register_table(con, root, mart)
        counts = {m: table_rows(root, m, listed[m]) for m, _ in SUMMARY_MARTS}
        late_jobs = 0 if late is None else late.num_rows
        return SummaryUpdate("incremental", counts, changed, jobs, weeks, late_jobs)
    # what the build reads it registers itself: a bare engine, not a view of every table
    whole = con or engine or open_engine(warehouse or WarehouseConfig(root=root))
    if con is None:
        if engine is not None:
            clear_engine(engine)  # what the per-day pass left in it
        register_reference(whole)
    # the sample-level marts: registered in `con` by the caller as listed in `sample_files`
    registered = tuple(sample_files) if con is not None and sample_files is not None else ()
    try:  # registers what it reads
        built = build_whole(
            whole, root, config, progress, registered=registered, restore_views=con is not None
        )
    finally:
        if con is None and engine is None:
            whole.close()
    record_summary_state(
        root, config, inputs=inputs, records=records, built=built, sample_files=sample_files
    )
    return SummaryUpdate("rebuilt", built.counts, reason=reason)


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


def _files_of(root: Path, table: str, listed: list[Path]) -> list[Path]:
    """The files of `table` among `listed`, in `layout.table_files`'s order."""
    folder = str(layout.table_dir(root, table)) + os.sep
    return sorted(p for p in listed if str(p).startswith(folder))


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
    kept = _read_kept(root, changed)  # one file, however long the history
    if kept is None:
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
    written = _write_index(root, new_changed, changed)
    _write_whole_index(root, [*kept, *written])

    # jobs_latest and the allocations as last built, the late records' jobs anew.
    _register_raw(con, root, ("gpus", "app_throughput", "gpu_events", "associations"))
    # held in the engine, only new batch files read (warehouse/allocations.py): several steps
    # below read them, and the scheduler's files grow with the lake's history
    hold_allocations(con, root, "job_gpus_held")
    con.table("job_gpus_held").create_view("job_gpus_all")
    con.table("job_gpus_all").create_view("job_gpus")
    jobs_latest = read_parquet(_derived_path(root, "jobs_latest"))
    intervals = read_parquet(_derived_path(root, "job_gpu_intervals"))
    ends_before = _data_ends(con, old_index, jobs_latest)
    _arrow_view(con, "gpu_job_buckets", new_index)  # stands in: the data's extent and devices
    _arrow_view(con, "summary_index", new_index)
    _arrow_view(con, "late_jobs", _late_jobs(()) if late is None else late)
    touched: list[tuple[str, dt.date]] = []
    if late is not None:
        jobs_latest, touched = _late_records(con, root, jobs_latest, intervals, new_index)
    ends_after = _data_ends(con, new_index, jobs_latest)  # held: the jobs are restricted below
    _arrow_view(con, "jobs_latest_all", jobs_latest)
    con.table("jobs_latest_all").create_view("jobs_latest")
    starts = queries.run_arrow(con, "attribution/open_starts")
    open_from = dict(zip(starts["cluster"].to_pylist(), starts["start_e"].to_pylist(), strict=True))
    scope_days, moved = _scope_days(
        both_changed, changed, ends_before, ends_after, open_from, touched
    )

    # The jobs in scope.
    _arrow_view(con, "scope_days", scope_days)
    _arrow_view(con, "changed_index", both_changed)
    _arrow_view(con, "moved_ends", pa.table({"cluster": strings(moved)}))
    scope = queries.run_arrow(con, "attribution/scope_jobs")
    _arrow_view(con, "scope_jobs", scope)

    # job_usage and job_outcomes of the jobs in scope, from all of their days.
    for table in ("job_gpus", "app_throughput", "jobs_latest"):
        _restricted(con, f"{table}_all", table, "scope_jobs")
    fresh = queries.run_arrow(con, DERIVED_VIEWS["job_gpu_intervals"])
    others = con.from_arrow(intervals).join(
        con.table("scope_jobs"), ["cluster", "job_id"], how="anti"
    )
    intervals = others.union(con.from_arrow(fresh.cast(intervals.schema))).to_arrow_table()
    _arrow_view(con, "job_gpu_shares", _shares(con, intervals, "scope_jobs"))
    _arrow_view(con, "job_gpu_intervals", fresh)
    weeks = queries.run_arrow(con, "attribution/scope_weeks")  # fairness_weekly's, below
    # the sample-level marts' files as listed when the update began (it writes none of them)
    listed = [p for files in days.values() for p in files]
    daily_files = _files_of(root, "job_gpu_daily", listed)
    held = _days_holding(new_index, scope)  # the days the jobs in scope have rows on
    register_files(
        con,
        "job_gpu_daily",
        [p for p in daily_files if layout.partition_key(p) in held],
        view="job_gpu_daily_all",
    )
    _restricted(con, "job_gpu_daily_all", "job_gpu_daily", "scope_jobs")
    energy_files = _files_of(root, "job_energy_hourly", listed)
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
    # and the days before them: the part of a day's last samples past midnight counts on the next
    before = {(c, d - dt.timedelta(days=1)) for c, d in keys}
    reaching = _folder_keys(keys | before)
    files = [p for p in daily_files if layout.partition_key(p) in reaching]
    register_files(con, "job_gpu_daily", files, view="job_gpu_daily_days")
    dates = con.from_arrow(scope_days.select(["cluster", "date"]))
    in_scope = ["cluster", "date"]
    read_days = sorted(keys | before)
    read = pa.table(
        {
            "cluster": strings([c for c, _ in read_days]),
            "date": date_array([d for _, d in read_days]),
        }
    )
    con.table("job_gpu_daily_days").join(con.from_arrow(read), in_scope, how="semi").create_view(
        "job_gpu_daily"
    )
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
    occupancy_files = _files_of(root, "bucket_occupancy", listed)
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
