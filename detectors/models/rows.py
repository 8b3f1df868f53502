"""Turn a model's alarms (a polars frame) into `findings` rows with stable ids (DESIGN §3.5)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import polars as pl
import pyarrow as pa

from warehouse.schema import TABLES

__all__ = ["REQUIRED_COLUMNS", "finding_id", "to_findings"]

REQUIRED_COLUMNS = frozenset(
    {"cluster", "subject_kind", "subject_id", "start_ts", "detected_ts", "score", "message"}
)
_OPTIONAL = ("job_id", "user", "account", "node", "gpu_uuid", "end_ts", "gpu_h_at_stake")


def finding_id(cluster: str, detector: str, subject_kind: str, subject_id: str, key: str) -> str:
    """A stable id: the same detector on the same subject and episode gets the same id again."""
    text = "\x1f".join((cluster, detector, subject_kind, subject_id, key))
    return hashlib.sha1(text.encode()).hexdigest()[:20]


def to_findings(
    alarms: pl.DataFrame, detector: str, severity: str, evidence: list[dict[str, Any]]
) -> pa.Table:
    """Return `alarms` as FINDINGS rows, `predicted=true`; `evidence[i]` is row i's JSON.

    The id keys on the episode's start (`start_ts`), so re-running a model over the same
    history finds the same episodes under the same ids.
    """
    schema = TABLES["findings"].schema
    missing = REQUIRED_COLUMNS - set(alarms.columns)
    if missing:
        raise ValueError(f"{detector}: alarms lack columns {sorted(missing)!r}")
    if alarms.is_empty():
        return schema.empty_table()
    rows = alarms.with_columns(
        [pl.lit(None).alias(c) for c in _OPTIONAL if c not in alarms.columns]
    ).to_dicts()
    ids = [
        finding_id(
            r["cluster"], detector, r["subject_kind"], r["subject_id"], r["start_ts"].isoformat()
        )
        for r in rows
    ]
    columns: dict[str, list[Any]] = {
        "cluster": [r["cluster"] for r in rows],
        "finding_id": ids,
        "detector": [detector] * len(rows),
        "severity": [severity] * len(rows),
        "subject_kind": [r["subject_kind"] for r in rows],
        "subject_id": [r["subject_id"] for r in rows],
        "predicted": [True] * len(rows),
        "evidence": [json.dumps(e, sort_keys=True, default=str) for e in evidence],
    }
    for name in ("job_id", "user", "account", "node", "gpu_uuid", "start_ts", "end_ts"):
        columns[name] = [r[name] for r in rows]
    columns["detected_ts"] = [r["detected_ts"] for r in rows]
    columns["score"] = [float(r["score"]) for r in rows]
    columns["gpu_h_at_stake"] = [r["gpu_h_at_stake"] for r in rows]
    columns["message"] = [r["message"] for r in rows]
    return pa.table({f.name: pa.array(columns[f.name], f.type) for f in schema}, schema=schema)
