"""A count and its noun in messages: "1 GPU", "2 GPUs", "0 jobs" (never "1 GPUs" or "GPU(s)").

`counted` for Python values (recommendations, the report, alerts), `counted_expr` for polars
columns (findings' messages built with `pl.format`). The plural is the noun + "s" unless given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # polars only for counted_expr: the job report's advice loads none
    import polars as pl

__all__ = ["counted", "counted_expr", "noun_for"]


def noun_for(n: float, noun: str, plural: str | None = None) -> str:
    """`noun` when `n` is exactly one, else its plural."""
    return noun if n == 1 else (plural or noun + "s")


def counted(n: float, noun: str, plural: str | None = None) -> str:
    """`n` (with thousands separators) and the noun in the number it takes: "1 GPU", "12 GPUs"."""
    number = int(n) if isinstance(n, float) and n.is_integer() else n
    return f"{number:,} {noun_for(n, noun, plural)}"


def counted_expr(n: pl.Expr | str, noun: str, plural: str | None = None) -> pl.Expr:
    """The polars expression of `counted` over a count column (text; null where it is null)."""
    import polars as pl

    col = pl.col(n) if isinstance(n, str) else n
    word = pl.when(col == 1).then(pl.lit(noun)).otherwise(pl.lit(plural or noun + "s"))
    return pl.format("{} {}", col, word)
