"""The dashboard's findings tables say which configuration produced each finding."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.bench.dashboard_timing import PAGES
from app.config import load_config
from app.pipeline import detect, pipeline_config
from warehouse.lake import Lake

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"


@pytest.mark.slow
def test_the_alerts_page_shows_each_findings_config_id(plain_lake, tmp_path, monkeypatch):
    lake = tmp_path / "lake"
    shutil.copytree(plain_lake, lake)
    (tmp_path / "g.toml").write_text("[detect.idle_job]\nidle_minutes = 45\n")
    config = pipeline_config(load_config(tmp_path / "g.toml", environ={}))
    found = detect(Lake.at(lake), config, dt.datetime(2026, 12, 1, tzinfo=dt.UTC), recommend=False)
    assert found.findings.num_rows > 0
    monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.switch_page(PAGES["alerts"])
    at.run()

    assert not at.exception, at.exception
    [feed] = [d.value for d in at.dataframe if "config_id" in d.value.columns][:1]
    assert set(feed["config_id"]) == {config.fingerprint}
