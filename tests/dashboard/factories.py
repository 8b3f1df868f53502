"""Hand-made findings, recommendations and fairness rows for dashboard tests (builders only)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse import layout
from warehouse.schema import TABLES
from warehouse.writer import write_batch

T0 = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)  # the simulator's default start (a Monday)

FAIRNESS_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("week", pa.date32()),
        ("level", pa.string()),
        ("account", pa.string()),
        ("user", pa.string()),
        ("alloc_gpu_h", pa.float64()),
        ("usage_share", pa.float64()),
        ("entitled_share", pa.float64()),
        ("usage_ratio", pa.float64()),
        ("wait_p50_s", pa.float64()),
        ("wait_p95_s", pa.float64()),
        ("waste_gpu_h", pa.float64()),
    ]
)


def make_finding(
    finding_id: str,
    *,
    cluster: str = "sim",
    detector: str = "idle_job",
    severity: str = "warn",
    subject_kind: str = "job",
    subject_id: str | None = None,
    job_id: str | None = None,
    user: str | None = None,
    account: str | None = None,
    node: str | None = None,
    gpu_uuid: str | None = None,
    start_h: float = 1.0,
    end_h: float | None = 2.0,
    predicted: bool = False,
    score: float = 0.9,
    gpu_h_at_stake: float = 1.0,
    message: str = "a finding",
) -> dict[str, object]:
    """One `findings` row; times are hours after T0."""
    return {
        "cluster": cluster,
        "finding_id": finding_id,
        "detector": detector,
        "severity": severity,
        "subject_kind": subject_kind,
        "subject_id": subject_id or job_id or gpu_uuid or node or user or finding_id,
        "job_id": job_id,
        "user": user,
        "account": account,
        "node": node,
        "gpu_uuid": gpu_uuid,
        "start_ts": T0 + dt.timedelta(hours=start_h),
        "end_ts": None if end_h is None else T0 + dt.timedelta(hours=end_h),
        "detected_ts": T0 + dt.timedelta(hours=end_h if end_h is not None else start_h),
        "predicted": predicted,
        "score": score,
        "gpu_h_at_stake": gpu_h_at_stake,
        "message": message,
        "evidence": json.dumps({"why": message}),
    }


def make_recommendation(
    rec_id: str,
    *,
    cluster: str = "sim",
    kind: str = "idle_cancel_policy",
    scope: str = "partition interactive",
    gain: float = 10.0,
    config: str = "scontrol update PartitionName=interactive MaxTime=04:00:00",
    created_h: float = 30.0,
) -> dict[str, object]:
    """One `recommendations` row, created `created_h` hours after T0."""
    return {
        "cluster": cluster,
        "rec_id": rec_id,
        "kind": kind,
        "scope": scope,
        "target": "slurm",
        "evidence": json.dumps({"jobs_hit": 3, "gpu_h_recovered": gain}),
        "expected_gain_gpu_h": gain,
        "risk": "1 job would have been cancelled wrongly",
        "config": config,
        "created_ts": T0 + dt.timedelta(hours=created_h),
    }


def write_rows(root: Path, table: str, rows: list[dict[str, object]], batch_id: str) -> None:
    """Land hand-made rows of a contract table in the lake."""
    write_batch(root, table, pa.Table.from_pylist(rows, schema=TABLES[table].schema), batch_id)


def write_fairness(root: Path, rows: list[dict[str, object]], cluster: str = "sim") -> Path:
    """Land hand-made `fairness_weekly` rows in the lake's layout (the report's mart columns)."""
    folder = layout.partition_dir(root, "fairness_weekly", cluster, None)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "handmade.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=FAIRNESS_SCHEMA), path)
    return path


def make_fairness_row(
    account: str,
    usage_share: float,
    entitled_share: float | None,
    *,
    week: dt.date = dt.date(2026, 11, 2),
    user: str | None = None,
    cluster: str = "sim",
) -> dict[str, object]:
    return {
        "cluster": cluster,
        "week": week,
        "level": "account" if user is None else "user",
        "account": account,
        "user": user,
        "alloc_gpu_h": 100.0 * usage_share,
        "usage_share": usage_share,
        "entitled_share": entitled_share,
        "usage_ratio": usage_share / entitled_share if entitled_share else None,
        "wait_p50_s": 1800.0,
        "wait_p95_s": 10800.0,
        "waste_gpu_h": 12.0,
    }
