"""What the summary marts were last built from, in the lake's SQLite state: the fingerprint of
the other inputs (raw tables, SQL, config), the digest of each day partition, the scheduler's
batch files and their jobs; and why they cannot be updated in place.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

import sql
from warehouse import compaction_log, layout, state_files
from warehouse.arrow_arrays import strings
from warehouse.arrow_groups import distinct_by_cluster
from warehouse.connection import (
    DERIVED_VIEWS,
    WarehouseConfig,
    open_engine,
    register_reference,
)
from warehouse.partitions import SAMPLE_MARTS, DayKey
from warehouse.schema import OWN_TABLES, RAW_TABLES
from warehouse.summary.index import (
    _derived_path,
    _index_files,
    _index_fingerprint,
    _index_of,
    _write_derived,
    _write_index,
    _write_state_file,
    _write_whole_index,
)
from warehouse.summary.scope import _late_jobs
from warehouse.summary.whole import SUMMARY_MARTS, WholeBuild

if TYPE_CHECKING:
    from warehouse.attribution import AttributionConfig


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


# The scheduler's tables: a batch file of them new, rewritten (an allocation closed) or removed
# since the last build holds late records, whose jobs are updated in place.
_SCHEDULER = ("jobs", "job_gpus")


# What the detectors, the evaluation and the simulator's truth write: no mart reads them, so
# a `detect` (which lands findings every round) leaves the summary marts as they are.
_NOT_READ = (*OWN_TABLES, "sim_truth")


# The raw tables the summary marts read whole (a change of their files rebuilds them).
_OTHER_RAW = tuple(
    t for t in RAW_TABLES if t != "gpu_samples" and t not in _SCHEDULER and t not in _NOT_READ
)


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


def _sample_mart_days(
    root: Path, listed: dict[str, list[Path]] | None = None
) -> dict[DayKey, list[Path]] | None:
    """The sample-level mart files of each day partition (`listed`: each mart's files, as
    listed already); None if one is outside the layout."""
    days: dict[DayKey, list[Path]] = {}
    for mart, _ in SAMPLE_MARTS:
        for path in layout.table_files(root, mart) if listed is None else listed[mart]:
            key = layout.partition_key(path)
            if key is None:
                return None
            days.setdefault(key, []).append(path)
    return days


def _marts_fingerprint(root: Path, listed: dict[str, list[Path]] | None = None) -> str:
    """The summary marts' files' fingerprint (`listed`: their files, as listed already)."""
    return layout.files_fingerprint(
        p
        for mart, _ in SUMMARY_MARTS
        for p in (layout.table_files(root, mart) if listed is None else listed[mart])
    )


def record_summary_state(
    root: Path,
    config: AttributionConfig,
    *,
    inputs: str | None = None,
    records: dict[str, str] | None = None,
    built: WholeBuild | None = None,
    sample_files: dict[str, list[Path]] | None = None,
) -> None:
    """Record what the summary marts were just built whole from, so the next change of some
    day partitions or late scheduler records can update them instead of rebuilding them.
    `inputs`, `records`: the fingerprint of the other inputs and the scheduler's files, taken
    before the build (default: now). `built`: what the whole build computed of the state (its
    index and derived views; default: computed here, in an engine of its own).
    `sample_files`: each sample-level mart's files, as listed already (default: listed here).

    The old state is forgotten in the one transaction that records the new one: index files
    rewritten under the old record fail its fingerprint check, so a crash in between rebuilds
    whole, as when the state was forgotten first."""
    inputs = inputs or _inputs_fingerprint(root, config)
    records = _scheduler_records(root) if records is None else records
    days = _sample_mart_days(root, sample_files)
    if days is None:  # not in the layout: every refresh rebuilds whole
        with _state(root) as db:
            _forget(db)
        return
    if built is None:
        engine = open_engine(WarehouseConfig(root=root))
        try:
            register_reference(engine)
            index = _index_of(engine, layout.table_files(root, "gpu_job_buckets"))
            _replace_index(root, index, days)
            _write_derived(engine, root, index)
        finally:
            engine.close()
    else:
        _replace_index(root, built.index, days)
        _write_state_file(built.jobs_latest, _derived_path(root, "jobs_latest"))
        _write_state_file(built.job_gpu_intervals, _derived_path(root, "job_gpu_intervals"))
    _save_state(root, inputs, days, records, whole=True)


def _forget(db: sqlite3.Connection) -> None:
    """Forget what the summary marts were built from (every refresh then rebuilds whole)."""
    db.execute("DELETE FROM summary_built")
    db.execute("DELETE FROM summary_days")
    db.execute("DELETE FROM summary_records")
    db.execute("DELETE FROM summary_record_jobs")


def _replace_index(root: Path, index: pa.Table, days: dict[DayKey, list[Path]]) -> None:
    """Replace every day's index file (and the whole index) by the rows of `index`."""
    for path in _index_files(root):
        path.unlink()
    _write_whole_index(root, _write_index(root, index, days))


def _save_state(
    root: Path,
    inputs: str,
    days: dict[DayKey, list[Path]],
    records: dict[str, str],
    *,
    digests: dict[DayKey, str] | None = None,
    marts: dict[str, list[Path]] | None = None,
    whole: bool = False,
) -> None:
    """Record the state the summary marts were just built or updated from. `digests`: each
    day's fingerprint, taken already; `marts`: the summary marts' files, listed already;
    `whole`: after a whole build, the old state forgotten first (every scheduler file's jobs
    recorded anew), in the same transaction."""
    if digests is None:
        digests = {k: layout.files_fingerprint(files) for k, files in days.items()}
    with _state(root) as db:
        if whole:
            _forget(db)
        db.execute("DELETE FROM summary_built")
        db.execute(
            "INSERT INTO summary_built VALUES (?, ?, ?)",
            (inputs, _marts_fingerprint(root, marts), _index_fingerprint(root)),
        )
        db.execute("DELETE FROM summary_days")
        db.executemany(
            "INSERT INTO summary_days VALUES (?, ?, ?)",
            [(k[0], k[1].isoformat(), digests[k]) for k in days],
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
            "cluster": strings([c for c, _ in old_jobs]),
            "job_id": strings([j for _, j in old_jobs]),
        }
    )
    return (
        reason,
        recorded,
        distinct_by_cluster(pa.concat_tables([old, _late_jobs(fresh)]), "job_id"),
    )


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
