"""A hung step is noticed (issue #22, MEDIUM 7), and a slow client cannot hold the endpoint
(LOW 10)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request

from click.testing import CliRunner

from app.cli import cli
from app.service.endpoint import serve_endpoint
from app.service.metrics import Metrics
from app.service.status import read_status, render_status, write_status
from app.service.supervisor import Supervisor, Task, TaskContext
from warehouse.lake import Lake


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _until(check, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_a_step_hung_past_its_deadline_is_reported_stuck_by_name_and_since_when(tmp_path):
    release = threading.Event()
    told_to_stop = []
    entered = []

    def hung(ctx: TaskContext) -> None:  # injected: waits on something that never answers
        entered.append(time.time())
        release.wait(30)  # ignores ctx.stop, as a call blocked in a socket would
        told_to_stop.append(ctx.stop.is_set())

    ran = []
    metrics = Metrics()
    sup = Supervisor(
        [Task("prometheus:hung", 0.1, hung), Task("pipeline", 0.05, lambda ctx: ran.append(1))],
        metrics,
        deadline_intervals=5,  # 0.5 s for the hung task
        on_change=lambda states: write_status(
            Lake.at(tmp_path), states, metrics, time.time(), os.getpid()
        ),
    )

    def health():
        return sup.healthy(), {"stuck": sup.stuck()}

    def liveness():
        return not sup.stuck(), {"stuck": sup.stuck()}

    server = serve_endpoint(metrics, health, "127.0.0.1", 0, liveness=liveness)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=sup.run)
    thread.start()
    try:
        assert _until(lambda: entered)
        assert _get(f"{base}/healthz")[0] == 200  # running, not yet past its deadline
        assert _until(lambda: not sup.healthy())
        assert list(sup.stuck()) == ["prometheus:hung"]
        assert abs(sup.stuck()["prometheus:hung"] - entered[0]) < 0.5
        for url in (f"{base}/healthz", f"{base}/healthz?live=1"):
            code, body = _get(url)
            assert code == 503 and list(body["stuck"]) == ["prometheus:hung"]
        # the watcher sets the gauge on its next look (it runs beside the health answer)
        assert _until(lambda: metrics.get("gpuledger_task_stuck", task="prometheus:hung") == 1)
        # the other task goes on meanwhile
        count = len(ran)
        assert _until(lambda: len(ran) > count + 2)
        # `gpuledger status` names it and since when, from the status file alone
        text, healthy = render_status(read_status(Lake.at(tmp_path)), now=time.time())
        assert not healthy
        (line,) = [ln for ln in text.splitlines() if ln.startswith("prometheus:hung")]
        stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime(entered[0]))
        assert "STUCK: one step running since " + stamp in line
        result = CliRunner().invoke(cli, ["status", "--lake", str(tmp_path), "--check"])
        assert result.exit_code == 1 and "STUCK" in result.output
        # once it returns, it was told to stop, and the service is healthy again
        release.set()
        assert _until(lambda: sup.healthy())
        assert told_to_stop == [True]
        assert _get(f"{base}/healthz?live=1")[0] == 200
    finally:
        release.set()
        sup.stop.set()
        thread.join(10)
        server.shutdown()
        server.server_close()


def test_a_step_stopped_at_its_deadline_is_a_failure_not_a_success():
    # a puller told to stop returns normally with part of its window: the source was counted
    # as pulled 0 s ago, and `status --check` passed while Prometheus never answered
    def gives_up(ctx: TaskContext) -> None:
        ctx.stop.wait(5)  # returns once told to stop, as the pullers do

    sup = Supervisor([Task("prometheus:silent", 0.1, gives_up)], Metrics(), deadline_intervals=2)
    watcher = threading.Thread(
        target=lambda: _until(lambda: bool(sup.stuck()) and (sup.watch() or True))
    )
    watcher.start()

    assert sup.run_once(sup.tasks[0]) is False
    watcher.join(10)
    state = sup.states["prometheus:silent"]
    assert state.last_success is None and state.consecutive_failures == 1
    assert state.last_error is not None and "stopped at its deadline" in state.last_error


def test_a_slow_step_within_its_deadline_is_not_stuck():
    sup = Supervisor([Task("slow", 1.0, lambda ctx: time.sleep(0.3))], Metrics())
    seen = []
    watcher = threading.Thread(target=lambda: [seen.append(sup.healthy()), time.sleep(0.1)])
    thread = threading.Thread(target=sup.run_once, args=(sup.tasks[0],))
    thread.start()
    watcher.start()
    thread.join(5)
    watcher.join(5)
    assert seen == [True] and sup.stuck() == {}
    assert sup.states["slow"].running_since is None and sup.states["slow"].runs == 1


def test_a_client_that_sends_nothing_neither_blocks_others_nor_holds_its_connection():
    server = serve_endpoint(Metrics(), lambda: (True, {}), "127.0.0.1", 0, client_timeout_s=0.5)
    port = server.server_address[1]
    try:
        idle = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            started = time.monotonic()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                assert r.status == 200
            assert time.monotonic() - started < 2
            # the server hangs up on the idle client after its timeout
            idle.settimeout(3)
            assert idle.recv(1024) == b""
        finally:
            idle.close()
    finally:
        server.shutdown()
        server.server_close()
