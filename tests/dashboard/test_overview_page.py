"""The dashboard's pages run on a simulated lake and explain an empty one (streamlit AppTest)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from collector.sim import SimConfig, simulate
from warehouse.attribution import AttributionConfig, attribute
from warehouse.connection import connect

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"


@pytest.fixture(scope="module")
def demo_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lake")
    simulate(SimConfig(gpus=16, days=1, seed=5), root)
    attribute(connect(root), root, AttributionConfig())
    return root


def run_app(lake: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
    return AppTest.from_file(str(ENTRY), default_timeout=60).run()


def test_overview_shows_headline_numbers_chart_and_leaderboards(demo_lake, monkeypatch):
    at = run_app(demo_lake, monkeypatch)
    assert not at.exception
    assert at.title[0].value == "GPU-hours at a glance"
    labels = [m.label for m in at.metric]
    assert labels == ["Occupancy", "Idle while allocated", "Effective GPU-hours", "Energy"]
    assert at.metric[0].value.endswith("%")
    assert len(at.dataframe) == 2
    assert at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")


def test_overview_on_an_empty_lake_says_what_to_do(tmp_path, monkeypatch):
    at = run_app(tmp_path / "nothing-here", monkeypatch)
    assert not at.exception
    assert len(at.error) == 1
    message = at.error[0].value
    assert "nothing-here" in message
    assert "gpuledger attribute" in message
