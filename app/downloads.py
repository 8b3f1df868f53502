"""Tables with their downloads: every table the dashboard shows can be saved as CSV or Parquet."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import polars as pl
import streamlit as st

__all__ = ["DEFAULT_COLUMNS", "NO_VALUE", "csv_bytes", "dash_nulls", "parquet_bytes", "show_table"]

NO_VALUE = "—"  # what a table shows where a figure does not exist (st.dataframe shows "None")


def _hours(label: str) -> Any:
    return st.column_config.NumberColumn(label, format="%.1f")


def _share(label: str) -> Any:
    return st.column_config.ProgressColumn(label, format="percent", min_value=0.0, max_value=1.0)


def _time(label: str) -> Any:
    return st.column_config.DatetimeColumn(label, format="YYYY-MM-DD HH:mm")


# How the columns the queries return are shown, wherever they appear (a page may override).
# The downloads keep the queries' own column names.
DEFAULT_COLUMNS: dict[str, Any] = {
    "job_id": st.column_config.TextColumn("job"),
    "job_name": st.column_config.TextColumn("name"),
    "alloc_gpu_h": _hours("allocated GPU-h"),
    "observed_gpu_h": _hours("observed GPU-h"),
    "active_gpu_h": _hours("active GPU-h"),
    "idle_gpu_h": _hours("idle GPU-h"),
    "effective_gpu_h": _hours("effective GPU-h"),
    "gpu_h_at_stake": _hours("GPU-h at stake"),
    "gpu_h_lost": _hours("GPU-h lost"),
    "expected_gain_gpu_h": _hours("expected gain GPU-h"),
    "waste_gpu_h": _hours("waste GPU-h"),
    "energy_kwh": _hours("energy kWh"),
    "runtime_h": _hours("run time h"),
    "wait_p50_h": _hours("wait p50 h"),
    "wait_p95_h": _hours("wait p95 h"),
    "idle_share": _share("idle share"),
    "busy_mean": _share("busy"),
    "efficiency": _share("efficiency"),
    "sm_active_mean": _share("SM active"),
    "tensor_active_mean": _share("tensor active"),
    "gpus_never_active": st.column_config.NumberColumn("GPUs never active"),
    "start_ts": _time("start"),
    "end_ts": _time("end"),
    "detected_ts": _time("detected"),
    "created_ts": _time("created"),
    "first_event_ts": _time("first event"),
    "last_event_ts": _time("last event"),
    "last_detected_ts": _time("last detected"),
    "ts": _time("time"),
    "week": st.column_config.DateColumn("week", format="YYYY-MM-DD"),
    "date": st.column_config.DateColumn("day", format="YYYY-MM-DD"),
}


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


def dash_nulls(
    frame: pl.DataFrame, formats: Mapping[str, str], config: dict[str, Any]
) -> pl.DataFrame:
    """`frame` with each column of `formats` that holds a null shown as text: the value in
    that Python format (e.g. "{:.1%}") and `NO_VALUE` where null. `config` (the columns'
    settings) gets a text column of the same label for each column changed."""
    for column, fmt in formats.items():
        if column not in frame.columns or not frame.get_column(column).is_null().any():
            continue
        text = [NO_VALUE if v is None else fmt.format(v) for v in frame.get_column(column)]
        frame = frame.with_columns(pl.Series(column, text, dtype=pl.String))
        old = config.get(column)
        label = old.get("label") if isinstance(old, Mapping) else None
        config[column] = st.column_config.TextColumn(label or column)
    return frame


def show_table(
    frame: pl.DataFrame,
    name: str,
    key: str,
    *,
    column_config: Mapping[str, Any] | None = None,
    height: int | None = None,
    on_select: bool = False,
    dashes: Mapping[str, str] | None = None,
) -> Any:
    """Show `frame` with CSV and Parquet download buttons; return the selection when asked.

    `name` is the download's file name (without suffix); `key` prefixes the widgets' keys.
    `dashes` maps columns that may be null to a Python format ("{:.1%}"): where such a column
    holds a null it is shown as formatted text with "—" for the null; downloads keep numbers.
    """
    config = {c: v for c, v in DEFAULT_COLUMNS.items() if c in frame.columns}
    config.update(column_config or {})
    shown = dash_nulls(frame, dashes, config) if dashes else frame
    kwargs: dict[str, Any] = {"hide_index": True, "column_config": config}
    if height is not None:
        kwargs["height"] = min(height, 38 + 35 * max(frame.height, 1))  # no empty rows
    if on_select:
        kwargs.update(on_select="rerun", selection_mode="single-row", key=f"{key}_table")
    event = st.dataframe(shown, width="stretch", **kwargs)
    row = st.container(horizontal=True)
    row.download_button(
        "CSV",
        data=lambda: csv_bytes(frame),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"{key}_csv",
        icon=":material/download:",
    )
    row.download_button(
        "Parquet",
        data=lambda: parquet_bytes(frame),
        file_name=f"{name}.parquet",
        mime="application/vnd.apache.parquet",
        key=f"{key}_parquet",
        icon=":material/download:",
    )
    return event
