"""What an update of the summary marts puts in scope: the days whose rows can change (changed
day partitions, moved ends of data, late scheduler records' days), the jobs of late records,
and the days and weeks cluster_occupancy and fairness_weekly recompute.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from warehouse import layout, queries
from warehouse.arrow_arrays import dates, empty_table, float64s, string_scalar, strings
from warehouse.arrow_groups import (
    by_cluster,
    distinct_by_cluster,
    max_by_cluster_date,
    pairs,
    semi_join,
)
from warehouse.connection import (
    DERIVED_VIEWS,
)
from warehouse.partitions import DayKey
from warehouse.summary.views import _arrow_view, _register_raw, _restricted

if TYPE_CHECKING:
    import duckdb


_DAY_S = 86400


_EPOCH = dt.date(1970, 1, 1)


def _day_start(date: dt.date) -> float:
    return float((date - _EPOCH).days * _DAY_S)


def _data_ends(
    con: duckdb.DuckDBPyConnection, index: pa.Table, jobs_latest: pa.Table
) -> dict[str, float]:
    """The end of each cluster's data, where its open allocations end
    (sql/views/cluster_data_end.sql: its last sample interval's, else its scheduler records'
    latest time), with `index` (summary_index rows) standing in for gpu_job_buckets and
    `jobs_latest` as the jobs. Left as the view `cluster_data_end` (what job_gpu_intervals and
    fairness_weekly read), with `gpu_job_buckets` and `jobs_latest` over those rows."""
    _arrow_view(con, "gpu_job_buckets", index)
    # a view, as the update's later steps replace it (a registered name would hide theirs)
    con.from_arrow(jobs_latest).create_view("jobs_latest")
    ends = queries.run_arrow(con, DERIVED_VIEWS["cluster_data_end"])
    _arrow_view(con, "cluster_data_end", ends)
    return {
        c: e
        for c, e in zip(ends["cluster"].to_pylist(), ends["end_e"].to_pylist(), strict=True)
        if c is not None and e is not None
    }


def _scope_days(
    both_changed: pa.Table,
    changed: tuple[DayKey, ...],
    before: dict[str, float],
    after: dict[str, float],
    open_from: dict[str, float],
    touched: Iterable[tuple[str, dt.date]] = (),
) -> tuple[pa.Table, list[str]]:
    """The (cluster, day)s whose usage_daily rows can change, and the clusters whose data end
    moved: the changed days (by the clusters their rows name) and the days after them, every
    day between a cluster's
    old and new end of data (allocations still open run to it; where the cluster had no data
    before or has none now, every day from its earliest open allocation's start, `open_from`,
    as such an allocation holds nothing without an end of data), and the days late scheduler
    records `touched`."""
    wanted = set(changed)
    days = {(c, d) for c, d in _pairs(both_changed) if (layout.safe_name(c), d) in wanted}
    # a changed day's last samples can run past its midnight: usage_daily counts that part
    # on the next day (job_gpu_daily's next_day_*)
    days.update([(c, d + dt.timedelta(days=1)) for c, d in days])
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
            "cluster": strings([c for c, _ in ordered]),
            "date": dates([d for _, d in ordered]),
            "start_e": float64s([_day_start(d) for _, d in ordered]),
            "end_e": float64s([_day_start(d) + _DAY_S for _, d in ordered]),
        }
    )
    return table, moved


def _late_jobs(files: Iterable[Path]) -> pa.Table:
    """The distinct (cluster, job_id) of the rows in scheduler batch `files`."""
    keys = pa.schema([("cluster", pa.string()), ("job_id", pa.string())])
    rows = [_job_keys(p, keys) for p in files]
    return distinct_by_cluster(pa.concat_tables(rows or [empty_table(keys)]), "job_id")


def _job_keys(path: Path, keys: pa.Schema) -> pa.Table:
    """`path`'s (cluster, job_id) rows; a cluster the file leaves out (or null) is its folder's,
    as the views read it (warehouse.connection.register_files)."""
    with pq.ParquetFile(path) as file:  # opened once: its schema, then its rows
        present = [name for name in keys.names if name in file.schema_arrow.names]
        rows = file.read(columns=present)
    name = layout.folder_cluster(path)
    folder = pa.nulls(1, pa.string())[0] if name is None else string_scalar(name)
    if "cluster" not in present:
        rows = rows.append_column("cluster", pa.nulls(rows.num_rows, pa.string()))
    rows = rows.set_column(
        rows.schema.get_field_index("cluster"),
        "cluster",
        pc.fill_null(rows.column("cluster").cast(pa.string()), folder),
    )
    return rows.select(keys.names).cast(keys)


def _late_records(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    jobs_latest: pa.Table,
    intervals: pa.Table,
    index: pa.Table,
) -> tuple[pa.Table, list[tuple[str, dt.date]]]:
    """jobs_latest with the rows of the jobs in `late_jobs` taken anew from every record, and
    the (cluster, day)s those jobs touch before and after (sql/attribution/late_days.sql).
    `index`: the summary_index rows after the update (the data's ends with the new records)."""
    _register_raw(con, root, ("jobs",))
    for table in ("jobs", "job_gpus"):
        _restricted(con, f"{table}_all", table, "late_jobs")
    fresh = queries.run_arrow(con, DERIVED_VIEWS["jobs_latest"])
    others = con.from_arrow(jobs_latest).join(
        con.table("late_jobs"), ["cluster", "job_id"], how="anti"
    )
    merged = others.union(con.from_arrow(fresh.cast(jobs_latest.schema))).to_arrow_table()
    # where open allocations end now: a cluster without samples ends at its records' latest
    _data_ends(con, index, merged)
    _arrow_view(con, "late_jobs_latest", fresh)
    con.table("late_jobs_latest").create_view("jobs_latest")  # (jobs without job_gpus rows)
    late_intervals = queries.run_arrow(con, DERIVED_VIEWS["job_gpu_intervals"])
    _arrow_view(con, "late_job_gpu_intervals", late_intervals)
    _arrow_view(con, "jobs_latest_before", jobs_latest)
    _arrow_view(con, "job_gpu_intervals_before", intervals)
    touched = _pairs(queries.run_arrow(con, "attribution/late_days"))
    con.table("job_gpus_all").create_view("job_gpus")
    return merged, touched


def _pairs(table: pa.Table) -> list[tuple[str, dt.date]]:
    """The distinct (cluster, date) pairs of `table`'s rows."""
    return [(c, cast(dt.date, d)) for c, d in pairs(table, "date") if c is not None]


def _folder_keys(pairs: Iterable[tuple[str, dt.date]]) -> set[DayKey]:
    """The partition folders' keys of (cluster, date) pairs."""
    return {(layout.safe_name(c), d) for c, d in pairs}


def _days_holding(index: pa.Table, jobs: pa.Table) -> set[DayKey]:
    """The day partitions holding rows of `jobs` (cluster, job_id), by the index."""
    held = semi_join(index, jobs, "job_id")
    return _folder_keys(_pairs(held))


def _extent(index: pa.Table) -> dict[str, tuple[float, float, int]]:
    """Per cluster: the data's first time, last span end and devices, as cluster_occupancy
    reads them from gpu_job_buckets."""
    return {
        cluster: (
            pc.min(rows.column("first_e")).as_py(),
            pc.max(rows.column("last_end_e")).as_py(),
            pc.count_distinct(rows.column("device")).as_py(),
        )
        for cluster, rows in by_cluster(index)
        if cluster is not None
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
    wanted: dict[str, list[dt.date]] = {}
    for cluster, day in days:
        wanted.setdefault(cluster, []).append(day)
    out: set[DayKey] = set()
    for cluster, date, end in max_by_cluster_date(index, "last_end_e"):
        if any(
            date == d or (date < d and end is not None and end > _day_start(d))
            for d in wanted.get(cluster, ())
        ):
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
