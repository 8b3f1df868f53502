"""With two clusters in the lake, the sidebar offers both and the pages follow the chosen one."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from app.bench.dashboard_timing import PAGES
from collector.sim import SimConfig, simulate
from warehouse.attribution import AttributionConfig, attribute
from warehouse.connection import connect
from warehouse.lake import Lake

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"


@pytest.fixture(scope="module")
def two_clusters(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("two-clusters")
    simulate(SimConfig(cluster="alpha", gpus=8, days=1, seed=1), Lake.at(root))
    later = dt.datetime(2026, 11, 9, tzinfo=dt.UTC)
    simulate(SimConfig(cluster="beta", gpus=16, days=1, seed=2, start=later), Lake.at(root))
    attribute(connect(root), root, AttributionConfig())
    return root


@pytest.fixture(scope="module")
def lake_con(two_clusters: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """One connection over the lake for what the tests read of it."""
    with connect(two_clusters) as con:
        yield con


def jobs_of(con: duckdb.DuckDBPyConnection, cluster: str) -> set[str]:
    rows = con.sql("SELECT job_id FROM job_usage WHERE cluster = $c", params={"c": cluster})
    return {str(job_id) for (job_id,) in rows.fetchall()}


@pytest.mark.parametrize("cluster", ["alpha", "beta"])
def test_the_jobs_page_shows_the_chosen_cluster_and_its_dates(
    two_clusters, lake_con, monkeypatch, cluster
):
    monkeypatch.setenv("GPULEDGER_LAKE", str(two_clusters))
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.session_state["scope_cluster"] = cluster
    at.switch_page(PAGES["jobs"])
    at.run()

    assert not at.exception
    assert at.selectbox(key="scope_cluster").options == ["alpha", "beta"]
    [table] = [d.value for d in at.dataframe if "job_name" in d.value.columns]
    # job ids repeat across clusters, so count rows too
    jobs = jobs_of(lake_con, cluster)
    assert set(table["job_id"]) == jobs
    assert len(table) == len(jobs)
    first_day = dt.date(2026, 11, 2) if cluster == "alpha" else dt.date(2026, 11, 9)
    assert at.date_input(key=f"scope_dates_{cluster}").value == (first_day, first_day)
