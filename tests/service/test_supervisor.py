"""The supervised loop: isolation of failing tasks, backoff, graceful stop, metrics, status."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner

from app.cli import cli
from app.service.endpoint import serve_endpoint
from app.service.metrics import Metrics
from app.service.status import read_status, render_status, write_status
from app.service.supervisor import Supervisor, Task, TaskContext, TaskState
from warehouse.lake import Lake


def test_metrics_render_in_exposition_format_and_reject_undeclared_names():
    m = Metrics()
    m.inc("gpuledger_samples_landed_total", 5, source="slurm:a")
    m.inc("gpuledger_samples_landed_total", 2, source="slurm:a")
    m.set("gpuledger_lag_seconds", 12.5, cluster='we"ird')
    text = m.render()
    assert "# TYPE gpuledger_samples_landed_total counter" in text
    assert 'gpuledger_samples_landed_total{source="slurm:a"} 7' in text
    assert 'gpuledger_lag_seconds{cluster="we\\"ird"} 12.5' in text
    with pytest.raises(KeyError):
        m.inc("gpuledger_typo_total")
    with pytest.raises(ValueError):
        m.inc("gpuledger_samples_landed_total", -1)
    with pytest.raises(ValueError):
        m.set("gpuledger_samples_landed_total", 3)


def test_a_failing_task_does_not_stop_the_others_and_backs_off():
    m = Metrics()
    good_runs = []

    def good(ctx: TaskContext) -> None:
        good_runs.append(1)

    def bad(ctx: TaskContext) -> None:
        raise ConnectionError("exporter down")

    sup = Supervisor([Task("good", 0.01, good), Task("bad", 0.01, bad)], m, max_backoff_s=0.05)
    thread = threading.Thread(target=sup.run, kwargs={"join_timeout_s": 5})
    thread.start()
    time.sleep(0.6)
    sup.stop.set()
    thread.join(5)
    assert not thread.is_alive()
    assert len(good_runs) >= 10  # kept running at its cadence
    bad_state = sup.states["bad"]
    assert bad_state.consecutive_failures == bad_state.runs >= 2
    assert bad_state.runs < len(good_runs)  # backed off
    assert bad_state.last_error == "ConnectionError: exporter down"
    assert m.get("gpuledger_source_errors_total", source="bad") == bad_state.failures
    assert m.get("gpuledger_task_runs_total", task="good", outcome="ok") == len(good_runs)
    assert m.get("gpuledger_up") == 0
    assert not sup.healthy(max_failures=2)


def test_backoff_doubles_per_failure_and_is_capped():
    sup = Supervisor([Task("t", 10, lambda ctx: None)], Metrics(), max_backoff_s=60)
    assert sup.delay_after(sup.tasks[0]) == 10
    sup.states["t"].consecutive_failures = 1
    assert sup.delay_after(sup.tasks[0]) == 20
    sup.states["t"].consecutive_failures = 2
    assert sup.delay_after(sup.tasks[0]) == 40
    sup.states["t"].consecutive_failures = 9
    assert sup.delay_after(sup.tasks[0]) == 60


def test_stop_lets_the_running_step_finish():
    finished = []
    started = threading.Event()

    def slow(ctx: TaskContext) -> None:
        started.set()
        time.sleep(0.3)  # a step in the middle of landing a batch
        finished.append(True)

    sup = Supervisor([Task("slow", 100, slow)], Metrics())
    thread = threading.Thread(target=sup.run)
    thread.start()
    started.wait(5)
    sup.stop.set()
    thread.join(5)
    assert finished == [True]


def test_endpoint_serves_metrics_and_health():
    m = Metrics()
    m.inc("gpuledger_alerts_sent_total", 3)
    state = {"ok": True}
    server = serve_endpoint(m, lambda: (state["ok"], {"tasks": 1}), "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as r:
            assert "gpuledger_alerts_sent_total 3" in r.read().decode()
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as r:
            assert json.loads(r.read()) == {"status": "ok", "tasks": 1}
        state["ok"] = False
        with pytest.raises(urllib.error.HTTPError) as failing:
            urllib.request.urlopen(f"{base}/healthz", timeout=5)
        assert failing.value.code == 503
        failing.value.close()
    finally:
        server.shutdown()
        server.server_close()


def test_status_file_round_trip_and_summary(tmp_path):
    m = Metrics()
    m.set("gpuledger_up", 1)
    m.inc("gpuledger_samples_landed_total", 1234, source="prometheus:a")
    m.set("gpuledger_lag_seconds", 75, cluster="a")
    sup = Supervisor([Task("prometheus:a", 1, lambda ctx: None)], m)
    sup.states["prometheus:a"].runs = 4
    sup.states["prometheus:a"].failures = 1
    sup.states["prometheus:a"].last_error = "PrometheusUnavailable: refused"
    sup.states["prometheus:a"].last_success = 1000.0
    write_status(Lake.at(tmp_path), sup.states, m, now=1010.0, pid=os.getpid())
    status = read_status(Lake.at(tmp_path))
    text, healthy = render_status(status, now=1015.0)
    assert healthy
    assert f"running (pid {os.getpid()})" in text
    assert "(recovered) PrometheusUnavailable: refused" in text
    assert "1,234" in text and "75 s" in text
    assert oct((tmp_path / "_state" / "service.json").stat().st_mode & 0o777) == "0o640"
    assert render_status(None, 0)[1] is False


def test_a_service_killed_without_stopping_is_down_not_running(tmp_path):
    # SIGKILL leaves gpuledger_up at 1 in the file: `status` said "running" and --check passed
    m = Metrics()
    m.set("gpuledger_up", 1)
    sup = Supervisor([Task("pipeline", 60, lambda ctx: None)], m)
    gone = subprocess.Popen(["true"])
    gone.wait()
    write_status(Lake.at(tmp_path), sup.states, m, now=1010.0, pid=gone.pid)

    text, healthy = render_status(read_status(Lake.at(tmp_path)), now=1015.0)

    assert not healthy
    assert text.startswith(
        f"service: DOWN: its process is gone without stopping (killed?) (pid {gone.pid})"
    )


def test_a_service_whose_tasks_are_overdue_is_unhealthy(tmp_path):
    """A frozen service (SIGSTOP) or one that cannot write its status file (a read-only lake)
    leaves the file as it was: every task's next step long past. `status --check` said
    healthy; /healthz did not answer, or said 503."""
    m = Metrics()
    m.set("gpuledger_up", 1)
    sup = Supervisor([Task("pipeline", 60, lambda ctx: None), Task("dcgm", 15, lambda c: None)], m)
    sup.states["pipeline"].next_run = 1060.0
    sup.states["dcgm"].next_run = 1015.0
    write_status(Lake.at(tmp_path), sup.states, m, now=1010.0, pid=os.getpid())
    status = read_status(Lake.at(tmp_path))

    # (3 cadences late, and at least a minute: a step due and not yet run is not a fault)
    assert render_status(status, now=1060.0)[1]
    text, healthy = render_status(status, now=1076.0)

    assert not healthy
    [line] = [line for line in text.splitlines() if line.startswith("dcgm")]
    assert "OVERDUE: due 61 s ago, not run (frozen, or the status file cannot be written)" in line
    assert not any(line.startswith("pipeline") and "OVERDUE" in line for line in text.splitlines())


@pytest.mark.parametrize(
    "body",
    [
        '{"written_at": 1010.0, "tasks": {}',  # cut short
        "",
        "[1, 2]",
        '{"tasks": {}}',  # no written_at
        '{"written_at": 1010.0, "tasks": []}',
        '{"written_at": 1010.0, "tasks": {"a": {"consecutive_failures": null}}}',
        '{"written_at": 1010.0, "tasks": {}, "metrics": {"gpuledger_up": {"value": 1}}}',
    ],
)
def test_a_status_file_this_version_cannot_read_is_one_line(tmp_path, body):
    (tmp_path / "_state").mkdir()
    (tmp_path / "_state" / "service.json").write_text(body)

    result = CliRunner().invoke(cli, ["status", "--lake", str(tmp_path)])

    assert result.exit_code == 1
    assert "not a status file this version can read" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_a_status_file_that_cannot_be_written_is_said_once_per_reason(caplog):
    # a read-only lake: every step's write failed with a message naming its own temporary
    # file, and each logged a traceback
    tries = iter(range(100))

    def record(states: dict[str, TaskState]) -> None:
        raise PermissionError(13, "Permission denied", f".service.json.{next(tries)}.tmp")

    sup = Supervisor([Task("pipeline", 60, lambda ctx: None)], Metrics(), on_change=record)
    with caplog.at_level("ERROR"):
        for _ in range(3):
            sup.run_once(sup.tasks[0])

    said = [r for r in caplog.records if "could not record the service status" in r.message]
    assert len(said) == 1 and said[0].exc_info is None


def test_status_reads_the_lake_alone_of_the_configuration(tmp_path):
    # a monitoring user (nagios, root) running `status --check` was refused over the service
    # user's SMTP password file, another section's secret it cannot read
    lake = tmp_path / "lake"
    (lake / "_state").mkdir(parents=True)
    config = tmp_path / "gpuledger.toml"
    config.write_text(
        f'lake = "{lake}"\n[alerts]\nsmtp_password_file = "{tmp_path / "not-mine"}"\n'
    )

    result = CliRunner().invoke(cli, ["status", "--config", str(config)], env={})

    assert "never run on this lake" in result.output, result.output


def test_a_library_setting_its_own_stop_event_does_not_stop_the_service():
    seen = []

    def step(ctx: TaskContext) -> None:
        with ctx.linked_stop() as stop:
            stop.set()  # e.g. the Prometheus puller ending its workers after a failure
        seen.append(ctx.stop.is_set())
        raise ConnectionError("down")

    sup = Supervisor([Task("t", 0.01, step)], Metrics(), max_backoff_s=0.02)
    thread = threading.Thread(target=sup.run)
    thread.start()
    # the step runs again after its failure (a loaded machine may take a while to get there)
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert thread.is_alive() and not sup.stop.is_set()
    sup.stop.set()
    thread.join(5)
    assert len(seen) >= 2 and seen[0] is False


def test_the_linked_stop_follows_the_service_stop():
    ctx = TaskContext(Metrics(), threading.Event())
    with ctx.linked_stop() as stop:
        assert not stop.is_set()
        ctx.stop.set()
        assert stop.wait(2)
