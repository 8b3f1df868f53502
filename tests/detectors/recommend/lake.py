"""Builders of small hand-made lakes for the recommendation tests (on top of tests/marts/rows)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tests.marts import rows as r
from warehouse.connection import connect

NOW = r.T0 + dt.timedelta(days=2)  # replay window: the 28 days before NOW covers everything
H = 3600.0

# One connection a process over each lake that a module's tests only read (`reading`).
_READ: dict[Path, duckdb.DuckDBPyConnection] = {}


def reading(root: Path) -> duckdb.DuckDBPyConnection:
    """A cursor of its own over a lake the tests only read: its temporary tables are its own,
    in UTC as `connect` sets it (a session setting, which a cursor starts without). The lake is
    connected once a process (0.1 CPU-s a connection), not once a test."""
    if root not in _READ:
        _READ[root] = connect(root)
    cursor = _READ[root].cursor()
    cursor.execute("SET TimeZone = 'UTC'")
    return cursor


def busy_samples(
    spans: list[tuple[float, float, float]], *, node: str = "g001", gpu_index: int = 0, **fields
) -> list[dict[str, Any]]:
    """30-s samples of one GPU: for each (start, end, busy), one every 30 s in [start, end)."""
    out: list[dict[str, Any]] = []
    for start, end, busy in spans:
        out += r.samples(
            range(int(start), int(end), 30),
            node=node,
            gpu_index=gpu_index,
            engine_active=busy,
            **fields,
        )
    return out


def recs_of(table: pa.Table, kind: str) -> list[dict[str, Any]]:
    """The rows of one kind, with evidence parsed, sorted by scope."""
    rows = [row for row in table.to_pylist() if row["kind"] == kind]
    for row in rows:
        row["evidence"] = json.loads(row["evidence"])
    return sorted(rows, key=lambda row: row["scope"])
