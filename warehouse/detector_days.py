"""What `gpuledger detect` keeps of the samples a day at a time, so each run reads what changed.

Three of detect's inputs are made from every sample of the lake: each GPU's hours of health
(sql/detectors/gpu_health_hourly.sql), of corrected-ECC errors
(sql/detectors/gpu_ecc_trend_hourly.sql) and each job's GPUs' bottleneck sums
(sql/detectors/bottleneck_devices.sql). Computed from every sample at every run, they cost what
the lake holds, not what changed (a week of 1,024 GPUs: ~35 s of each run, growing with
`retention.raw_days`). All are made of parts that one day's samples decide alone — an hour's
health; an hour's counter steps, with its first and last value so that the step into an hour
from the one before is counted when the hours are put together
(sql/detectors/gpu_ecc_trend_hourly_stored.sql); a job's GPU's sums over the day, with its
first and last busy value so that the bursts across midnight are counted when the days are put
together (sql/detectors/bottleneck_signals.sql) — so each day's rows are computed from that
day's files once and kept in the lake (`gpu_health_hourly`, `gpu_ecc_hourly`,
`bottleneck_device_days`: DESIGN §3.5). A day's rows are computed again
only when what they came from changes: its sample files (a late landing, a compaction), the
query, its parameters or the owner rule, and for the bottleneck rows the allocations that own
its samples; they are removed with the day's sample files (`gpuledger prune`). The stored rows
are those the query gives over the lake's samples as they are now
(tests/warehouse/test_detector_days.py) — unless a sample file lies outside the lake's
cluster=/date= folders, a day's files hold a sample of another day or of several clusters, or
two sample folders hold one cluster's day, as another tool may write them: a refresh then says so
(`Refreshed.outside`), stores no rows for such a day, and `gpuledger detect` reads every sample
instead.

Each stored file is named by the digest of what it was computed from, so whether a day is up to
date is read from the folder listing, with no state file to keep beside it; a day that gives no
rows keeps an empty file so named.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sql
from warehouse import layout, queries
from warehouse.allocations import hold_allocations
from warehouse.connection import WarehouseConfig, open_engine, register_files
from warehouse.partitions import DayKey, allocation_digests, sample_days
from warehouse.schema import TABLES
from warehouse.writer import replace_partition, write_empty

if TYPE_CHECKING:
    import duckdb

__all__ = ["BOTTLENECK_DEVICES", "ECC_HOURS", "HEALTH_HOURS", "DayStore", "Refreshed", "refresh"]


@dataclass(frozen=True, slots=True)
class DayStore:
    """A table of rows computed a day at a time by `query` from the day's samples: as their
    sources wrote them (`gpu_samples`), or with their owners (`owned_samples`, decided from the
    allocations)."""

    table: str
    query: str
    owners: bool = False


HEALTH_HOURS = DayStore("gpu_health_hourly", "detectors/gpu_health_hourly")
ECC_HOURS = DayStore("gpu_ecc_hourly", "detectors/gpu_ecc_hourly")
BOTTLENECK_DEVICES = DayStore("bottleneck_device_days", "detectors/bottleneck_devices", owners=True)


@dataclass(frozen=True, slots=True)
class Refreshed:
    """What one refresh did: the days computed, how many were up to date already, and the
    stored files removed (their day's inputs changed or its samples are gone). `outside`: why
    the stored rows are not what the query gives over every sample (a sample file outside the
    lake's layout, a day's files holding samples of another day), empty when they are."""

    built: tuple[DayKey, ...]
    unchanged: int
    removed: int
    outside: tuple[str, ...] = ()


def _owner_digests(config: WarehouseConfig, days: Mapping[DayKey, object]) -> dict[dt.date, str]:
    """Per date, the digest of the allocations that can own any cluster's samples that day
    (by date alone: a sample folder's name need not be its cluster's `safe_name`)."""
    by_date: dict[dt.date, list[str]] = {}
    for (_, day), digest in allocation_digests(config, days).items():
        by_date.setdefault(day, []).append(digest)
    return {day: ",".join(sorted(parts)) for day, parts in by_date.items()}


def _salt(store: DayStore, params: Mapping[str, Any]) -> str:
    """What every day's rows are computed with besides its files: the query, the owner rule
    it reads through, its parameters and the table's columns."""
    owner_rule = sql.load("views/owned_samples") if store.owners else ""
    return (
        sql.load(store.query)
        + owner_rule
        + repr(sorted(params.items()))
        + repr(TABLES[store.table].columns)
    )


def _within(con: duckdb.DuckDBPyConnection, view: str, day: dt.date) -> bool:
    """Whether every sample of the day's files falls on `day` (another tool may have put a
    sample in another day's folder: the queries over every sample count it where it is)."""
    start = dt.datetime.combine(day, dt.time(), dt.UTC)
    first, last = con.execute(f"SELECT min(ts), max(ts) FROM {view}").fetchone() or (None, None)
    return first is None or (first >= start and last < start + dt.timedelta(days=1))


def refresh(config: WarehouseConfig, store: DayStore, params: Mapping[str, Any]) -> Refreshed:
    """Compute `store`'s rows (its query with `params`) for every day whose inputs changed since
    its rows were stored, or that has none stored; remove what no day's inputs name now.

    A day's rows are stored in the partition of their cluster and day, in one file named by the
    digest of the day's inputs; a day is up to date when a stored file has its digest (wherever
    the day's sample folder is, and whatever its name). Run under the lake's writer lock
    (`gpuledger detect` holds it): it writes the lake.
    """
    root = config.root
    days = sample_days(root)  # (not the days dated after tomorrow: their clock is wrong)
    outside = []
    in_layout = layout.day_files(root, "gpu_samples")
    loose = len(layout.table_files(root, "gpu_samples")) - sum(map(len, in_layout.values()))
    if loose:
        outside.append(f"{loose} gpu_samples file(s) outside the cluster=/date= folders")
    stored = {path.stem: path for path in layout.table_files(root, store.table)}
    salt = _salt(store, params)
    owners = _owner_digests(config, days) if store.owners else {}
    spec = TABLES[store.table]
    digests = {
        key: layout.files_fingerprint(files, salt + owners.get(key[1], ""))
        for key, files in days.items()
    }
    built: list[DayKey] = []
    keep = {digest for digest in digests.values() if digest in stored}  # up to date
    con = None
    try:
        for key in sorted(days):
            digest = digests[key]
            if digest in keep:
                continue
            fresh = con is None
            if con is None:
                con = open_engine(config)
                if store.owners:
                    hold_allocations(con, root, "job_gpus")
            register_files(con, "gpu_samples", days[key], view=_reads(store))
            if fresh and store.owners:  # (over the view just made: it is read by name)
                queries.define_view(con, "owned_samples", sql.load("views/owned_samples"))
            built.append(key)
            if not _within(con, _reads(store), key[1]):
                outside.append(f"the files of {key[0]} {key[1]} hold samples of another day")
                continue  # not stored: computed (and found so) again at the next refresh
            # (the engine's microsecond times in the contract's milliseconds)
            rows = queries.run_arrow(con, store.query, **params).cast(spec.schema)
            clusters = set(rows.column("cluster").to_pylist())
            if len(clusters) > 1:  # (another tool's folder: one partition cannot hold them)
                outside.append(f"the files of {key[0]} {key[1]} hold samples of several clusters")
                continue
            if not rows.num_rows:
                # nothing that day (no job, no corrected-ECC counter): an empty file names the
                # digest, so the day is not computed again until its inputs change (what the
                # day gave before goes below, with every stored file no day's inputs name)
                folder = layout.table_dir(root, store.table) / f"cluster={key[0]}"
                write_empty(root, store.table, folder / f"date={key[1].isoformat()}", digest)
                keep.add(digest)
            else:
                cluster = rows.column("cluster")[0].as_py()
                folder = layout.partition_dir(root, store.table, cluster, key[1])
                if any(path.stem in keep for path in layout.folder_files(folder)):
                    # another sample folder of this cluster's day (one another tool named
                    # otherwise) holds it already: one partition cannot keep both
                    outside.append(f"two sample folders hold {cluster}'s {key[1]}")
                    continue
                # (the partition's other files, its day's rows as they were, go with it)
                replace_partition(root, store.table, rows, cluster, key[1], digest)
                keep.add(digest)
    finally:
        if con is not None:
            con.close()
    gone = [path for stem, path in stored.items() if stem not in keep and path.exists()]
    for path in gone:
        path.unlink(missing_ok=True)
    return Refreshed(tuple(built), len(days) - len(built), len(gone), tuple(outside))


def _reads(store: DayStore) -> str:
    """The view the day's sample files are read as: owned_samples reads `unowned_samples`."""
    return "unowned_samples" if store.owners else "gpu_samples"
