"""Plain builders of hand-made lake rows for the mart tests, with the contract's exact types.

Rows are dicts (only the columns a test cares about); `table(name, rows)` turns them into an
Arrow table typed by `warehouse.schema`, so the writer accepts them. Times are given in seconds
after T0 (midnight UTC, so a day and every 5-minute bucket start there).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pytest

from warehouse.attribution import AttributionConfig, build_marts
from warehouse.connection import connect
from warehouse.schema import MARTS, TABLES
from warehouse.writer import write_batch

UTC = dt.UTC
T0 = dt.datetime(2024, 3, 1, tzinfo=UTC)
T0_E = T0.timestamp()  # T0 in epoch seconds
CLUSTER = "della"

Row = dict[str, Any]


def at(seconds: float) -> dt.datetime:
    """The time `seconds` after T0 (millisecond precision, like the lake)."""
    return T0 + dt.timedelta(milliseconds=round(seconds * 1000))


def table(name: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """An Arrow table of `rows` typed by the contract of table `name` (columns: union of keys)."""
    schema = TABLES[name].schema
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    return pa.table(
        {c: pa.array([row.get(c) for row in rows], schema.field(c).type) for c in columns}
    )


def uuid_of(node: str, gpu_index: int) -> str:
    return f"GPU-{node}-{gpu_index}"


def samples(
    times: Iterable[float],
    *,
    node: str = "g001",
    gpu_index: int = 0,
    interval_s: float = 30.0,
    **fields: Any,
) -> list[Row]:
    """gpu_samples rows of one GPU at `times` (seconds after T0).

    Each keyword in `fields` is a column: a scalar is repeated, a list gives one value per time.
    """
    times = list(times)
    rows = []
    for i, t in enumerate(times):
        row: Row = {
            "ts": at(t),
            "cluster": CLUSTER,
            "node": node,
            "gpu_index": gpu_index,
            "gpu_uuid": uuid_of(node, gpu_index),
            "model": "NVIDIA H100 80GB HBM3",
            "interval_s": interval_s,
            "source": "test",
        }
        for name, value in fields.items():
            row[name] = value[i] if isinstance(value, list) else value
        rows.append(row)
    return rows


def job(job_id: str, start: float, end: float | None, **fields: Any) -> Row:
    """A `jobs` row that started at `start` and ended at `end` (seconds after T0)."""
    row: Row = {
        "cluster": CLUSTER,
        "job_id": job_id,
        "user": "alice",
        "account": "physics",
        "partition": "gpu",
        "state": "COMPLETED",
        "submit_ts": at(start),
        "start_ts": at(start),
        "end_ts": None if end is None else at(end),
        "gpus": 1,
        "source": "test",
        "updated_ts": at(end if end is not None else start),
    }
    row.update(fields)
    return row


def job_gpu(
    job_id: str,
    start: float,
    end: float | None,
    *,
    node: str = "g001",
    gpu_index: int = 0,
    with_uuid: bool = True,
    **fields: Any,
) -> Row:
    """A `job_gpus` row: `job_id` held GPU `gpu_index` of `node` over [start, end)."""
    row: Row = {
        "cluster": CLUSTER,
        "job_id": job_id,
        "node": node,
        "gpu_index": gpu_index,
        "gpu_uuid": uuid_of(node, gpu_index) if with_uuid else None,
        "start_ts": at(start),
        "end_ts": None if end is None else at(end),
        "mapping": "scontrol-idx",
    }
    row.update(fields)
    return row


def event(t: float, kind: str, code: int | None, *, node: str = "g001", gpu_index: int = 0) -> Row:
    """A `gpu_events` row at `t` seconds after T0."""
    return {
        "cluster": CLUSTER,
        "node": node,
        "gpu_uuid": uuid_of(node, gpu_index),
        "gpu_index": gpu_index,
        "ts": at(t),
        "kind": kind,
        "code": code,
    }


def gpu(node: str = "g001", gpu_index: int = 0) -> Row:
    """A `gpus` (inventory) row."""
    return {
        "cluster": CLUSTER,
        "node": node,
        "gpu_index": gpu_index,
        "gpu_uuid": uuid_of(node, gpu_index),
        "model": "NVIDIA H100 80GB HBM3",
        "first_seen": T0,
    }


def land(root: Path, name: str, rows: Sequence[Mapping[str, Any]], batch_id: str = "test") -> None:
    """Write `rows` into table `name` of the lake at `root` (nothing when there are none)."""
    if rows:
        write_batch(root, name, table(name, rows), batch_id)


def mixed_lake() -> dict[str, list[Row]]:
    """Rows of a small lake with most of what attribution must handle, for build_lake(**..)."""
    jitter = [0.0, 1.5, -2.0, 0.25, 3.0, -1.0]
    # GPU 0: a gap, a duplicate, and back after every GPU was silent over [~1000, 1700).
    g0 = [t for t in range(0, 900, 30) if not 300 <= t < 600] + [120, 1700, 1730, 1760]
    g1 = [100 + 20 * i + jitter[i % len(jitter)] for i in range(45)]  # 20 s interval, jittered
    return {
        "samples": samples(g0, gpu_index=0, engine_active=0.4)
        + samples(g1, gpu_index=1, interval_s=20.0, engine_active=0.0, gpu_util_pct=5.0)
        # power on g002 only: job_energy_hourly has rows, other jobs' energy stays unknown
        + samples(range(0, 200, 30), node="g002", engine_active=1.0, power_w=250.0),
        "jobs": [job("j1", 0, 700), job("j2", 50, 500), job("j3", 400, 900)],
        "job_gpus": [
            job_gpu("j1", 0, 700, gpu_index=0),
            job_gpu("j2", 50, 500, gpu_index=1),
            job_gpu("j3", 400, 900, gpu_index=1),  # shares GPU 1 with j2 over [400, 500)
            job_gpu("j4", 0, 100, node="g002", with_uuid=False) | {"gpu_index": None},
        ],
        "gpus": [gpu(), gpu(gpu_index=1), gpu("g002"), gpu("g002", 1)],
    }


def build_lake(
    root: Path,
    *,
    samples: Sequence[Mapping[str, Any]] = (),
    jobs: Sequence[Mapping[str, Any]] = (),
    job_gpus: Sequence[Mapping[str, Any]] = (),
    events: Sequence[Mapping[str, Any]] = (),
    gpus: Sequence[Mapping[str, Any]] = (),
    config: AttributionConfig | None = None,
) -> duckdb.DuckDBPyConnection:
    """Land the given rows, attribute the samples by `job_gpus`, build every mart (with
    `config`, default the built-in one); return `con`.

    Samples are landed as given (usually with a null job_id); the marts give them owners.
    """
    land(root, "gpu_samples", samples)
    land(root, "jobs", jobs)
    land(root, "job_gpus", job_gpus)
    land(root, "gpu_events", events)
    land(root, "gpus", gpus)
    con = connect(root)
    build_marts(con, root, config or AttributionConfig())
    return con


def marts_by_key(root: Path) -> dict[str, pl.DataFrame]:
    """Every mart of the contract in `root`'s lake, each sorted by its key."""
    con = connect(root)
    try:
        return {
            name: con.table(name).pl().sort(list(spec.key), nulls_last=True)
            for name, spec in MARTS.items()
        }
    finally:
        con.close()


def fetch(con: duckdb.DuckDBPyConnection, query: str) -> list[dict[str, Any]]:
    """The rows of `query` as dicts (column name -> Python value)."""
    return con.sql(query).pl().to_dicts()


def by_job(con: duckdb.DuckDBPyConnection, mart: str = "job_usage") -> dict[str, dict[str, Any]]:
    """Rows of a per-job mart keyed by job_id."""
    return {row["job_id"]: row for row in fetch(con, f"SELECT * FROM {mart}")}


def approx_rows(expected: Sequence[Sequence[float]], rel: float = 1e-9, abs: float = 1e-6) -> list:
    """`expected` rows (tuples of numbers) compared approximately: `got == approx_rows(...)`."""
    return [pytest.approx(tuple(row), rel=rel, abs=abs) for row in expected]
