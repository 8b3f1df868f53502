"""Tables with their downloads: every table the dashboard shows can be saved as CSV or Parquet."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import polars as pl
import streamlit as st

from app.glossary import WASTE_GPU_H

__all__ = [
    "DEFAULT_COLUMNS",
    "NO_VALUE",
    "csv_bytes",
    "dash_nulls",
    "neutralise_formulas",
    "parquet_bytes",
    "show_table",
]

NO_VALUE = "—"  # what a table shows where a figure does not exist (st.dataframe shows "None")


def _hours(label: str, help: str | None = None) -> Any:
    return st.column_config.NumberColumn(label, format="%.1f", help=help)


def _share(label: str, help: str | None = None) -> Any:
    return st.column_config.ProgressColumn(
        label, format="percent", min_value=0.0, max_value=1.0, help=help
    )


def _time(label: str, help: str | None = None) -> Any:
    return st.column_config.DatetimeColumn(label, format="YYYY-MM-DD HH:mm", help=help)


def _count(label: str, help: str | None = None) -> Any:
    return st.column_config.NumberColumn(label, format="%d", help=help)


# How the columns the queries return are shown, wherever they appear (a page may override).
# Labels are short (a table of ~10 columns fits 1400 px without cutting a header) and carry
# their unit; `help` (the header's tooltip) says what the figure is. The downloads keep the
# queries' own column names.
DEFAULT_COLUMNS: dict[str, Any] = {
    "job_id": st.column_config.TextColumn("job", pinned=True),
    "job_name": st.column_config.TextColumn("name"),
    "gpus": _count("GPUs", "GPUs allocated to the job"),
    "alloc_gpu_h": _hours("alloc. GPU-h", "GPU-hours allocated by the scheduler"),
    "observed_gpu_h": _hours("observed GPU-h", "Allocated GPU-hours that telemetry saw"),
    "active_gpu_h": _hours("active GPU-h", "Allocated GPU-hours with the GPU busy"),
    "idle_gpu_h": _hours("idle GPU-h", "GPU-hours allocated but idle (busy < 1 %)"),
    "effective_gpu_h": _hours("effective GPU-h", "Σ busy × time: the GPU-hours of real work"),
    "gpu_h_at_stake": _hours("GPU-h at stake", "GPU-hours the finding puts at risk or wasted"),
    "gpu_h_lost": _hours("GPU-h lost", "GPU-hours of runs thrown away: failed, killed or requeued"),
    "gpu_h_lost_requeue": _hours("GPU-h lost to requeues", "Held by runs before a requeue"),
    "expected_gain_gpu_h": _hours("expected gain GPU-h"),
    "waste_gpu_h": _hours("waste GPU-h", WASTE_GPU_H),
    "energy_kwh": _hours("kWh", "Energy the GPUs drew (kWh)"),
    "kg_co2e": st.column_config.NumberColumn(
        "kg CO2e",
        format="%.2f",
        help="Each hour's energy at that hour's carbon intensity ([emissions]); empty: unknown",
    ),
    "runtime_h": _hours("run time h"),
    "wait_p50_h": _hours("wait p50 h", "Median wait before start (hours)"),
    "wait_p95_h": _hours("wait p95 h", "95th-percentile wait before start (hours)"),
    "idle_share": _share("idle share", "Idle GPU-hours ÷ observed GPU-hours"),
    "busy_mean": _share("busy", "Mean busy fraction of the GPUs while observed"),
    "efficiency": _share("efficiency", "Effective ÷ observed GPU-hours"),
    "sm_active_mean": _share("SM active", "Mean SM activity (DCGM profiling)"),
    "tensor_active_mean": _share("tensor active", "Mean tensor-core activity"),
    "gpus_never_active": _count("idle GPUs", "GPUs that never showed any activity"),
    "users": _count("users"),
    "jobs": _count("jobs"),
    # hardware health
    "gpu_index": _count("index", "GPU index on its node"),
    "gpu_uuid": st.column_config.TextColumn("GPU UUID"),
    "gpus_with_events": _count("GPUs hit", "GPUs of the node with a hardware event"),
    "gpus_at_risk": _count("GPUs at risk", "GPUs with a predicted or critical finding"),
    "xids": _count("XIDs", "XID errors the driver reported"),
    "fatal_xids": _count("fatal XIDs", "XIDs NVIDIA's catalogue marks fatal (e.g. 79, 48)"),
    "last_xid": _count("last XID", "The code of the latest XID"),
    "ecc_dbe": _count("ECC DBE", "Double-bit (uncorrectable) ECC errors"),
    "row_remap_failures": _count("remap fails", "Row-remap failures (memory to replace)"),
    "throttle_events": _count("throttles", "HW slowdown, thermal and power-brake events"),
    "offline_events": _count("offline", "Times the GPU fell off the bus or went offline"),
    "critical_findings": _count("critical", "Findings of critical severity"),
    "findings": _count("findings"),
    # fairness
    "accounts": _count("accounts"),
    "jain_index": st.column_config.NumberColumn(
        "Jain's index",
        format="%.3f",
        help="1 = every account used in proportion to its entitlement; 1/n = one took all",
    ),
    "max_min_ratio": st.column_config.NumberColumn(
        "max ÷ min",
        format="%.2f",
        help="The highest used ÷ entitled share of an account over the lowest",
    ),
    "start_ts": _time("start"),
    "end_ts": _time("end"),
    "detected_ts": _time("detected", "When `gpuledger detect` raised it"),
    "created_ts": _time("created"),
    "first_event_ts": _time("first event"),
    "last_event_ts": _time("last event"),
    "last_detected_ts": _time("last detected", "When `gpuledger detect` last ran on it"),
    "ts": _time("time"),
    "week": st.column_config.DateColumn("week", format="YYYY-MM-DD"),
    "date": st.column_config.DateColumn("day", format="YYYY-MM-DD"),
}


# A text cell a spreadsheet would run as a formula ("=HYPERLINK(…)", "+cmd", "-2+3", "@SUM(…)",
# or one hiding behind a leading tab or carriage return): OWASP's CSV-injection list.
_FORMULA_START = r"^[=+\-@\t\r]"
# …unless it is only a number ("-3.5", "+1e-3"): that stays a number for the spreadsheet
_PLAIN_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"


def neutralise_formulas(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with every text cell that a spreadsheet would evaluate as a formula prefixed
    with `'` (shown as text, not run). Number columns, and text cells that are a plain number,
    are left as they are: a real negative number stays numeric."""
    text = [c for c, t in frame.schema.items() if t == pl.String]
    if not text:
        return frame
    return frame.with_columns(
        pl.when(pl.col(c).str.contains(_FORMULA_START) & ~pl.col(c).str.contains(_PLAIN_NUMBER))
        .then(pl.lit("'") + pl.col(c))
        .otherwise(pl.col(c))
        .alias(c)
        for c in text
    )


def csv_bytes(frame: pl.DataFrame) -> bytes:
    """The frame as UTF-8 CSV; list columns are written as comma-separated text, and text
    cells that start like a formula (`=`, `+`, `-`, `@`, tab, CR) are prefixed with `'` so a
    spreadsheet shows them instead of running them (see `neutralise_formulas`)."""
    nested = [c for c, t in frame.schema.items() if isinstance(t, pl.List)]
    if nested:
        frame = frame.with_columns(pl.col(nested).cast(pl.List(pl.String)).list.join(","))
    return neutralise_formulas(frame).write_csv().encode("utf-8")


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
        tip = old.get("help") if isinstance(old, Mapping) else None  # (the glossary's words)
        config[column] = st.column_config.TextColumn(label or column, help=tip)
    return frame


def _printf_to_format(printf: object) -> str | None:
    """A NumberColumn's format ("%.1f", "%d", "percent") as a Python format, else None."""
    if printf == "%d":
        return "{:,.0f}"
    if printf == "percent":
        return "{:.1%}"
    if isinstance(printf, str) and printf.startswith("%.") and printf.endswith("f"):
        return "{:,." + printf[2:-1] + "f}"
    return None


def _null_formats(frame: pl.DataFrame, config: Mapping[str, Any]) -> dict[str, str]:
    """How to show the number and time columns of `frame` that hold a null ("None" in a
    table, e.g. an open finding's end): numbers in their column's format (else up to 4
    digits), times as `_time` shows them (as text they still sort in time order). Bars
    (progress) keep their kind: a page passes `dashes` for those. A number column then sorts
    as text: a page that ranks by one sorts the rows itself."""
    formats = {}
    for column in frame.columns:
        series = frame.get_column(column)
        if not series.is_null().any():
            continue
        kind = (config.get(column) or {}).get("type_config", {})
        if series.dtype.is_numeric() and kind.get("type") in (None, "number"):
            fallback = "{:,}" if series.dtype.is_integer() else "{:,.2f}"
            formats[column] = _printf_to_format(kind.get("format")) or fallback
        elif isinstance(series.dtype, pl.Datetime) and kind.get("type") in (None, "datetime"):
            formats[column] = "{:%Y-%m-%d %H:%M}"
    return formats


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
    Text and number columns that hold a null show "—" there without being named.
    """
    config = {c: v for c, v in DEFAULT_COLUMNS.items() if c in frame.columns}
    config.update(column_config or {})
    formats = {**_null_formats(frame, config), **(dashes or {})}
    shown = dash_nulls(frame, formats, config) if formats else frame
    text = [c for c, kind in shown.schema.items() if kind == pl.String and c not in formats]
    shown = shown.with_columns(pl.col(text).fill_null(NO_VALUE))  # (their settings stay)
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
