"""The report's two allocated figures — the scheduler's (headline, §1, §4) and the telemetry's
(cluster frame, §6) — are labelled, and a note says which is which where they differ."""

from __future__ import annotations

import dataclasses
import datetime as dt
import html as html_lib
import re

import polars as pl
import pytest

from app.report.data import ReportSettings, assemble_report
from app.report.html import allocated_note, render_html
from app.report.week import IsoWeek
from tests.marts.rows import T0
from tests.report.lake import fairness_lake

NOW = T0 + dt.timedelta(days=10)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    con = fairness_lake(tmp_path_factory)
    return assemble_report(con, "della", IsoWeek(2024, 9), ReportSettings(), NOW)


def text_of(page: str) -> str:
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_headline_and_the_frame_name_their_source_and_the_note_gives_both(report):
    # Scheduler (tests/report/lake.py): j1 1 GPU × 1 h + j2 2 GPUs × 0.5 h + j3's first half
    # hour in W09 = 2.5 GPU-h. Telemetry: j1's GPU observed 1 h, j2's reporting GPU 0.5 h = 1.5.
    assert report.scalars["alloc_gpu_h"] == pytest.approx(2.5)
    assert report.tables["cluster_frame"].get_column("allocated_gpu_h")[0] == pytest.approx(1.5)
    page = text_of(render_html(report, {}))
    assert "2.5 GPU-hours allocated by the scheduler" in page
    assert "Allocated (telemetry observed) 1.5" in page
    note = allocated_note(report)
    assert note is not None and note in page
    assert "2.5 GPU-hours allocated by the scheduler" in note
    assert "1.5 that telemetry observed" in note
    assert "allocated time no sample covered (1.0 GPU-hours more)" in note


def with_frame_allocated(report, value: float):
    frame = report.tables["cluster_frame"].with_columns(pl.lit(value).alias("allocated_gpu_h"))
    return dataclasses.replace(report, tables=report.tables | {"cluster_frame": frame})


def test_no_note_where_the_two_figures_agree_as_shown(report):
    assert allocated_note(with_frame_allocated(report, 2.5 + 0.04)) is None
    page = text_of(render_html(with_frame_allocated(report, 2.5), {}))
    assert "Two allocated figures" not in page
    assert "2.5 GPU-hours allocated by the scheduler" in page  # the label stays


def test_telemetry_above_the_scheduler_says_why(report):
    note = allocated_note(with_frame_allocated(report, 3.0))
    assert note is not None
    assert "Telemetry saw 0.5 GPU-hours more" in note


def test_no_note_without_telemetry_in_the_week(report):
    frame = report.tables["cluster_frame"].with_columns(
        pl.lit(0.0).alias("allocated_gpu_h"), pl.lit(0, pl.Int64).alias("buckets")
    )
    bare = dataclasses.replace(report, tables=report.tables | {"cluster_frame": frame})
    assert allocated_note(bare) is None


def test_mig_instances_counted_as_gpus_are_not_called_unobserved(report):
    # the jobs observed 2.0 GPU-hours, a MIG instance one of its job's GPUs; the frame counts
    # each instance as its share of the GPU (1.5): of the 1.0 between the scheduler's 2.5 and
    # the frame, 0.5 no sample covered and 0.5 is the instances' counting
    assert report.scalars["observed_gpu_h"] == pytest.approx(1.5)  # no MIG here: the frame's
    mig = dataclasses.replace(report, scalars=report.scalars | {"observed_gpu_h": 2.0})
    note = allocated_note(mig)
    assert note is not None
    assert "allocated time no sample covered (0.5 GPU-hours more)" in note
    assert "each MIG instance as one of its job's GPUs" in note and "(0.5 GPU-hours more)." in note
    every_hour_seen = dataclasses.replace(report, scalars=report.scalars | {"observed_gpu_h": 2.5})
    assert "no sample covered" not in (allocated_note(every_hour_seen) or "")
