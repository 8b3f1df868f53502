"""The weekly report's emissions: kg CO2e per account beside kWh, the total, and a note that
says when the intensity is unknown (never 0)."""

from __future__ import annotations

import datetime as dt

import pytest

from app.report.data import ReportSettings, assemble_report
from app.report.outputs import write_report
from app.report.week import IsoWeek
from tests.marts.rows import T0
from tests.report.lake import build_fairness_lake
from warehouse.attribution import AttributionConfig
from warehouse.emissions import CarbonIntensity

pytestmark = pytest.mark.slow
NOW = T0 + dt.timedelta(days=10)


def _report(tmp_path, config=None):  # type: ignore[no-untyped-def]
    con = build_fairness_lake(tmp_path / "lake", config=config)
    report = assemble_report(con, "della", IsoWeek(2024, 9), ReportSettings(), NOW)
    files = write_report(report, tmp_path / "out", pdf=False)
    return report, files.html.read_text(encoding="utf-8")


def test_kg_co2e_per_account_is_its_kwh_at_the_intensity(tmp_path):
    config = AttributionConfig(emissions=CarbonIntensity(default_g_per_kwh=500.0))
    report, html = _report(tmp_path, config)
    energy = {e["account"]: e for e in report.tables["energy_by_account"].iter_rows(named=True)}

    # j1 (physics): one GPU at 400 W for 1 h = 0.4 kWh, at 500 g/kWh = 0.2 kg
    assert energy["physics"]["energy_kwh"] == pytest.approx(0.4)
    assert energy["physics"]["kg_co2e"] == pytest.approx(0.2)
    assert report.scalars["kg_co2e"] == pytest.approx(
        sum(e["energy_kwh"] * 0.5 for e in energy.values())
    )
    assert '<th class="n">kg CO2e</th>' in html
    assert (
        "at that hour&#39;s carbon intensity" in html or "at that hour's carbon intensity" in html
    )


def test_without_an_intensity_the_report_says_unknown_not_zero(tmp_path):
    report, html = _report(tmp_path)

    assert report.scalars["kg_co2e"] is None
    assert "kg CO2e unknown: no carbon intensity is configured" in html
