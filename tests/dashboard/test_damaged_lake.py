"""A lake file damaged inside a data page (its footer intact, so the dashboard opens) is one
st.error naming the file on the page that reads it, not a Streamlit traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.bench.dashboard_timing import PAGES
from tests.damage import flip_data_page
from warehouse import layout

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"


def damaged_copy(lake: Path, tmp_path: Path, table: str, column: str | None) -> tuple[Path, Path]:
    """A copy of `lake` whose largest `table` file has `column`'s data pages damaged (None:
    the file cut short, footer and all)."""
    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    bad = max(layout.table_files(copy, table), key=lambda p: p.stat().st_size)
    if column is None:
        bad.write_bytes(bad.read_bytes()[:200])
    else:
        flip_data_page(bad, column)
    return copy, bad


@pytest.mark.parametrize("column", ["gpus_allocated", None], ids=["data-page", "cut-short"])
def test_a_damaged_file_is_one_error_naming_it(plain_lake, tmp_path, monkeypatch, column):
    lake, bad = damaged_copy(plain_lake, tmp_path, "cluster_occupancy", column)
    monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.switch_page(PAGES["overview"])
    at.run()

    assert not at.exception, at.exception
    [error] = at.error
    assert f"The lake file {str(bad)!r} is not a readable Parquet file" in error.value
    assert "move it out of the lake" in error.value


def test_pages_that_do_not_read_the_damaged_file_still_render(plain_lake, tmp_path, monkeypatch):
    lake, _ = damaged_copy(plain_lake, tmp_path, "cluster_occupancy", "gpus_allocated")
    monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.switch_page(PAGES["jobs"])
    at.run()

    assert not at.exception, at.exception
    assert not at.error
    assert at.dataframe
