"""The steps after attribution in each pipeline round: detect, then alert (when enabled), then
retention (`[retention]`, app/retention/prune.py): the raw samples of old days retire into their
derived partitions once detect has read them, old findings and alert deliveries go.

Detect is `app.pipeline.detect` with the same `PipelineConfig` the round attributes with
(`pipeline_config(cfg)`), so `gpuledger run` and `gpuledger attribute`/`detect` with the same
file produce the same marts and findings. The policy recommendations, which replay weeks of
jobs, are replayed in the first round and then every `service.recommend_every_s` (an hour by
default); the rounds between detect without them and the last ones stay.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING

from app.config import Config
from app.retention.settings import RetentionConfig
from app.service.settings import ServiceConfig
from app.service.supervisor import TaskContext
from app.service.tasks import Step
from warehouse.lake import Lake

if TYPE_CHECKING:
    from app.pipeline import DetectOutcome, PipelineConfig

__all__ = ["after_steps"]


def _detect_step(
    config: PipelineConfig,
    clock: Callable[[], dt.datetime],
    recommend_every_s: float,
    detect: Callable[..., DetectOutcome] | None = None,
) -> Step:
    """Detect in each round; replay the recommendations in the first round and then in the
    first round `recommend_every_s` after the last that did (one that failed is tried again
    the next round). `detect`: app.pipeline.detect unless given."""
    replayed: list[dt.datetime] = []  # when this service last replayed them

    def step(lake: Lake, ctx: TaskContext) -> None:
        if not lake.table_dir("job_usage").is_dir():
            return  # no jobs attributed yet: nothing to judge
        from app.pipeline import detect as pipeline_detect

        run = detect or pipeline_detect
        now = clock()
        due = not replayed or (now - replayed[0]).total_seconds() >= recommend_every_s
        outcome = run(lake, config, now, recommend=due)
        if due:
            replayed[:] = [now]
        ctx.metrics.inc("gpuledger_findings_total", outcome.new)

    return step


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _alert_step(cfg: Config) -> Step:
    from app.alerts.settings import AlertsConfig

    alerts = cfg.section(AlertsConfig)

    def step(lake: Lake, ctx: TaskContext) -> None:
        from app.alerts.runner import run_cycle

        if not lake.table_dir("findings").is_dir():
            return
        report = run_cycle(lake, alerts)
        ctx.metrics.inc("gpuledger_alerts_sent_total", len(report.delivery.delivered))
        # undelivered messages stay in the ledger and are retried next round; those a channel
        # found down left untried are no delivery that failed (each round added them again)
        d = report.delivery
        ctx.metrics.inc(
            "gpuledger_alerts_failed_total", len(d.failed) + len(d.retrying) - len(d.untried)
        )

    return step


def after_steps(
    cfg: Config, service: ServiceConfig, clock: Callable[[], dt.datetime] = _utc_now
) -> tuple[tuple[str, Step], ...]:
    """The (name, step) pairs the pipeline runs after attributing, as configured."""
    from app.pipeline import pipeline_config

    steps: list[tuple[str, Step]] = []
    if service.detect:
        detect = _detect_step(pipeline_config(cfg), clock, service.recommend_every_s)
        steps.append(("detect", detect))
    if service.alert:
        steps.append(("alert", _alert_step(cfg)))
    retention = cfg.section(RetentionConfig)
    if retention.raw_days or retention.findings_days or retention.alert_ledger_days:
        steps.append(("prune", _prune_step(pipeline_config(cfg), retention, clock)))
    return tuple(steps)


def _prune_step(
    config: PipelineConfig, retention: RetentionConfig, clock: Callable[[], dt.datetime]
) -> Step:
    def step(lake: Lake, ctx: TaskContext) -> None:
        from app.retention.prune import prune_lake

        outcome = prune_lake(lake, config.attribution, retention, clock=clock)
        if outcome.raw is not None:
            ctx.metrics.inc("gpuledger_raw_days_pruned_total", len(outcome.raw.prune))

    return step
