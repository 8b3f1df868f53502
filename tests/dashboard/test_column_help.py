"""The Fairness page's "waste GPU-h" column says what it counts and how it relates to the idle
GPU-hours elsewhere (its header's help), in the words of the weekly report."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from streamlit.testing.v1 import AppTest

from app.bench.dashboard_timing import PAGES
from app.glossary import WASTE_GPU_H
from warehouse.connection import connect

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"


def test_the_waste_column_has_help(plain_lake, monkeypatch):
    monkeypatch.setenv("GPULEDGER_LAKE", str(plain_lake))
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.switch_page(PAGES["fairness"])
    at.run()

    assert not at.exception, at.exception
    configs = [json.loads(frame.proto.columns) for frame in at.dataframe]
    waste = [c["waste_gpu_h"] for c in configs if "waste_gpu_h" in c]
    assert waste, "no table shows waste_gpu_h"
    assert all(c["label"] == "waste GPU-h" and c.get("help") == WASTE_GPU_H for c in waste)


def test_waste_holds_the_idle_hours_as_the_help_says(plain_lake):
    """observed − effective, at least the idle GPU-hours less their busy part (< 1 %)."""
    with connect(plain_lake) as con:
        rows = con.sql(
            "SELECT observed_gpu_h, effective_gpu_h, idle_gpu_h, waste_gpu_h "
            "FROM fairness_weekly WHERE level = 'account'"
        ).pl()
    assert rows.height and rows.get_column("idle_gpu_h").sum() > 0
    diff = (pl.col("observed_gpu_h") - pl.col("effective_gpu_h")).clip(lower_bound=0)
    assert rows.select((pl.col("waste_gpu_h") - diff).abs().max()).item() < 1e-9
    assert rows.filter(pl.col("waste_gpu_h") < 0.99 * pl.col("idle_gpu_h") - 1e-9).is_empty()


def test_the_top_jobs_busy_column_shows_one_decimal_on_every_row(plain_lake, monkeypatch):
    monkeypatch.setenv("GPULEDGER_LAKE", str(plain_lake))
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.switch_page(PAGES["overview"])
    at.run()

    assert not at.exception, at.exception
    [(frame, config)] = [
        (d.value, json.loads(d.proto.columns)) for d in at.dataframe if "job_id" in d.value.columns
    ]
    # a printf format keeps one decimal ("percent" printed 3.9%, 8.68%, 0%)
    assert config["busy_pct"]["label"] == "busy"
    assert config["busy_pct"]["type_config"]["format"] == "%.1f%%"
    busy = frame["busy_pct"].dropna()
    assert len(busy) and busy.between(0, 100).all() and busy.max() > 1
