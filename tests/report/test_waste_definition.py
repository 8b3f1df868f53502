"""The waste column is defined once (app.glossary) and shown with the figures it explains: the
weekly report's §4 note, and the definition holds on the hand-made lake's numbers."""

from __future__ import annotations

import datetime as dt
import html as html_lib
import re

import pytest

from app.glossary import WASTE_GPU_H
from app.report.data import ReportSettings, assemble_report
from app.report.html import render_html
from app.report.week import IsoWeek
from tests.marts.rows import T0
from tests.report.lake import fairness_lake


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    con = fairness_lake(tmp_path_factory)
    return assemble_report(con, "della", IsoWeek(2024, 9), ReportSettings(), T0 + dt.timedelta(10))


def test_the_report_defines_waste_as_the_dashboard_does(report):
    page = " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", render_html(report, {}))).split())
    assert f"Waste: {WASTE_GPU_H}" in page
    assert "Observed − effective GPU-hours" in WASTE_GPU_H
    assert "idle GPU-hours" in WASTE_GPU_H


def test_waste_is_the_idle_hours_plus_the_unused_part_of_busy_ones(report):
    # tests/report/lake.py: j1 (physics) idle its first half hour, then fully busy: idle 0.5,
    # waste 0.5. j2 (bio): one reporting GPU at busy 0.1 for half an hour: not idle (≥ 1 %),
    # waste 0.9 × 0.5 = 0.45. j3: no samples, so none of its allocation counts.
    waste = {r["account"]: r for r in report.tables["waste_by_account"].iter_rows(named=True)}
    assert waste["physics"]["idle_gpu_h"] == pytest.approx(0.5)
    assert waste["physics"]["waste_gpu_h"] == pytest.approx(0.5)
    assert waste["bio"]["idle_gpu_h"] == pytest.approx(0.0)
    assert waste["bio"]["waste_gpu_h"] == pytest.approx(0.45)
    assert report.scalars["waste_gpu_h"] == pytest.approx(0.95)
