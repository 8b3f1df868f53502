"""The application throughput helper: counters, the Prometheus endpoint, spool records."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from collector import throughput
from collector.sources.spool import Spool
from collector.throughput import ThroughputReporter, job_id_from_environment, render_prometheus
from warehouse.lake import Lake

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"SLURM_JOB_ID": "1401", "SLURM_ARRAY_JOB_ID": "1400", "SLURM_ARRAY_TASK_ID": "1"},
            "1400_1",
        ),
        ({"SLURM_JOB_ID": "1234"}, "1234"),
        ({"POD_NAMESPACE": "ml", "POD_NAME": "train-0"}, "ml/train-0"),
        ({"POD_NAME": "train-0"}, "train-0"),
        ({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "train-0"}, "train-0"),
        ({"HOSTNAME": "g001"}, None),  # a host name outside Kubernetes is no job
        ({}, None),
    ],
)
def test_the_job_id_comes_from_the_scheduler_environment(env, expected):
    assert job_id_from_environment(env) == expected


def test_reports_add_up_per_job():
    reporter = ThroughputReporter("1234")

    reporter.report(samples=32, tokens=4096, steps=1)
    reporter.report(samples=32, tokens=4096, steps=1)
    reporter.report(samples=8, job_id="99")

    assert reporter.totals() == {
        "1234": {"samples": 64.0, "tokens": 8192.0, "steps": 2.0},
        "99": {"samples": 8.0},
    }


def test_counters_never_go_down():
    with pytest.raises(ValueError, match=r"samples=-1: counters only go up"):
        ThroughputReporter("1").report(samples=-1)


def test_the_parameter_count_is_a_gauge_kept_per_job_and_spooled_with_the_counters(tmp_path):
    spool = Spool(tmp_path / "spool")
    spool.open_inbox()
    reporter = ThroughputReporter("1234", spool=spool.root, node="g001", reporter="rank0")

    reporter.report(tokens=1024, params=125_000_000)
    reporter.report(tokens=1024, params=350_000_000)  # the latest wins; it does not add up
    reporter.report(tokens=10, job_id="99")  # another job: no parameter count
    written = reporter.flush()

    assert reporter.params() == {"1234": 350_000_000}
    assert 'gpuledger_app_model_params{job_id="1234"} 350000000\n' in reporter.render()
    assert written is not None
    lines = {row["job_id"]: row for row in map(json.loads, written.read_text().splitlines())}
    assert (lines["1234"]["model_params"], lines["1234"]["tokens_total"]) == (350_000_000, 2048)
    assert lines["99"]["model_params"] is None


@pytest.mark.parametrize("params", [0, -5, 1.5e9, True])
def test_a_parameter_count_must_be_a_positive_int(params):
    with pytest.raises(ValueError, match="expected the model's parameter count"):
        ThroughputReporter("1").report(tokens=1, params=params)


def test_prometheus_text_names_each_counter_once_with_escaped_job_labels():
    text = render_prometheus(
        {"1234": {"samples": 64.0, "steps": 2.0}, 'we"ird\\job': {"samples": 0.5}}
    )

    assert text == (
        "# HELP gpuledger_app_samples_total Samples (examples) processed, as reported by the "
        "application.\n"
        "# TYPE gpuledger_app_samples_total counter\n"
        'gpuledger_app_samples_total{job_id="1234"} 64\n'
        'gpuledger_app_samples_total{job_id="we\\"ird\\\\job"} 0.5\n'
        "# HELP gpuledger_app_steps_total Optimizer steps taken, as reported by the application.\n"
        "# TYPE gpuledger_app_steps_total counter\n"
        'gpuledger_app_steps_total{job_id="1234"} 2\n'
    )


def test_the_endpoint_serves_current_counters_on_localhost():
    reporter = ThroughputReporter("1234")
    server = reporter.serve(0)
    try:
        assert server.server.server_address[0] == "127.0.0.1"
        reporter.report(samples=10, tokens=100)
        with urllib.request.urlopen(server.url, timeout=5) as response:
            first = response.read().decode()
            content_type = response.headers["Content-Type"]
        reporter.report(samples=5)
        with urllib.request.urlopen(server.url, timeout=5) as response:
            second = response.read().decode()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/other", timeout=5)
        missing.value.close()
    finally:
        reporter.close()

    assert content_type.startswith("text/plain; version=0.0.4")
    assert 'gpuledger_app_samples_total{job_id="1234"} 10\n' in first
    assert 'gpuledger_app_tokens_total{job_id="1234"} 100\n' in first
    assert 'gpuledger_app_samples_total{job_id="1234"} 15\n' in second
    assert missing.value.code == 404


def test_totals_are_spooled_every_interval_and_landed_by_the_agent(tmp_path, read_lake, t0):
    spool = Spool(tmp_path / "spool")
    spool.open_inbox()
    now = [t0.timestamp()]
    reporter = ThroughputReporter(
        "1234", spool=spool.root, node="g001", reporter="rank0", clock=lambda: now[0]
    )

    reporter.report(samples=32, steps=1)  # not due yet: nothing written
    assert list((spool.root / "app_throughput").iterdir()) == []
    now[0] += 31
    reporter.report(samples=32, steps=1)  # due: one file with the totals so far
    now[0] += 5
    reporter.report(samples=32, steps=1)
    reporter.close()  # at exit: the rest
    result = spool.land(Lake.at(tmp_path / "lake"), "della")

    assert result.files == 2
    rows = read_lake(tmp_path / "lake", "app_throughput").sort_by("ts").to_pylist()
    s = dt.timedelta(seconds=1)
    assert [(r["ts"], r["samples_total"], r["steps_total"]) for r in rows] == [
        (t0 + 31 * s, 64.0, 2.0),
        (t0 + 36 * s, 96.0, 3.0),
    ]
    assert {(r["cluster"], r["job_id"], r["node"], r["reporter"], r["source"]) for r in rows} == {
        ("della", "1234", "g001", "rank0", "app")
    }
    assert rows[0]["tokens_total"] is None  # never reported: unknown, not 0


def test_a_failed_flush_never_raises_and_the_totals_stay_due(tmp_path, caplog):
    reporter = ThroughputReporter("1234", spool=tmp_path / "no-agent-here", node="g001")
    reporter.report(samples=1)

    assert reporter.flush() is None
    assert "cannot write" in caplog.text
    (tmp_path / "no-agent-here" / "app_throughput").mkdir(parents=True)
    written = reporter.flush()
    assert written is not None
    assert json.loads(written.read_text())["samples_total"] == 1.0


def test_the_module_functions_use_one_reporter_built_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setattr(throughput, "_default", None)
    monkeypatch.setenv("SLURM_JOB_ID", "777")
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    monkeypatch.setenv("GPULEDGER_SPOOL", str(tmp_path))
    (tmp_path / "app_throughput").mkdir()

    throughput.report(tokens=2048)
    server = throughput.serve(0)
    try:
        with urllib.request.urlopen(server.url, timeout=5) as response:
            text = response.read().decode()
    finally:
        server.close()
    written = throughput.flush()

    assert 'gpuledger_app_tokens_total{job_id="777"} 2048' in text
    assert written is not None and json.loads(written.read_text())["job_id"] == "777"


def test_the_helper_imports_only_the_standard_library():
    code = (
        "import json, sys\n"
        "import collector.throughput\n"
        "ours = {'collector'}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules}"
        " - set(sys.stdlib_module_names) - ours - {'__main__'})))\n"
    )

    done = subprocess.run(
        [sys.executable, "-S", "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
