"""Carrying the summary marts' recorded state across the raw tables' compaction merges
(warehouse/compaction_log.py), so a merge that keeps every row rebuilds nothing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from warehouse import compaction_log, layout
from warehouse.summary.state import (
    _OTHER_RAW,
    _SCHEDULER,
    _inputs_digest,
    _state,
)

if TYPE_CHECKING:
    from warehouse.attribution import AttributionConfig


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
