"""A pipeline round on a simulated lake: attribute, detect (findings and recommendations), alert,
then retention (the raw samples of days past retention.raw_days)."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading

import pyarrow.dataset as pads
import pytest

from app.config import load_config
from app.pipeline import DetectOutcome, pipeline_config
from app.service.metrics import Metrics
from app.service.pipeline import _detect_step, after_steps
from app.service.settings import ServiceConfig
from app.service.supervisor import Supervisor, TaskContext
from app.service.tasks import PipelineSpec, build_tasks
from collector.sim import SimConfig, simulate
from detectors.findings import FINDINGS_SCHEMA
from tests.infra.permissions import world_accessible
from tests.service.test_run_command import free_port
from warehouse.lake import Lake


@pytest.mark.slow
def test_a_round_attributes_detects_recommends_and_alerts(tmp_path):
    lake = tmp_path / "lake"
    simulate(SimConfig(gpus=16, days=2, seed=7), Lake.at(lake))
    (tmp_path / "g.toml").write_text(
        "[alerts]\nmax_attempts = 1\nretry_base_s = 0.01\n[retention]\nraw_days = 1\n"
    )
    env = {
        "GPULEDGER_ALERTS_SMTP_PORT": str(free_port()),  # nothing listens: delivery fails
        "GPULEDGER_ALERTS_QUIET_HOURS": "",
        "GPULEDGER_ALERTS_WORKDAYS": "mon,tue,wed,thu,fri,sat,sun",
    }
    cfg = load_config(tmp_path / "g.toml", environ=env)
    steps = after_steps(cfg, cfg.section(ServiceConfig))
    assert [name for name, _ in steps] == ["detect", "alert", "prune"]
    metrics = Metrics()
    (task,) = build_tasks(Lake.at(lake), [], PipelineSpec(60, steps))
    sup = Supervisor([task], metrics, stop=threading.Event())
    assert sup.run_once(task), sup.states["pipeline"].last_error
    findings = pads.dataset(lake / "findings", partitioning="hive").to_table()
    assert findings.num_rows > 0
    assert metrics.get("gpuledger_findings_total") == findings.num_rows
    assert (lake / "recommendations").is_dir()
    assert metrics.get("gpuledger_alerts_failed_total") > 0  # kept in the ledger, retried
    assert metrics.get("gpuledger_alerts_sent_total") == 0
    assert world_accessible(lake) == []  # the alert ledger and its lock too
    # the first day's samples retired into its derived partitions, the last day's stay
    assert metrics.get("gpuledger_raw_days_pruned_total") == 1
    assert [p.parent.name for p in Lake.at(lake).table_files("gpu_samples")] == ["date=2026-11-03"]
    assert (lake / "gpu_job_buckets" / "cluster=sim" / "date=2026-11-02").is_dir()
    # a second round finds the same problems: nothing new, nothing more to prune
    assert sup.run_once(task)
    assert metrics.get("gpuledger_findings_total") == findings.num_rows
    assert metrics.get("gpuledger_raw_days_pruned_total") == 1


def test_steps_follow_the_service_switches(tmp_path):
    (tmp_path / "g.toml").write_text("[service]\ndetect = false\nalert = false\n")
    cfg = load_config(tmp_path / "g.toml", environ={})
    assert [name for name, _ in after_steps(cfg, cfg.section(ServiceConfig))] == ["prune"]
    (tmp_path / "g.toml").write_text(
        "[service]\ndetect = false\nalert = false\n"
        "[retention]\nraw_days = 0\nfindings_days = 0\nalert_ledger_days = 0\n"
    )
    cfg = load_config(tmp_path / "g.toml", environ={})
    assert after_steps(cfg, cfg.section(ServiceConfig)) == ()
    _ = TaskContext  # the steps take (lake, TaskContext)


def test_the_recommendations_are_replayed_every_recommend_every_s(tmp_path):
    (tmp_path / "lake" / "job_usage").mkdir(parents=True)
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    now = [t0]
    asked: list[bool] = []

    def detect(lake, config, at, *, recommend):
        assert at == now[0]
        asked.append(recommend)
        if at == t0 + dt.timedelta(seconds=120) and recommend:
            raise RuntimeError("the replay failed")
        return DetectOutcome(FINDINGS_SCHEMA.empty_table(), 0, 0, 0)

    (tmp_path / "g.toml").write_text("")
    cfg = load_config(tmp_path / "g.toml", environ={})
    step = _detect_step(pipeline_config(cfg), lambda: now[0], 3600.0, detect)
    ctx = TaskContext(Metrics(), threading.Event())
    for seconds in (0, 60, 3599, 3600, 3660, 7200):
        now[0] = t0 + dt.timedelta(seconds=seconds)
        step(Lake.at(tmp_path / "lake"), ctx)
    assert asked == [True, False, False, True, False, True]
    # a round whose replay failed leaves the next one due
    asked.clear()
    step = _detect_step(pipeline_config(cfg), lambda: now[0], 60.0, detect)
    for seconds in (0, 120, 150, 180):
        now[0] = t0 + dt.timedelta(seconds=seconds)
        with contextlib.suppress(RuntimeError):
            step(Lake.at(tmp_path / "lake"), ctx)
    assert asked == [True, True, True, False]
