"""A pipeline round on a simulated lake: attribute, detect (findings and recommendations), alert."""

from __future__ import annotations

import threading

import pyarrow.dataset as pads
import pytest

from app.config import load_config
from app.service.metrics import Metrics
from app.service.pipeline import after_steps
from app.service.settings import ServiceConfig
from app.service.supervisor import Supervisor, TaskContext
from app.service.tasks import PipelineSpec, build_tasks
from collector.sim import SimConfig, simulate
from tests.infra.permissions import world_accessible
from tests.service.test_run_command import free_port
from warehouse.lake import Lake


@pytest.mark.slow
def test_a_round_attributes_detects_recommends_and_alerts(tmp_path):
    lake = tmp_path / "lake"
    simulate(SimConfig(gpus=16, days=1, seed=7), Lake.at(lake))
    (tmp_path / "g.toml").write_text("[alerts]\nmax_attempts = 1\nretry_base_s = 0.01\n")
    env = {
        "GPULEDGER_ALERTS_SMTP_PORT": str(free_port()),  # nothing listens: delivery fails
        "GPULEDGER_ALERTS_QUIET_HOURS": "",
        "GPULEDGER_ALERTS_WORKDAYS": "mon,tue,wed,thu,fri,sat,sun",
    }
    cfg = load_config(tmp_path / "g.toml", environ=env)
    steps = after_steps(cfg, cfg.section(ServiceConfig))
    assert [name for name, _ in steps] == ["detect", "alert"]
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
    # a second round finds the same problems: nothing new
    assert sup.run_once(task)
    assert metrics.get("gpuledger_findings_total") == findings.num_rows


def test_steps_follow_the_service_switches(tmp_path):
    (tmp_path / "g.toml").write_text("[service]\ndetect = false\nalert = false\n")
    cfg = load_config(tmp_path / "g.toml", environ={})
    assert after_steps(cfg, cfg.section(ServiceConfig)) == ()
    _ = TaskContext  # the steps take (lake, TaskContext)
