"""Hand-made lake rows for the rule tests: a DuckDB connection whose views hold given rows.

`connection(tmp_path, gpu_job_buckets=[...], jobs=[...])` is a cursor of `warehouse.connect` on
an empty lake (every view exists, empty, with the contract's columns; reference views are
loaded) whose named views give way to the rows given, typed by `warehouse.schema`. Times are
seconds after T0 via `at()`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from warehouse.connection import connect
from warehouse.schema import TABLES

T0 = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)
CLUSTER = "della"
H100 = "NVIDIA H100 80GB HBM3"  # 81559 MiB, 700 W limit, 70 W idle (warehouse/data/gpu_models.csv)
Row = dict[str, Any]


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def table(name: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """`rows` typed by the contract of `name`; columns not given are null."""
    schema = TABLES[name].schema
    return pa.table(
        {f.name: pa.array([row.get(f.name) for row in rows], f.type) for f in schema},
        schema=schema,
    )


# A lake folder that does not exist: connect() on it gives every view empty.
EMPTY = Path("/nonexistent/gpuledger-test-lake")

# This process's one connection over an empty lake: a `connect` costs about 0.1 CPU-s, and the
# rule tests open one a test; each gets a cursor of it instead (30 µs).
_EMPTY: list[duckdb.DuckDBPyConnection] = []


def connection(tmp_path: Path, **tables: Sequence[Mapping[str, Any]]) -> duckdb.DuckDBPyConnection:
    """A cursor over an empty lake, in UTC as `connect` sets it, its views `tables` given."""
    if not _EMPTY:
        _EMPTY.append(connect(tmp_path / "empty-lake"))
    con = _EMPTY[0].cursor()
    con.execute("SET TimeZone = 'UTC'")  # a session setting: a cursor starts without it
    return replace_views(con, **tables)


def replace_views(
    con: duckdb.DuckDBPyConnection, **tables: Sequence[Mapping[str, Any]]
) -> duckdb.DuckDBPyConnection:
    """Point the views `tables` names at the rows given, in `con` alone: temporary views, which
    the lake's views of those names give way to in that cursor (derived views follow), and no
    other cursor of the same database sees."""
    for name, rows in tables.items():
        con.register(name, table(name, rows))
    return con


def bucket(
    job_id: str | None,
    start_s: float,
    *,
    node: str = "g001",
    gpu_index: int = 0,
    observed_s: float = 300.0,
    busy: float = 0.0,
    util_pct: float | None = 0.0,
    sm: float | None = None,
    fb_mib: float = 0.0,
    power_w: float | None = 100.0,
    idle_below: float = 0.01,
    busy_known: bool = True,
) -> Row:
    """One gpu_job_buckets row: one GPU, one 5-minute bucket, uniform activity `busy` (unknown
    with `busy_known` false: active, as the marts count a sample without a busy field)."""
    sm_value = busy if sm is None else sm
    active_s = observed_s if busy >= idle_below or not busy_known else 0.0
    return {
        "cluster": CLUSTER,
        "device": f"GPU-{node}-{gpu_index}",
        "job_id": job_id,
        "bucket": at(start_s),
        "date": at(start_s).date(),
        "node": node,
        "gpu_index": gpu_index,
        "gpu_uuid": f"GPU-{node}-{gpu_index}",
        "model": H100,
        "samples": int(observed_s // 30),
        "share": 1.0,
        "first_e": at(start_s).timestamp(),
        "last_end_e": at(start_s).timestamp() + observed_s,
        "gap_s": 0.0,
        "observed_s": observed_s,
        "carry_s": 0.0,
        "carry_share": 1.0,
        "observed_share_s": observed_s,
        "active_share_s": active_s,
        "idle_share_s": observed_s - active_s,
        "active_s": active_s,
        "carry_active_s": 0.0,
        "idle_s": observed_s - active_s,
        "carry_idle_s": 0.0,
        "effective_s": busy * observed_s,
        "busy_known_s": observed_s if busy_known else 0.0,
        "util_sum": None if util_pct is None else util_pct * observed_s,
        "util_known_s": 0.0 if util_pct is None else observed_s,
        "sm_sum": None if sm_value is None else sm_value * observed_s,
        "sm_known_s": observed_s,
        "tensor_sum": None,
        "tensor_known_s": 0.0,
        "dram_sum": None,
        "dram_known_s": 0.0,
        "fb_used_mib_max": fb_mib,
        "energy_j": None if power_w is None else power_w * observed_s,
        "power_sum": None if power_w is None else power_w * observed_s,
        "power_known_s": 0.0 if power_w is None else observed_s,
        "nvlink_bytes": 0.0,
        "pcie_bytes": 0.0,
    }


def job(job_id: str, start_s: float, end_s: float | None, **fields: Any) -> Row:
    """One jobs row (updated after it ended); `fields` adds or overrides columns."""
    row: Row = {
        "cluster": CLUSTER,
        "job_id": job_id,
        "user": "alice",
        "account": "physics",
        "partition": "gpu",
        "state": "COMPLETED" if end_s is not None else "RUNNING",
        "submit_ts": at(start_s),
        "start_ts": at(start_s),
        "end_ts": None if end_s is None else at(end_s),
        "gpus": 1,
        "source": "test",
        "updated_ts": at(end_s if end_s is not None else start_s),
    }
    row.update(fields)
    return row


def device_day(
    job_id: str,
    gpu_index: int,
    *,
    observed_s: float = 3600.0,
    busy: float = 0.5,
    node: str = "g001",
    day_s: float = 0.0,
) -> Row:
    """One job_gpu_daily row: GPU `gpu_index` of `job_id`, uniformly `busy` for `observed_s`."""
    active = observed_s if busy >= 0.01 else 0.0
    return {
        "cluster": CLUSTER,
        "job_id": job_id,
        "device": f"GPU-{node}-{gpu_index}",
        "date": at(day_s).date(),
        "node": node,
        "gpu_index": gpu_index,
        "gpu_uuid": f"GPU-{node}-{gpu_index}",
        "model": H100,
        "samples": int(observed_s // 30),
        "observed_s": observed_s,
        "active_s": active,
        "idle_s": observed_s - active,
        "effective_s": busy * observed_s,
        "busy_known_s": observed_s,
        "sm_sum": busy * observed_s,
        "sm_known_s": observed_s,
    }


def occupancy(start_s: float, end_s: float, *, gpus: int = 4, unobserved: int = 0) -> list[Row]:
    """cluster_occupancy rows of 5-minute buckets over [start_s, end_s): `gpus` GPUs of which
    `unobserved` did not report."""
    return [
        {
            "cluster": CLUSTER,
            "bucket": at(t),
            "gpus_total": float(gpus),
            "gpus_allocated": 0.0,
            "gpus_active": 0.0,
            "gpus_idle_allocated": 0.0,
            "gpus_unallocated": float(gpus - unobserved),
            "gpus_unobserved": float(unobserved),
        }
        for t in range(int(start_s), int(end_s), 300)
    ]


def usage(job_id: str, start_s: float, end_s: float | None, **fields: Any) -> Row:
    """One job_usage row (and nothing else); `fields` sets the figures the test needs."""
    row: Row = {
        "cluster": CLUSTER,
        "job_id": job_id,
        "user": "alice",
        "account": "physics",
        "partition": "gpu",
        "state": "COMPLETED" if end_s is not None else "RUNNING",
        "start_ts": at(start_s),
        "end_ts": None if end_s is None else at(end_s),
        "gpus": 1,
        "alloc_gpu_h": 0.0,
        "observed_gpu_h": 0.0,
        "active_gpu_h": 0.0,
        "idle_gpu_h": 0.0,
        "effective_gpu_h": 0.0,
        "samples": 0,
    }
    row.update(fields)
    if "observed_gpu_h" not in fields:  # telemetry saw all it held, unless the test says
        row["observed_gpu_h"] = row["alloc_gpu_h"]
    return row
