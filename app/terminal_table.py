"""A result frame as a table that fits the terminal: the columns that fit, in their order, and
a line naming the ones left out (`gpuledger query`'s default format)."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

__all__ = ["render"]

_MAX_STR = 40  # longer strings are cut with "…"
_PADDING = 3  # a cell's borders and spaces


def _width(frame: pl.DataFrame, column: str) -> int:
    """The characters `column` takes in the table: its name or its widest shown value."""
    values = frame.get_column(column).cast(str, strict=False).fill_null("null")
    widest = max(values.str.len_chars().to_list(), default=0)
    return max(len(column), min(widest, _MAX_STR)) + _PADDING


def render(frame: pl.DataFrame, rows: int, width: int | None = None) -> tuple[str, list[str]]:
    """The first `rows` rows of `frame` as a table at most `width` characters wide (default:
    the terminal's, else 160), and the names of the columns that did not fit."""
    import polars as pl

    width = width or shutil.get_terminal_size((160, 24)).columns
    shown = frame.head(rows)
    kept: list[str] = []
    used = 1
    for column in frame.columns:
        need = _width(shown, column)
        if kept and used + need > width:
            break
        kept.append(column)
        used += need
    left_out = frame.columns[len(kept) :]
    with pl.Config(
        tbl_rows=rows,
        tbl_cols=-1,
        fmt_str_lengths=_MAX_STR,
        tbl_width_chars=max(width, used),
        tbl_hide_column_data_types=True,
    ):
        return str(frame.select(kept)), left_out
