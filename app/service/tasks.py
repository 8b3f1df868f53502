"""The tasks `gpuledger run` supervises, built from plain specs (the configuration's sources).

One task per source (each collects on its own cadence and counts what it landed) and one
`pipeline` task that attributes incrementally, then runs the later steps it is given (detect,
alert) — each step on its own, so a failing detector does not hold back alerts already due.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from app.service.supervisor import Task, TaskContext
from warehouse.lake import Lake

if TYPE_CHECKING:
    from app.pipeline import PipelineConfig
    from collector.sources.prometheus.transport import PrometheusAuth

__all__ = [
    "ExporterSource",
    "KubernetesSource",
    "PipelineSpec",
    "PrometheusSource",
    "SlurmSource",
    "build_tasks",
]

Clock = Callable[[], dt.datetime]


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class PrometheusSource:
    """Pull dcgm-exporter series from Prometheus every `every_s`, from its checkpoint to now."""

    kind: ClassVar[str] = "prometheus"  # `kind` of its [[sources]] entry
    cluster: str
    url: str
    selector: str = ""
    every_s: float = 60.0
    window_s: int = 3600
    settle_s: float = 60.0
    timeout_s: float = 60.0
    columns: str = "read"  # read | all | column names separated by commas
    protocol: str = "auto"  # auto | remote-read | json

    @property
    def name(self) -> str:
        return f"prometheus:{self.cluster}"


@dataclass(frozen=True, slots=True)
class ExporterSource:
    """Scrape dcgm-exporter endpoints directly, one round every `every_s`."""

    kind: ClassVar[str] = "dcgm-exporter"  # `kind` of its [[sources]] entry
    cluster: str
    urls: tuple[str, ...]
    every_s: float = 30.0
    timeout_s: float = 10.0

    @property
    def name(self) -> str:
        return f"dcgm-exporter:{self.cluster}"


@dataclass(frozen=True, slots=True)
class SlurmSource:
    """Collect sacct/scontrol every `every_s` (each run resumes from its checkpoint)."""

    kind: ClassVar[str] = "slurm"  # `kind` of its [[sources]] entry
    cluster: str
    every_s: float = 60.0

    @property
    def name(self) -> str:
        return f"slurm:{self.cluster}"


@dataclass(frozen=True, slots=True)
class KubernetesSource:
    """Collect GPU pods and Kueue/Volcano queues every `every_s`."""

    kind: ClassVar[str] = "kubernetes"  # `kind` of its [[sources]] entry
    cluster: str
    every_s: float = 60.0
    kubeconfig: Path | None = None
    context: str | None = None
    namespaces: tuple[str, ...] = ()
    # "<namespace>=<account>": that namespace's pods belong to the account, whatever they claim
    namespace_accounts: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"kubernetes:{self.cluster}"


Step = Callable[[Lake, TaskContext], None]


@dataclass(frozen=True, slots=True)
class PipelineSpec:
    """Attribute every `every_s` with `config` (None: the built-in defaults), then each of
    `after` (e.g. detect, alert) in order."""

    every_s: float = 60.0
    after: tuple[tuple[str, Step], ...] = field(default_factory=tuple)
    config: PipelineConfig | None = None


Source = PrometheusSource | ExporterSource | SlurmSource | KubernetesSource


def _lag(ctx: TaskContext, cluster: str, newest: dt.datetime | None, clock: Clock) -> None:
    if newest is not None:
        lag = (clock() - newest).total_seconds()
        ctx.metrics.set("gpuledger_lag_seconds", max(0.0, lag), cluster=cluster)


def _prometheus_step(
    src: PrometheusSource, lake: Lake, clock: Clock, auth: PrometheusAuth | None = None
) -> Callable[[TaskContext], None]:
    def step(ctx: TaskContext) -> None:
        from collector.sources.prometheus.columns import parse_columns
        from collector.sources.prometheus.pull import PullConfig, WindowLanded, pull
        from collector.sources.prometheus.transport import ApiClientTransport

        # Up to now, then return: the window holding `now` lands as it stands and is landed
        # again (replacing itself) by the next step; the checkpoint moves over complete ones.
        cfg = PullConfig(
            cluster=src.cluster,
            selector=src.selector,
            until=clock(),
            window_s=src.window_s,
            settle_s=src.settle_s,
            columns=parse_columns(src.columns),
            protocol=src.protocol,
        )

        def landed(window: WindowLanded) -> None:
            if window.complete:  # a partial window is landed again until complete: count once
                ctx.metrics.inc("gpuledger_samples_landed_total", window.samples, source=src.name)

        with (
            ApiClientTransport(src.url, timeout_s=src.timeout_s, auth=auth) as api,
            ctx.linked_stop() as stop,
        ):
            summary = pull(cfg, lake, api, clock=clock, stop=stop, progress=landed)
        _lag(ctx, src.cluster, summary.last, clock)
        skipped = sum(summary.counts.values())
        if skipped:
            ctx.metrics.inc("gpuledger_malformed_lines_total", skipped, source=src.name)

    return step


def _exporter_step(src: ExporterSource, lake: Lake, clock: Clock) -> Callable[[TaskContext], None]:
    def step(ctx: TaskContext) -> None:
        from collector.sources.dcgm_exporter.scrape import scrape_exporters

        with ctx.linked_stop() as stop:
            summary = scrape_exporters(
                src.urls,
                src.cluster,
                lake,
                clock=clock,
                span_s=src.every_s,
                timeout_s=src.timeout_s,
                stop=stop,
            )
        ctx.metrics.inc("gpuledger_samples_landed_total", summary.samples, source=src.name)
        skipped = sum(summary.skipped.values())
        if skipped:
            ctx.metrics.inc("gpuledger_malformed_lines_total", skipped, source=src.name)
        if summary.failures:
            failed = ", ".join(sorted(summary.failures))
            raise RuntimeError(f"exporters failed this round: {failed}")
        if summary.samples:
            _lag(ctx, src.cluster, clock(), clock)

    return step


def _slurm_step(src: SlurmSource, lake: Lake, clock: Clock) -> Callable[[TaskContext], None]:
    def step(ctx: TaskContext) -> None:
        from collector.sources.slurm.collect import collect_slurm

        result = collect_slurm(lake, src.cluster, now=clock())
        ctx.metrics.inc("gpuledger_jobs_landed_total", result.jobs_landed, source=src.name)
        if result.malformed:
            ctx.metrics.inc(
                "gpuledger_malformed_lines_total", len(result.malformed), source=src.name
            )

    return step


def _kubernetes_step(
    src: KubernetesSource, lake: Lake, clock: Clock
) -> Callable[[TaskContext], None]:
    def step(ctx: TaskContext) -> None:
        from collector.sources.kubernetes.api import connect_kubernetes
        from collector.sources.kubernetes.collect import collect_kubernetes
        from collector.sources.kubernetes.pods import AttributionKeys

        pairs = (entry.partition("=") for entry in src.namespace_accounts)
        keys = AttributionKeys(namespace_accounts={ns.strip(): a.strip() for ns, _, a in pairs})
        api = connect_kubernetes(src.kubeconfig, src.context)
        result = collect_kubernetes(
            lake, src.cluster, api, namespaces=src.namespaces, keys=keys, now=clock()
        )
        ctx.metrics.inc("gpuledger_jobs_landed_total", result.jobs_landed, source=src.name)

    return step


def _pipeline_step(spec: PipelineSpec, lake: Lake, clock: Clock) -> Callable[[TaskContext], None]:
    def step(ctx: TaskContext) -> None:
        from app.pipeline import attribute, default_pipeline_config

        if not lake.table_dir("gpu_samples").is_dir():
            return  # nothing collected yet
        config = spec.config or default_pipeline_config()
        # compact closed days (DESIGN §3), then attribute; a source may replace a file this
        # round is reading (a partial Prometheus window landing again): read the lake afresh
        # once, else fail this round
        attribute(lake, config, clock(), attempts=2)
        # the marts now reflect everything landed so far (rebuilt, or unchanged since)
        ctx.metrics.set("gpuledger_marts_current_timestamp_seconds", clock().timestamp())
        failures = []
        for name, after in spec.after:
            if ctx.stop.is_set():
                return
            try:
                after(lake, ctx)
            except Exception as exc:  # the next step still runs; the task reports the failure
                failures.append(f"{name}: {type(exc).__name__}: {exc}")
        if failures:
            raise RuntimeError("; ".join(failures))

    return step


def build_tasks(
    lake: Lake,
    sources: Sequence[Source],
    pipeline: PipelineSpec,
    clock: Clock = _utc_now,
    *,
    prometheus_auth: PrometheusAuth | None = None,
) -> list[Task]:
    """One task per source, then the pipeline task; prometheus sources log in with
    `prometheus_auth` (the `[prometheus]` section) when given."""
    tasks = []
    for src in sources:
        if isinstance(src, PrometheusSource):
            step = _prometheus_step(src, lake, clock, prometheus_auth)
            tasks.append(Task(src.name, src.every_s, step))
        elif isinstance(src, ExporterSource):
            tasks.append(Task(src.name, src.every_s, _exporter_step(src, lake, clock)))
        elif isinstance(src, SlurmSource):
            tasks.append(Task(src.name, src.every_s, _slurm_step(src, lake, clock)))
        else:
            tasks.append(Task(src.name, src.every_s, _kubernetes_step(src, lake, clock)))
    tasks.append(
        Task("pipeline", pipeline.every_s, _pipeline_step(pipeline, lake, clock), source=False)
    )
    return tasks
