"""The Policy lab page (app/app_pages/policy_lab.py): a manager replays a proposal beside the
recorded policy and gets its calibration and the commands; anyone else is turned away."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
PAGE = "app_pages/policy_lab.py"
BOSS = "boss@example.org"


def open_lab(lake: Path, monkeypatch: pytest.MonkeyPatch, email: str | None, **state) -> AppTest:
    monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
    if email is not None:
        monkeypatch.setenv("GPULEDGER_DASHBOARD_MANAGERS", BOSS)
        monkeypatch.setenv("GPULEDGER_DASHBOARD_ALLOWED_DOMAINS", "example.org")
    at = AppTest.from_file(str(ENTRY), default_timeout=120)
    if email is not None:  # a verified sign-in of the site's domain, valid for years
        at.user = {"is_logged_in": True, "email": email, "email_verified": True, "exp": 4e9}
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(PAGE)
    return at.run()


def test_a_manager_replays_a_max_time_side_by_side(demo_lake, monkeypatch):
    at = open_lab(demo_lake, monkeypatch, BOSS, lab_maxtime="00:30:00", lab_partition="gpu")

    assert not at.exception
    assert at.title[0].value == "Policy lab"
    summary = at.dataframe[0].value
    assert list(summary.columns) == ["figure", "baseline", "proposal"]
    row = dict(zip(summary["figure"], summary["proposal"], strict=True))
    # a 30-minute MaxTime keeps the longer-asking jobs pending (Slurm's PartitionTimeLimit)
    assert row["jobs a new limit keeps pending"] > 0
    assert summary["proposal"][0] < summary["baseline"][0]  # fewer jobs start
    assert any("rank correlation" in m.value for m in at.markdown)
    assert "scontrol update PartitionName=gpu MaxTime=00:30:00" in at.code[0].value


def test_open_access_counts_as_a_manager_and_a_bad_setting_is_one_line(demo_lake, monkeypatch):
    at = open_lab(demo_lake, monkeypatch, None, lab_extra="bf_window=soon")

    assert not at.exception
    assert "bf_window=soon: not a number" in at.error[0].value


def test_a_non_manager_does_not_see_the_lab(demo_lake, names, monkeypatch):
    at = open_lab(demo_lake, monkeypatch, f"{names['user']}@example.org")

    assert not at.exception
    assert "for managers" in at.info[0].value
    assert not at.dataframe and not at.code
