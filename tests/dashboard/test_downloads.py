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


def test_csv_download_neutralises_formulas_but_keeps_numbers():
    frame = pl.DataFrame(
        {
            "job_name": [
                '=HYPERLINK("http://evil","click")',
                "+cmd|' /C calc'!A0",
                "-2+3",
                "@SUM(A1:A9)",
                "\t=1+1",
                "\r=1+1",
                "-3.5",
                "train-run",
                None,
            ],
            "delta_gpu_h": [-1.5, -2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, -9.0],
        }
    )

    back = pl.read_csv(io.BytesIO(csv_bytes(frame)), infer_schema_length=None)

    assert back["job_name"].to_list() == [
        '\'=HYPERLINK("http://evil","click")',
        "'+cmd|' /C calc'!A0",
        "'-2+3",
        "'@SUM(A1:A9)",
        "'\t=1+1",
        "'\r=1+1",
        "-3.5",
        "train-run",
        None,
    ]
    assert back["delta_gpu_h"].dtype == pl.Float64  # real negative numbers stay numbers
    assert back["delta_gpu_h"].to_list() == frame["delta_gpu_h"].to_list()
