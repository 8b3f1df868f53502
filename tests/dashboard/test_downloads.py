"""Downloads carry the table as shown: CSV (lists as text) and Parquet (types kept)."""

from __future__ import annotations

import io

import polars as pl
from polars.testing import assert_frame_equal

from app.downloads import csv_bytes, parquet_bytes


def test_parquet_download_round_trips_the_frame():
    frame = pl.DataFrame({"job_id": ["1", "2"], "idle_gpu_h": [1.5, None]})

    assert_frame_equal(pl.read_parquet(io.BytesIO(parquet_bytes(frame))), frame)


def test_csv_download_writes_lists_as_comma_separated_text():
    frame = pl.DataFrame({"job_id": ["1"], "nodes": [["a", "b"]]})

    assert csv_bytes(frame).decode() == 'job_id,nodes\n1,"a,b"\n'
