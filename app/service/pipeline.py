"""The steps after attribution in each pipeline round: detect, then alert (when enabled)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from app.config import Config
from app.service.settings import ServiceConfig
from app.service.supervisor import TaskContext
from app.service.tasks import Step

__all__ = ["after_steps"]


def _detect(lake: Path, ctx: TaskContext) -> None:
    from app.commands.detect import detect_once

    if not (lake / "job_usage").is_dir():
        return  # no jobs attributed yet: nothing to judge
    outcome = detect_once(lake, dt.datetime.now(dt.UTC))
    ctx.metrics.inc("gpuledger_findings_total", outcome.new)


def _alert_step(cfg: Config) -> Step:
    from app.alerts.settings import AlertsConfig

    alerts = cfg.section(AlertsConfig)

    def step(lake: Path, ctx: TaskContext) -> None:
        from app.alerts.runner import run_cycle

        if not (lake / "findings").is_dir():
            return
        report = run_cycle(lake, alerts)
        ctx.metrics.inc("gpuledger_alerts_sent_total", len(report.delivery.delivered))
        # undelivered messages stay in the ledger and are retried next round
        failed = len(report.delivery.failed) + len(report.delivery.retrying)
        ctx.metrics.inc("gpuledger_alerts_failed_total", failed)

    return step


def after_steps(cfg: Config, service: ServiceConfig) -> tuple[tuple[str, Step], ...]:
    """The (name, step) pairs the pipeline runs after attributing, as configured."""
    steps: list[tuple[str, Step]] = []
    if service.detect:
        steps.append(("detect", _detect))
    if service.alert:
        steps.append(("alert", _alert_step(cfg)))
    return tuple(steps)
