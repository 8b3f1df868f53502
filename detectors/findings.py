"""Finding rows (DESIGN §3.5 `findings`): stable ids, the Arrow table, and the lake upsert.

Every producer (rules, models) returns a polars frame with `FRAME_COLUMNS`; `to_findings` gives
each row its stable `finding_id` and `detected_ts` and types it by `warehouse.schema`;
`write_findings` merges a run's findings into the lake so that the same problem found again keeps
its id and its first `detected_ts`, and no finding is ever stored twice.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from warehouse import layout
from warehouse.lake import Lake
from warehouse.partitions import PRUNED, built_days
from warehouse.schema import TABLES
from warehouse.writer import conform, replace_partitions

__all__ = [
    "prune_findings",
    "FINDINGS_SCHEMA",
    "FRAME_COLUMNS",
    "FRAME_SCHEMA",
    "Severity",
    "WriteResult",
    "as_frame",
    "empty_frame",
    "finding_id",
    "read_findings",
    "seen_since",
    "to_findings",
    "write_findings",
]

FINDINGS_SCHEMA: pa.Schema = TABLES["findings"].schema


class Severity(StrEnum):
    """How urgent a finding is: `info` (worth knowing), `warn` (act this week), `critical` (now)."""

    INFO = "info"
    WARN = "warn"
    CRITICAL = "critical"


_TS = pl.Datetime("ms", "UTC")
# What a producer returns: the findings columns minus the two `to_findings` adds (finding_id,
# detected_ts), plus `anchor_ts`: the instant that identifies the problem (a job's start, the
# first event on a GPU, the start of a user's window), which with cluster, detector and subject
# makes the id. It must not move when the same problem is seen again with more data.
FRAME_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(),
    "detector": pl.String(),
    "severity": pl.String(),
    "subject_kind": pl.String(),
    "subject_id": pl.String(),
    "anchor_ts": _TS,
    "job_id": pl.String(),
    "user": pl.String(),
    "account": pl.String(),
    "node": pl.String(),
    "gpu_uuid": pl.String(),
    "start_ts": _TS,
    "end_ts": _TS,
    "predicted": pl.Boolean(),
    "score": pl.Float32(),
    "gpu_h_at_stake": pl.Float64(),
    "message": pl.String(),
    "evidence": pl.String(),
}
FRAME_COLUMNS: tuple[str, ...] = tuple(FRAME_SCHEMA)


def empty_frame() -> pl.DataFrame:
    """A producer's result with no findings (typed, so it concatenates with real ones)."""
    return pl.DataFrame(schema=FRAME_SCHEMA)


def finding_id(
    cluster: str, detector: str, subject_kind: str, subject_id: str, anchor: dt.datetime | None
) -> str:
    """Return the stable id of a finding: a hash of what identifies the problem, not its figures.

    The same (cluster, detector, subject, anchor) always gives the same id, so a finding seen
    again by a later run (with more data, new figures, a new severity) replaces the old row.
    """
    anchor_ms = "" if anchor is None else str(round(anchor.timestamp() * 1000))
    key = "\x1f".join((cluster, detector, subject_kind, subject_id, anchor_ms))
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def to_findings(frame: pl.DataFrame, detected_ts: dt.datetime) -> pa.Table:
    """Type a producer's frame as `findings` rows: add `finding_id` and `detected_ts`.

    Rows with the same id (one producer reporting a problem twice) keep the first. A null
    message becomes "<detector> finding on <subject kind> <subject id>".
    """
    missing = [c for c in FRAME_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"findings frame lacks column(s) {missing!r}")
    frame = frame.select(pl.col(c).cast(t) for c, t in FRAME_SCHEMA.items())
    ids = [
        finding_id(c, d, k, s, a)
        for c, d, k, s, a in zip(
            frame["cluster"].to_list(),
            frame["detector"].to_list(),
            frame["subject_kind"].to_list(),
            frame["subject_id"].to_list(),
            frame["anchor_ts"].to_list(),
            strict=True,
        )
    ]
    rows = (
        frame.with_columns(
            pl.Series("finding_id", ids, pl.String()),
            pl.lit(detected_ts).cast(_TS).alias("detected_ts"),
            pl.col("predicted").fill_null(False),
            # a template with a null figure (pl.format) gives a null text: still say what it is
            pl.col("message").fill_null(
                pl.format("{} finding on {} {}", "detector", "subject_kind", "subject_id")
            ),
        )
        .unique("finding_id", keep="first", maintain_order=True)
        .select(FINDINGS_SCHEMA.names)
    )
    return conform(TABLES["findings"], rows.to_arrow().cast(FINDINGS_SCHEMA))


def read_findings(lake: Lake, cluster: str | None = None) -> pa.Table:
    """Every finding stored in the lake (of `cluster` when given), typed by the contract."""
    parts = []
    for path in lake.table_files("findings"):
        if cluster is not None and f"cluster={layout.safe_name(cluster)}" not in path.parts:
            continue
        stored = pq.read_table(path)
        parts.append(stored.select(FINDINGS_SCHEMA.names).cast(FINDINGS_SCHEMA))
    if not parts:
        return FINDINGS_SCHEMA.empty_table()
    return pa.concat_tables(parts)


def prune_findings(
    lake: Lake, data_end: dict[str, dt.datetime], keep_days: int, *, dry_run: bool = False
) -> int:
    """Delete the findings of each cluster whose problem ended more than `keep_days` days before
    the end of the cluster's data (`data_end`: the lake's "now", never the wall clock); return
    how many (with `dry_run`, would be). An open finding (no end) stays, whatever its age; so
    does every finding of a cluster without data. Each cluster is rewritten atomically. Call it
    under the lake's writer lock (detect writes the same files)."""
    removed = 0
    for cluster in sorted({*read_findings(lake).column("cluster").to_pylist()}):
        end = data_end.get(cluster)
        if end is None:
            continue
        stored = read_findings(lake, cluster)
        cutoff = pa.scalar(end - dt.timedelta(days=keep_days), FINDINGS_SCHEMA.field("end_ts").type)
        old = pc.fill_null(pc.less(stored.column("end_ts"), cutoff), False)
        gone = pc.sum(pc.cast(old, pa.int64())).as_py() or 0
        if gone and not dry_run:
            replace_partitions(
                lake.root, "findings", stored.filter(pc.invert(old)), cluster, batch_id="findings"
            )
        removed += gone
    return removed


def seen_since(findings: pa.Table, since: dt.datetime) -> pa.Table:
    """The findings about problems seen at or after `since`: their span ends then or later, or
    is still open (no `end_ts`).

    `gpuledger detect --since` keeps only these. Their figures must still come from all the
    data (a job's whole run, a user's whole 7 days): a finding keeps its id when found again,
    so one computed from part of its data would overwrite the complete one.
    """
    end = findings.column("end_ts")
    later = pc.greater_equal(end, pa.scalar(since, type=end.type))
    return findings.filter(pc.or_kleene(pc.is_null(end), later))


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What `write_findings` did: findings new to the lake, ones whose figures changed (updated
    in place), and ones found again exactly as stored."""

    new: int
    updated: int
    unchanged: int = 0


def _same(stored: Any, found: Any) -> bool:
    """Whether a finding found again is the one stored: its integers equal, its other numbers
    within a billionth of each other (1e-12 apart near zero), in the evidence JSON too. A
    parallel sum may differ in its last bits from run to run, which is not a change worth
    reporting (rounding both to a number of digits would still split two such values that
    straddle a rounding boundary)."""
    numbers = (int, float)
    if isinstance(stored, numbers) and isinstance(found, numbers):
        if isinstance(stored, bool) or isinstance(found, bool):
            return stored is found
        if isinstance(stored, int) and isinstance(found, int):
            return stored == found  # counts: exact
        both_nan = stored != stored and found != found
        return both_nan or math.isclose(stored, found, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(stored, dict) and isinstance(found, dict):
        return stored.keys() == found.keys() and all(_same(stored[k], found[k]) for k in stored)
    if isinstance(stored, list) and isinstance(found, list):
        return len(stored) == len(found) and all(map(_same, stored, found))
    if isinstance(stored, str) and isinstance(found, str) and stored.startswith("{"):
        try:
            return _same(json.loads(stored), json.loads(found))
        except ValueError:
            pass
    return bool(stored == found)


def write_findings(lake: Lake, findings: pa.Table) -> WriteResult:
    """Upsert `findings` into the lake: one row per (cluster, finding_id), never two.

    A finding already stored is replaced by its new version but keeps its first `detected_ts`
    (when it was first raised), and its `start_ts` where that lies on a day whose raw samples
    were pruned since (found again from the days kept, its span began later: a health trend's
    lead time shrank by the days pruned). A job's finding made before its scheduler record
    landed (no user, anchored without the job's start) is replaced by the same detector's
    finding on that job made with it: their ids differ (the id hashes the anchor), the problem
    is one. Each
    cluster's findings are rewritten whole, atomically.
    """
    findings = conform(TABLES["findings"], findings)
    pruned = {key for key, (own, _) in built_days(lake.root).items() if own == PRUNED}
    new = updated = unchanged = 0
    for cluster in sorted(set(findings.column("cluster").to_pylist())):
        incoming = findings.filter(pc.equal(findings.column("cluster"), cluster))
        stored = read_findings(lake, cluster)
        first_seen = dict(
            zip(
                stored.column("finding_id").to_pylist(),
                stored.column("detected_ts").to_pylist(),
                strict=True,
            )
        )
        ids = incoming.column("finding_id").to_pylist()
        superseded = _superseded(stored, incoming)
        for old_id, new_id in superseded.items():  # the problem was first raised then
            first_seen.setdefault(new_id, first_seen[old_id])
        latest = incoming.column("detected_ts").to_pylist()
        detected = [first_seen.get(i, ts) for i, ts in zip(ids, latest, strict=True)]
        incoming = incoming.set_column(
            incoming.schema.get_field_index("detected_ts"),
            FINDINGS_SCHEMA.field("detected_ts"),
            pa.array(detected, FINDINGS_SCHEMA.field("detected_ts").type),
        )
        incoming = _starts_kept_in_pruned_days(cluster, stored, incoming, pruned, superseded)
        seen = set(first_seen) - set(superseded)
        before = {r["finding_id"]: r for r in stored.to_pylist()}
        before |= {new_id: before[old_id] for old_id, new_id in superseded.items()}
        again = {r["finding_id"]: r for r in incoming.to_pylist() if r["finding_id"] in seen}
        same = sum(1 for i, r in again.items() if _same(before[i], r))
        unchanged += same
        updated += len(again) - same
        new += len(set(ids) - seen)
        gone = pa.array([*ids, *superseded], pa.string())
        kept = stored.filter(pc.invert(pc.is_in(stored.column("finding_id"), gone)))
        merged = pa.concat_tables([kept, incoming])
        replace_partitions(lake.root, "findings", merged, cluster, batch_id="findings")
    return WriteResult(new=new, updated=updated, unchanged=unchanged)


def _starts_kept_in_pruned_days(
    cluster: str,
    stored: pa.Table,
    incoming: pa.Table,
    pruned: set[tuple[str, dt.date]],
    superseded: dict[str, str],
) -> pa.Table:
    """`incoming` with each stored finding's `start_ts` (a superseded one's, under the id that
    replaces it) kept where it is earlier and falls on a day of `cluster` that is `pruned` (its
    raw samples gone): no sample is left there to find it again."""
    if not pruned or stored.num_rows == 0:
        return incoming
    folder = layout.safe_name(cluster)
    was = dict(
        zip(
            stored.column("finding_id").to_pylist(),
            stored.column("start_ts").to_pylist(),
            strict=True,
        )
    )
    was |= {new_id: was[old_id] for old_id, new_id in superseded.items() if old_id in was}
    starts = []
    for finding_id, start in zip(
        incoming.column("finding_id").to_pylist(),
        incoming.column("start_ts").to_pylist(),
        strict=True,
    ):
        before = was.get(finding_id)
        keep = (
            before is not None
            and start is not None
            and before < start
            and (folder, before.date()) in pruned
        )
        starts.append(before if keep else start)
    field = FINDINGS_SCHEMA.field("start_ts")
    return incoming.set_column(
        incoming.schema.get_field_index("start_ts"), field, pa.array(starts, field.type)
    )


def _superseded(stored: pa.Table, incoming: pa.Table) -> dict[str, str]:
    """{stored id: incoming id} of the stored job findings made before the job's record landed
    (no user) that an incoming finding of the same detector on the same job, with its user,
    replaces."""
    made_with = {
        (r["detector"], r["subject_id"]): r["finding_id"]
        for r in incoming.select(
            ["detector", "subject_kind", "subject_id", "user", "finding_id"]
        ).to_pylist()
        if r["subject_kind"] == "job" and r["user"] is not None
    }
    out: dict[str, str] = {}
    for r in stored.select(
        ["detector", "subject_kind", "subject_id", "user", "finding_id"]
    ).to_pylist():
        new_id = made_with.get((r["detector"], r["subject_id"]))
        if (
            r["subject_kind"] == "job"
            and r["user"] is None
            and new_id not in (None, r["finding_id"])
        ):
            out[r["finding_id"]] = new_id
    return out


def as_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """Select and type a producer's columns as `FRAME_SCHEMA` (so frames concatenate)."""
    return frame.select(pl.col(c).cast(t) for c, t in FRAME_SCHEMA.items())
