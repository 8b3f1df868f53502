"""One scheduler-policy recommendation, its stable id, and the RECOMMENDATIONS table it lands in."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from detectors.shell_words import sh, sh_comment
from detectors.slurm_time import hhmmss, round_up
from warehouse.schema import TABLES

__all__ = [
    "GAIN_KINDS",
    "ClusterFacts",
    "Recommendation",
    "hhmmss",
    "rec_id",
    "round_up",
    "sh",
    "sh_comment",
    "to_table",
]


# What a recommendation's expected_gain_gpu_h counts (`gain_kind` in its evidence). Only
# "saved" and "failures_avoided" are GPU-hours the cluster gets back; "shifted" moves GPU-hours
# from one user to others, "backfill" frees reserved (not computed) time for the scheduler's
# backfill, so reports must not rank those against real savings.
GAIN_KINDS: dict[str, str] = {
    "saved": "GPU-h saved",
    "failures_avoided": "GPU-h that failed jobs lost on it above the cluster's failure rate",
    "shifted": "GPU-h shifted to others' waiting jobs",
    "backfill": "reserved GPU-h released to backfill",
}


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What every recommender needs to know about a cluster over the replayed window."""

    cluster: str
    target: str  # "slurm" or "kueue"
    gpus_total: int
    window_start: dt.datetime
    window_end: dt.datetime
    data_start_e: float  # the first job start in the window (epoch seconds)
    data_end_e: float  # the last job end in it, at most window_end

    @property
    def data_h(self) -> float:
        """Hours of history the window holds (for averages over time)."""
        return max(self.data_end_e - self.data_start_e, 0.0) / 3600.0


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A policy change with the evidence for it and the exact configuration to apply.

    `scope` names what it applies to (`cluster`, `partition=gpu`, `user=alice`, `node=g001`);
    the same (cluster, kind, scope, target) is the same recommendation, so its id is stable.
    `gain_kind` (a key of GAIN_KINDS) says what `expected_gain_gpu_h` counts; it is stored in
    the evidence, since the table has no column for it.
    """

    cluster: str
    kind: str
    scope: str
    target: str
    evidence: Mapping[str, Any]
    expected_gain_gpu_h: float | None
    risk: str
    config: str
    gain_kind: str | None = None

    def __post_init__(self) -> None:
        if self.expected_gain_gpu_h is not None and self.gain_kind not in GAIN_KINDS:
            raise ValueError(f"{self.kind}: a gain needs a gain_kind of {sorted(GAIN_KINDS)}")

    @property
    def rec_id(self) -> str:
        return rec_id(self.cluster, self.kind, self.scope, self.target)


def rec_id(cluster: str, kind: str, scope: str, target: str) -> str:
    """A stable id: the same recommendation found again (even with new figures) keeps it."""
    key = "\x1f".join((cluster, kind, scope, target))
    return "rec-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def _clean(value: Any) -> Any:
    """JSON-safe evidence: floats rounded to 6 decimals, NaN/inf as null, times as ISO text."""
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, 6)
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value


def _evidence(rec: Recommendation) -> Mapping[str, Any]:
    if rec.expected_gain_gpu_h is None or rec.gain_kind is None:
        return rec.evidence
    return {**rec.evidence, "gain_kind": rec.gain_kind}


def to_table(recs: Iterable[Recommendation], created: dt.datetime) -> pa.Table:
    """The recommendations as rows of the lake's `recommendations` table."""
    rows = [
        {
            "cluster": rec.cluster,
            "rec_id": rec.rec_id,
            "kind": rec.kind,
            "scope": rec.scope,
            "target": rec.target,
            "evidence": json.dumps(_clean(_evidence(rec)), sort_keys=True),
            "expected_gain_gpu_h": (
                None if rec.expected_gain_gpu_h is None else round(rec.expected_gain_gpu_h, 6)
            ),
            "risk": rec.risk,
            "config": rec.config,
            "created_ts": created,
        }
        for rec in recs
    ]
    return pa.Table.from_pylist(rows, schema=TABLES["recommendations"].schema)
