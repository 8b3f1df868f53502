"""Arrow arrays of Python values built from their buffers, and Parquet files read, without
loading pandas.

pyarrow 26's `pa.array(values)` (and `pa.scalar`, `Table.from_pylist`/`from_pydict`,
`Schema.empty_table`, compute functions given a Python value) first asks whether `values` is
a pandas object, and that check imports pandas (~0.25 CPU-s) in a process that has not: once
per `gpuledger` command that builds a small table (the carbon intensity, the allocations
cache). The few arrays the warehouse builds from Python lists are built here instead, with
`pa.Array.from_buffers`. `import pyarrow.dataset` imports pandas too, and with it
`pq.read_table` and `Table.group_by` (Acero): a file is read with `read_parquet` instead, and
small tables are grouped by warehouse/arrow_groups.py.
"""

from __future__ import annotations

import array
import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "TIMESTAMP",
    "dates",
    "empty_table",
    "float64s",
    "int64s",
    "read_parquet",
    "repeated_string",
    "string_scalar",
    "strings",
]

# The Arrow type of every timestamp column of the contract (warehouse/schema.py).
TIMESTAMP = pa.timestamp("ms", tz="UTC")

_EPOCH_DAY = dt.date(1970, 1, 1)


def _validity(values: Sequence[object]) -> pa.Buffer | None:
    """The validity bitmap (bit i set: value i is not null), or None when none is null."""
    if all(v is not None for v in values):
        return None
    bits = bytearray((len(values) + 7) // 8)
    for i, v in enumerate(values):
        if v is not None:
            bits[i >> 3] |= 1 << (i & 7)
    return pa.py_buffer(bytes(bits))


def int64s(values: Sequence[int | None], type: pa.DataType | None = None) -> pa.Array:
    """`values` as an int64 array (or another 64-bit type over the same numbers, such as a
    timestamp), None as null."""
    data = array.array("q", (0 if v is None else v for v in values))
    return pa.Array.from_buffers(
        type or pa.int64(), len(values), [_validity(values), pa.py_buffer(data)]
    )


def float64s(values: Sequence[float | None]) -> pa.Array:
    """`values` as a float64 array, None as null."""
    data = array.array("d", (0.0 if v is None else v for v in values))
    return pa.Array.from_buffers(pa.float64(), len(values), [_validity(values), pa.py_buffer(data)])


def strings(values: Sequence[str | None]) -> pa.Array:
    """`values` as a string array, None as null."""
    encoded = [b"" if v is None else v.encode() for v in values]
    offsets = array.array("q", [0])
    for text in encoded:
        offsets.append(offsets[-1] + len(text))
    return pa.Array.from_buffers(
        pa.large_string(),
        len(values),
        [_validity(values), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))],
    ).cast(pa.string())


def dates(values: Sequence[dt.date | None]) -> pa.Array:
    """`values` as a date32 array (days since 1970-01-01), None as null."""
    data = array.array("i", (0 if v is None else (v - _EPOCH_DAY).days for v in values))
    return pa.Array.from_buffers(pa.date32(), len(values), [_validity(values), pa.py_buffer(data)])


def string_scalar(value: str) -> pa.Scalar:
    """`value` as an Arrow string scalar (what a compute function compares a column with)."""
    return repeated_string(value, 1)[0]


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of `schema` with no rows (`schema.empty_table()` without pandas)."""
    return pa.Table.from_batches([], schema)


def repeated_string(value: str, count: int) -> pa.Array:
    """`value` `count` times, as a string array: a one-word dictionary's zero indices,
    decoded by Arrow (building the offsets in Python cost 0.3 s for a day's 2.9 M rows)."""
    indices = pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(bytes(4 * count))])
    return pa.DictionaryArray.from_arrays(indices, strings([value])).cast(pa.string())


def read_parquet(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """One Parquet file's rows (only `columns` when given), as `pq.read_table(path)` reads
    them but without `pyarrow.dataset`, whose import loads pandas."""
    with pq.ParquetFile(path) as file:
        return file.read(columns=columns)
