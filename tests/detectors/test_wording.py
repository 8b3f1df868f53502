"""Counts meet their nouns in the number they take: "1 GPU", "2 GPUs", "0 jobs"."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from detectors.wording import counted, counted_expr, noun_for


@pytest.mark.parametrize(
    ("n", "noun", "plural", "expected"),
    [
        (1, "GPU", None, "1 GPU"),
        (2, "GPU", None, "2 GPUs"),
        (0, "job", None, "0 jobs"),
        (1.0, "day", None, "1 day"),  # a float threshold of one day
        (7.0, "day", None, "7 days"),  # whole floats without ".0"
        (1.5, "day", None, "1.5 days"),
        (12345, "GPU", None, "12,345 GPUs"),
        (1, "account/user pair", None, "1 account/user pair"),
        (3, "index", "indices", "3 indices"),
    ],
)
def test_counted(n, noun, plural, expected):
    assert counted(n, noun, plural) == expected


def test_the_verb_after_a_count():
    assert noun_for(1, "was", "were") == "was"
    assert noun_for(2, "was", "were") == "were"


def test_counted_expr_over_a_column_keeps_nulls_null():
    frame = pl.DataFrame({"gpus": [1, 2, 0, None]}, schema={"gpus": pl.Int32})
    got = frame.select(counted_expr("gpus", "GPU").alias("text"))["text"].to_list()
    assert got == ["1 GPU", "2 GPUs", "0 GPUs", None]


@given(st.integers(min_value=0, max_value=10**9))
def test_the_polars_and_python_wordings_agree(n):
    python = counted(n, "GPU").replace(",", "")  # pl.format writes no thousands separators
    column = pl.DataFrame({"n": [n]}).select(counted_expr("n", "GPU"))
    assert column.item() == python
    assert python.endswith(" GPU") == (n == 1)
