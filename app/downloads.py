"""Tables with their downloads: every table the dashboard shows can be saved as CSV or Parquet."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import polars as pl
import streamlit as st

__all__ = ["csv_bytes", "parquet_bytes", "show_table"]


def csv_bytes(frame: pl.DataFrame) -> bytes:
    """The frame as UTF-8 CSV; list columns are written as comma-separated text."""
    nested = [c for c, t in frame.schema.items() if isinstance(t, pl.List)]
    if nested:
        frame = frame.with_columns(pl.col(nested).cast(pl.List(pl.String)).list.join(","))
    return frame.write_csv().encode("utf-8")


def parquet_bytes(frame: pl.DataFrame) -> bytes:
    """The frame as a Parquet file."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()


def show_table(
    frame: pl.DataFrame,
    name: str,
    key: str,
    *,
    column_config: Mapping[str, Any] | None = None,
    height: int | None = None,
    on_select: bool = False,
) -> Any:
    """Show `frame` with CSV and Parquet download buttons; return the selection when asked.

    `name` is the download's file name (without suffix); `key` prefixes the widgets' keys.
    """
    kwargs: dict[str, Any] = {"hide_index": True, "column_config": dict(column_config or {})}
    if height is not None:
        kwargs["height"] = height
    if on_select:
        kwargs.update(on_select="rerun", selection_mode="single-row", key=f"{key}_table")
    event = st.dataframe(frame, width="stretch", **kwargs)
    left, right, _ = st.columns([1, 1, 6])
    left.download_button(
        "CSV",
        data=lambda: csv_bytes(frame),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"{key}_csv",
        icon=":material/download:",
    )
    right.download_button(
        "Parquet",
        data=lambda: parquet_bytes(frame),
        file_name=f"{name}.parquet",
        mime="application/vnd.apache.parquet",
        key=f"{key}_parquet",
        icon=":material/download:",
    )
    return event
