"""The bench's page timer times every page of the dashboard, with cold caches."""

from __future__ import annotations

import pytest

from app.bench.dashboard_timing import PAGES, time_pages
from warehouse.lake import Lake


@pytest.mark.slow
def test_time_pages_times_every_page(plain_lake, capfd):
    timings = time_pages(Lake.at(plain_lake))

    assert list(timings) == list(PAGES)
    assert all(0 < seconds < 60 for seconds in timings.values())
    # Streamlit's warnings outside a server (one per cached function and page) are not printed
    err = capfd.readouterr().err
    assert "No runtime found" not in err and "missing ScriptRunContext" not in err
