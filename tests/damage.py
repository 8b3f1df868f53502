"""Damage a real Parquet file the way a bad disk or a torn copy does: bytes flipped in the
middle of a column's data pages, the footer left intact (so the file still opens)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq


def flip_data_page(path: Path, column: str, width: int = 64) -> None:
    """Invert `width` bytes in the middle of `column`'s data pages (first row group) of `path`.

    The footer is untouched: `pq.read_metadata` still reads it, as DuckDB does when a view over
    the file is created; only decoding the page fails.
    """
    meta = pq.read_metadata(path)
    chunk = next(
        meta.row_group(0).column(i)
        for i in range(meta.num_columns)
        if meta.row_group(0).column(i).path_in_schema == column
    )
    first = chunk.dictionary_page_offset or chunk.data_page_offset
    end = first + chunk.total_compressed_size
    middle = (chunk.data_page_offset + end) // 2
    assert end - chunk.data_page_offset > 2 * width, f"{column}'s data pages are too small"
    data = bytearray(path.read_bytes())
    for k in range(middle - width // 2, middle + width // 2):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))
    assert pq.read_metadata(path).num_rows == meta.num_rows  # the footer still reads
