"""Groupings of small Arrow tables by cluster (the summary state's per-day index, the job keys
of scheduler batches) without Acero.

`Table.group_by` and `Table.join` import `pyarrow.acero`, and with it pandas: ~0.45 s of every
`gpuledger attribute` on a 2-vCPU machine, for tables of a few thousand rows
(warehouse/arrow_arrays.py says why). A lake has a few clusters: the rows are split by
cluster, then grouped with Arrow's hash kernels, or numpy over rows sorted by date.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warehouse.arrow_arrays import float64s, repeated_string, string_scalar

__all__ = ["by_cluster", "distinct_by_cluster", "max_by_cluster_date", "pairs", "semi_join"]


def by_cluster(table: pa.Table) -> Iterator[tuple[str | None, pa.Table]]:
    """Each distinct `cluster` of `table` (sorted, a null one last) with its rows."""
    column = table.column("cluster")
    for cluster in sorted(pc.unique(column).to_pylist(), key=lambda c: (c is None, c or "")):
        if cluster is None:
            yield None, table.filter(pc.is_null(column))
        else:
            yield cluster, table.filter(pc.equal(column, string_scalar(cluster)))


def distinct_by_cluster(table: pa.Table, column: str) -> pa.Table:
    """The distinct (cluster, `column`) rows of `table` (a null value is one of them), sorted;
    `Table.group_by(["cluster", column]).aggregate([])` without Acero."""
    schema = table.select(["cluster", column]).schema
    parts = []
    for cluster, rows in by_cluster(table):
        values = pc.unique(rows.column(column)).sort()
        clusters = (
            pa.nulls(len(values), pa.string())
            if cluster is None
            else repeated_string(cluster, len(values))
        )
        parts.append(pa.Table.from_arrays([clusters, values], schema=schema))
    return pa.concat_tables(parts) if parts else pa.Table.from_batches([], schema)


def pairs(table: pa.Table, column: str) -> list[tuple[str | None, object]]:
    """The distinct (cluster, `column`) pairs of `table`'s rows, as Python values."""
    found = distinct_by_cluster(table, column)
    return list(zip(found.column(0).to_pylist(), found.column(1).to_pylist(), strict=True))


def semi_join(table: pa.Table, keys: pa.Table, column: str) -> pa.Table:
    """The rows of `table` whose (cluster, `column`) is a row of `keys`; a null never matches
    (as a join's keys)."""
    parts = []
    for cluster, wanted in by_cluster(keys):
        if cluster is None:
            continue
        rows = table.filter(pc.equal(table.column("cluster"), string_scalar(cluster)))
        hit = pc.is_in(rows.column(column), value_set=wanted.column(column), skip_nulls=True)
        parts.append(rows.filter(hit))
    return pa.concat_tables(parts) if parts else table.slice(0, 0)


def _numbers(column: pa.ChunkedArray, dtype: type[np.number]) -> np.ndarray:
    """`column`'s values as a numpy array over its buffer (`to_numpy` loads pandas); a null
    float reads as NaN (the column must have no null of another type)."""
    if pa.types.is_floating(column.type):
        column = pc.fill_null(column, float64s([math.nan])[0].cast(column.type))
    values = column.combine_chunks()
    if values.null_count:
        raise ValueError("a null where a number is needed")
    width = np.dtype(dtype).itemsize
    return np.frombuffer(values.buffers()[1], dtype, len(values), values.offset * width)


def max_by_cluster_date(table: pa.Table, column: str) -> list[tuple[str, dt.date, float | None]]:
    """(cluster, date, max of `column`) of each (cluster, date) of `table` (a non-null date32
    `date` and a float column; an all-null group's max is None)."""
    out: list[tuple[str, dt.date, float | None]] = []
    for cluster, rows in by_cluster(table):
        if cluster is None or not rows.num_rows:
            continue
        rows = rows.sort_by("date")
        days = _numbers(rows.column("date").cast(pa.int32()), np.int32)
        values = _numbers(rows.column(column).cast(pa.float64()), np.float64)  # null: NaN
        starts = np.flatnonzero(np.r_[True, days[1:] != days[:-1]])
        maxes = np.fmax.reduceat(values, starts)  # NaN only where every value is
        epoch = dt.date(1970, 1, 1)
        out.extend(
            (cluster, epoch + dt.timedelta(days=int(days[i])), None if np.isnan(m) else float(m))
            for i, m in zip(starts, maxes, strict=True)
        )
    return out
