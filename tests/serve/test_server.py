"""The FastAPI application and its cache: /metrics from memory, /healthz, mounted routers,
rereading only when the lake changed, and a failed reading that keeps the last figures."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import polars as pl
import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient

from app.api.auth import managers_only
from app.serve.cache import MetricsCache, lake_state
from app.serve.figures import QUERIES, Figures
from app.serve.server import EXPOSITION_TYPE, create_app
from app.serve.settings import ServeSettings
from tests.api import lake as A
from warehouse.errors import DamagedFile
from warehouse.lake import Lake


def figures(clusters: int) -> Figures:
    """Figures with `clusters` recommendation rows (enough to tell readings apart)."""
    frames = {key: pl.DataFrame() for key in QUERIES}
    frames["recommendations"] = pl.DataFrame(
        {
            "cluster": [f"c{i}" for i in range(clusters)],
            "kind": ["time_limit"] * clusters,
            "recommendations": [1] * clusters,
            "expected_gain_gpu_h": [0.0] * clusters,
        }
    )
    return Figures(**frames)


class Reader:
    """A reader seam: counts its calls, fails when told to."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False

    def __call__(self, lake: Path, settings: ServeSettings) -> Figures:
        self.calls += 1
        if self.fail:
            raise OSError("disk gone")
        return figures(self.calls)


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    root = tmp_path / "lake"
    (root / "jobs" / "cluster=a").mkdir(parents=True)
    return root


def touch_lake(lake: Path, name: str) -> None:
    folder = lake / "jobs" / "cluster=a"
    (folder / name).write_bytes(b"")
    stat = folder.stat()
    os.utime(folder, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_figures_are_reread_only_when_the_lake_changed(lake):
    reader = Reader()
    cache = MetricsCache(Lake.at(lake), ServeSettings(), reader=reader, clock=lambda: 1234.5)

    assert cache.refresh(force=True)
    assert not cache.refresh()
    assert not cache.refresh()
    touch_lake(lake, "part-1.parquet")
    assert cache.refresh()

    assert reader.calls == 2
    assert 'gpuledger_recommendations{cluster="c1",kind="time_limit"} 1' in cache.text
    assert "gpuledger_serve_computed_timestamp_seconds 1234.5" in cache.text


def test_a_failed_reading_keeps_the_last_figures_and_says_so(lake):
    reader = Reader()
    cache = MetricsCache(Lake.at(lake), ServeSettings(), reader=reader)
    cache.refresh(force=True)
    reader.fail = True
    touch_lake(lake, "part-1.parquet")

    assert not cache.refresh()

    assert 'gpuledger_recommendations{cluster="c0",kind="time_limit"} 1' in cache.text
    assert "gpuledger_serve_refresh_failed 1" in cache.text
    reader.fail = False
    assert cache.refresh()  # the state was not recorded: the next look reads again
    assert "gpuledger_serve_refresh_failed 0" in cache.text


def test_a_damaged_file_is_one_line_logged_once_and_said_by_healthz(lake, caplog):
    """A damaged lake file was a 40-line traceback at every look (every refresh_s) while
    /healthz said "starting" for ever: now one line naming it, once, until it is mended."""
    damaged = lake / "jobs" / "cluster=a" / "part-0.parquet"

    def reader(_lake: Lake, _settings: ServeSettings) -> Figures:
        if damaged.exists():
            raise DamagedFile(damaged, "Parquet magic bytes not found")
        return figures(1)

    damaged.write_bytes(b"PAR")
    cache = MetricsCache(Lake.at(lake), ServeSettings(refresh_s=3600), reader=reader)
    app = create_app(Lake.at(lake), ServeSettings(), cache=cache)
    with caplog.at_level(logging.INFO, logger="app.serve.cache"), TestClient(app) as client:
        for _ in range(3):
            cache.refresh(force=True)
        failing = client.get("/healthz")
        damaged.unlink()
        cache.refresh(force=True)
        mended = client.get("/healthz")

    assert failing.status_code == 503
    assert failing.json() == {
        "status": "failing",
        "lake": str(lake),
        "error": str(DamagedFile(damaged, "Parquet magic bytes not found")),
    }
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None and str(damaged) in errors[0].message
    assert (mended.status_code, mended.json()["status"]) == (200, "ok")


def test_a_failed_reading_after_a_good_one_is_stale_in_healthz(lake):
    reader = Reader()
    cache = MetricsCache(Lake.at(lake), ServeSettings(refresh_s=3600), reader=reader)
    app = create_app(Lake.at(lake), ServeSettings(), cache=cache)
    with TestClient(app) as client:
        reader.fail = True
        cache.refresh(force=True)
        health = client.get("/healthz")

    assert health.status_code == 200
    assert health.json() == {"status": "stale", "lake": str(lake), "error": "disk gone"}


def test_beside_the_api_metrics_answer_a_manager_only(lake, tmp_path):
    """/metrics names every running job's user and account: where the API lets each user see
    only their own, it must not hand everyone all of them (it did, without a token)."""
    cache = MetricsCache(Lake.at(lake), ServeSettings(refresh_s=3600), reader=Reader())
    guard = managers_only(A.settings(tmp_path))
    app = create_app(Lake.at(lake), ServeSettings(), cache=cache, guard=guard)
    with TestClient(app) as client:
        anyone = client.get("/metrics")
        user = client.get("/metrics", headers=A.bearer(A.ALICE))
        manager = client.get("/metrics", headers=A.bearer(A.BOSS))
        health = client.get("/healthz")

    assert (anyone.status_code, anyone.text) == (
        401,
        "sign in: send 'Authorization: Bearer <token>'\n",
    )
    assert anyone.headers["www-authenticate"].startswith("Bearer")
    assert (user.status_code, user.text) == (
        403,
        "alice is not a manager: /metrics holds every user's jobs\n",
    )
    assert manager.status_code == 200 and "# TYPE gpuledger_job_gpus gauge" in manager.text
    assert health.status_code == 200  # (says nothing of the lake's jobs)


def test_beside_the_api_healthz_tells_the_lake_and_its_error_to_a_manager_only(lake, tmp_path):
    """The lake's path and the reading's error (file names, the engine's message) were told to
    whoever reached the port, where /metrics itself asked for a manager."""
    reader = Reader()
    cache = MetricsCache(Lake.at(lake), ServeSettings(refresh_s=3600), reader=reader)
    guard = managers_only(A.settings(tmp_path))
    app = create_app(Lake.at(lake), ServeSettings(), cache=cache, guard=guard)
    with TestClient(app) as client:
        reader.fail = True
        cache.refresh(force=True)
        anyone = client.get("/healthz")
        user = client.get("/healthz", headers=A.bearer(A.ALICE))
        manager = client.get("/healthz", headers=A.bearer(A.BOSS))

    assert (anyone.status_code, anyone.json()) == (200, {"status": "stale"})
    assert user.json() == {"status": "stale"}
    assert manager.json() == {"status": "stale", "lake": str(lake), "error": "disk gone"}


def test_lake_state_ignores_the_state_folder(lake):
    before = lake_state(Lake.at(lake))
    (lake / "_state").mkdir()
    (lake / "_state" / "service.json").write_text("{}")

    assert lake_state(Lake.at(lake)) == before
    assert lake_state(Lake.at(lake / "missing")) == ()


def test_the_app_serves_metrics_health_and_mounted_routers(lake):
    reader = Reader()
    cache = MetricsCache(Lake.at(lake), ServeSettings(refresh_s=3600), reader=reader)
    api = APIRouter(prefix="/api/v1")

    @api.get("/ping")
    def ping() -> dict[str, str]:
        return {"pong": "yes"}

    app = create_app(Lake.at(lake), ServeSettings(), routers=[api], cache=cache)
    before = TestClient(app)  # not started: the figures were not read yet
    assert before.get("/healthz").status_code == 503

    with TestClient(app) as client:  # runs the lifespan: reads the figures, then serves
        metrics = client.get("/metrics")
        health = client.get("/healthz")
        ping_reply = client.get("/api/v1/ping")
        # a probe that checks with HEAD (a load balancer's) got 405
        heads = [client.head(path).status_code for path in ("/metrics", "/healthz")]

    assert metrics.status_code == 200
    assert metrics.headers["content-type"] == EXPOSITION_TYPE
    assert "# TYPE gpuledger_job_gpus gauge" in metrics.text
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert ping_reply.json() == {"pong": "yes"}
    assert heads == [200, 200]
    assert reader.calls == 1


def test_a_reading_that_failed_while_a_rebuild_replaced_files_is_read_again(tmp_path):
    """`attribute` replacing the marts under a reading failed it: refresh_failed 1, and
    /healthz "stale", at every rebuild. It is read again once the files settle."""
    import duckdb

    from tests.marts import rows as r

    root = tmp_path / "lake"
    r.land(root, "jobs", [r.job("j1", 0, 600)])
    calls = []

    def reader(lake: Path, settings: ServeSettings) -> Figures:
        calls.append(1)
        if len(calls) == 1:
            r.land(root, "jobs", [r.job("j1", 0, 900)], batch_id="rebuilt")
            raise duckdb.Error("TProtocolException: Invalid data")
        return figures(1)

    cache = MetricsCache(Lake.at(root), ServeSettings(), reader=reader)

    assert cache.refresh(force=True)
    assert len(calls) == 2 and cache.error is None
    assert "gpuledger_serve_refresh_failed 0" in cache.text
