"""The API served by a real uvicorn on 127.0.0.1 and read with urllib, as a widget would; and
the lake reader seeing files landed after it opened the lake."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest
import uvicorn

from app.api.reader import LakeReader
from app.api.server import create_api_app
from tests.api import lake as L
from tests.marts import rows as r
from warehouse.lake import Lake


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return L.shared(tmp_path_factory)


@pytest.fixture
def base_url(root, tmp_path):
    reader = LakeReader(Lake.at(root))
    reader.warm()
    config = uvicorn.Config(
        create_api_app(Lake.at(root), L.settings(tmp_path), reader=reader),
        host="127.0.0.1",
        port=free_port(),
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{config.port}"
    server.should_exit = True
    thread.join(timeout=10)


def get(url: str, token: str | None = None) -> tuple[int, dict]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as f:
            return f.status, json.loads(f.read())
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read())


def test_a_real_server_answers_with_json(base_url):
    status, report = get(f"{base_url}/api/v1/jobs/della/a1", L.ALICE)
    assert status == 200 and report["job"]["job_id"] == "a1"

    assert get(f"{base_url}/api/v1/jobs/della/b1", L.ALICE) == (
        404,
        {"error": "no job 'b1' of alice's on 'della'", "status": 404},
    )
    status, body = get(f"{base_url}/api/v1/jobs/della/b1", L.BOSS)
    assert status == 200 and body["job"]["user"] == "bob"
    status, body = get(f"{base_url}/api/v1/jobs?limit=5", "wrong-token-0123456789")
    assert status == 401 and body["status"] == 401
    status, doc = get(f"{base_url}/api/v1/openapi.json")
    assert status == 200 and "/api/v1/jobs/{cluster}/{job_id}" in doc["paths"]


def test_the_reader_sees_files_landed_after_its_refresh(tmp_path_factory):
    root = L.shared(tmp_path_factory)
    now = [0.0]
    reader = LakeReader(Lake.at(root), refresh_s=60.0, clock=lambda: now[0])

    def job_ids() -> list[str]:
        frame = reader.run(
            "api/jobs_recent",
            cluster=None,
            user=None,
            start=r.at(0),
            end=r.at(100 * L.H),
            limit=10,
        )
        return sorted(frame.get_column("job_id").to_list())

    assert job_ids() == ["a1", "a2", "b1"]
    now[0] = 61.0  # stale, but no file changed: the same connection, the caches kept
    job_ids()
    deadline = time.monotonic() + 30
    while reader.refreshing:
        assert time.monotonic() < deadline, "the lake's files were not checked"
        time.sleep(0.05)
    assert reader.generation == 1
    r.land(root, "jobs", [r.job("c1", 4 * L.H, 5 * L.H, user="carol")], batch_id="later")
    assert job_ids() == ["a1", "a2", "b1"]  # within refresh_s: the lake as opened
    now[0] = 122.0
    job_ids()  # stale: this read starts the reopening in the background
    deadline = time.monotonic() + 30
    while reader.generation < 2:
        assert time.monotonic() < deadline, "the lake was not reopened"
        time.sleep(0.05)
    assert job_ids() == ["a1", "a2", "b1", "c1"]


def test_a_read_that_fails_on_a_file_replaced_since_the_lake_opened_is_read_again(tmp_path):
    """`attribute` renames a rebuilt mart over the file the open views list: DuckDB then reads
    it with the old footer ("TProtocolException: Invalid data"), and the API answered 500 (4 of
    138 requests over two rebuilds). The lake is reopened and the read run again; an error on
    the files as they were opened is the request's, raised at once."""
    import duckdb

    root = L.build(tmp_path / "lake")
    reader = LakeReader(Lake.at(root))
    calls = []

    def count(cur: duckdb.DuckDBPyConnection) -> int:
        calls.append(reader.generation)
        if len(calls) == 1:
            r.land(root, "jobs", [r.job("c1", 4 * L.H, 5 * L.H)], batch_id="rebuilt")
            raise duckdb.Error("TProtocolException: Invalid data")
        (n,) = cur.execute("SELECT count(*) FROM jobs_latest").fetchone() or (0,)
        return int(n)

    assert reader.read(count) == 4
    assert calls == [1, 2]  # the second read through the lake reopened

    def broken(cur: duckdb.DuckDBPyConnection) -> None:
        calls.append(reader.generation)
        raise duckdb.Error("Binder Error: a query of ours is wrong")

    calls.clear()
    # (files landed since the opening, as on any live lake: the request's own error is raised)
    r.land(root, "jobs", [r.job("c2", 5 * L.H, 6 * L.H)], batch_id="later")
    with pytest.raises(duckdb.Error, match="Binder Error"):
        reader.read(broken)
    assert calls == [2]
