"""`gpuledger run`: the service loop (collect, attribute, detect, alert), supervised."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.commands.config import config_option
from app.errors import AppError, reports_errors
from app.options import LAKE_HELP, NonEmptyPath, lake_writer, no_wait_option

if TYPE_CHECKING:
    from app.config import Config
    from app.service.settings import ServiceConfig
    from app.service.tasks import Source
    from collector.sources.prometheus.transport import PrometheusAuth
    from warehouse.lake import Lake

__all__ = ["command", "lake_override"]


def _given_lake(ctx: click.Context, param: click.Parameter, value: Path | None) -> Lake | None:
    from warehouse.lake import Lake

    return None if value is None else Lake.at(value)


# --lake for the commands that read their own --config: the Lake when given, else None (the
# command then takes the configuration's `lake`)
lake_override = click.option(
    "--lake",
    type=NonEmptyPath(file_okay=False, path_type=Path),
    default=None,
    callback=_given_lake,
    help=LAKE_HELP,
)


@click.command("run")
@config_option
@lake_override
@click.option(
    "--once",
    is_flag=True,
    help="Run every source once, then one pipeline round, and exit (e.g. from cron).",
)
@no_wait_option
@reports_errors
def command(config_path: Path | None, lake: Lake | None, once: bool, no_wait: bool) -> None:
    """Run gpuledger as a service: collect, attribute, detect and alert, continuously.

    \b
    Every [[sources]] entry of the configuration is collected on its own cadence in its own
    thread; a source that fails is retried with backoff while the others go on. Every
    service.pipeline_every_s seconds the marts are updated incrementally, the detectors run
    and new findings are alerted — with the same [attribute], [detect.<detector>] and
    [recommend.<kind>] tables as `gpuledger attribute` and `detect`, so both give the same
    marts and findings. gpuledger's own metrics (samples landed, lag behind live
    data, malformed lines, source errors, alerts sent/failed, mart freshness) are served at
    http://<service.metrics_address>:<service.metrics_port>/metrics, health at /healthz, and
    written to <lake>/_state/service.json for `gpuledger status`.

    \b
    One writer of the marts and findings at a time: a round waits while `gpuledger attribute`
    or `detect` writes the lake (the log names it); with --no-wait, `run` exits at once if
    another writer holds the lake when it starts. One service per lake: a second `gpuledger
    run` on it exits at once, naming the first.

    \b
    SIGTERM or Ctrl-C: each task finishes the step it is in (every write is atomic and every
    checkpoint transactional, so nothing is half-written) and the loop exits; the next start
    resumes from the checkpoints.

    \b
    Example configuration (check it with `gpuledger config check`):
      lake = "/var/lib/gpuledger/lake"
      [[sources]]
      kind = "prometheus"
      cluster = "della"
      url = "http://prometheus:9090"
      [[sources]]
      kind = "slurm"
      cluster = "della"
    """
    from app.config import load_config
    from app.service.settings import PrometheusConfig, ServiceConfig, credential_problems
    from warehouse.lake import Lake

    cfg = load_config(config_path)
    root = lake or Lake.at(cfg.lake.root)
    service = cfg.section(ServiceConfig)
    sources = cfg.values["sources"]
    if not sources:
        where = cfg.path or "the configuration (no file found)"
        raise AppError(f"no [[sources]] in {where}; add at least one (see `gpuledger run --help`)")
    prometheus = cfg.section(PrometheusConfig)
    conflicts = credential_problems(sources, prometheus)
    if conflicts:  # (the source would fail every round)
        raise AppError(conflicts[0])
    if no_wait:  # another writer now: say who, and stop here rather than wait each round
        with lake_writer(root, "start", no_wait=True):
            pass
    from app.service.service_lock import service_lock

    with service_lock(root):  # one service per lake: two would overwrite each other's status
        _serve(root, cfg, service, sources, prometheus.auth(), once)


def _serve(
    root: Lake,
    cfg: Config,
    service: ServiceConfig,
    sources: tuple[Source, ...],
    prometheus_auth: PrometheusAuth | None,
    once: bool,
) -> None:
    """The service's tasks, supervised until a signal stops them (or one round, `once`)."""
    import faulthandler
    import signal
    import threading

    from app.service.endpoint import serve_endpoint
    from app.service.metrics import Metrics
    from app.service.pipeline import after_steps
    from app.service.status import iso, write_status
    from app.service.supervisor import Supervisor, TaskState
    from app.service.tasks import PipelineSpec, build_tasks
    from collector.sources.dcgm_exporter.scrape import stop_on_signals

    # `kill -USR1 <pid>` prints every thread's stack to stderr: what is a stuck task doing?
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    metrics = Metrics()
    from app.pipeline import pipeline_config

    config = pipeline_config(cfg)  # the same steps and settings as attribute/detect
    pipeline = PipelineSpec(service.pipeline_every_s, after_steps(cfg, service), config)
    tasks = build_tasks(root, sources, pipeline, prometheus_auth=prometheus_auth)
    stop = threading.Event()

    def record(states: dict[str, TaskState]) -> None:
        write_status(root, states, metrics, now=time.time(), pid=os.getpid())

    supervisor = Supervisor(
        tasks,
        metrics,
        stop=stop,
        on_change=record,
        deadline_intervals=service.step_deadline_intervals,
    )
    if once:
        for task in tasks:
            supervisor.run_once(task)
        record(supervisor.states)
        failed = [name for name, s in supervisor.states.items() if s.consecutive_failures]
        click.echo(f"ran {len(tasks)} task(s) once; failed: {', '.join(failed) or 'none'}")
        if failed:
            raise AppError(f"{len(failed)} task(s) failed: {', '.join(failed)}")
        return

    def health() -> tuple[bool, dict[str, object]]:
        states = {n: s.consecutive_failures for n, s in supervisor.states.items()}
        return supervisor.healthy(), {"consecutive_failures": states, "stuck": stuck()}

    def stuck() -> dict[str, dict[str, object]]:
        return {
            name: {"since": iso(since), "deadline_s": supervisor.states[name].deadline_s}
            for name, since in supervisor.stuck().items()
        }

    def liveness() -> tuple[bool, dict[str, object]]:
        hung = stuck()  # only what a restart mends: a failing source is not, a hung step is
        return not hung, {"stuck": hung}

    server = None
    if service.metrics_port:
        try:
            server = serve_endpoint(
                metrics, health, service.metrics_address, service.metrics_port, liveness=liveness
            )
        except OSError as exc:  # (a second service on this config, or another program)
            raise AppError(
                f"service.metrics_port: cannot listen on {service.metrics_address}:"
                f"{service.metrics_port} ({exc.strerror or exc}); is another gpuledger run "
                "using it? Give another port, or 0 for no endpoint"
            ) from None
        click.echo(
            f"gpuledger run: {len(tasks)} tasks; metrics on "
            f"http://{service.metrics_address}:{server.server_address[1]}/metrics",
            err=True,
        )
    try:
        with stop_on_signals(stop):
            supervisor.run(join_timeout_s=service.stop_timeout_s)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    click.echo("gpuledger run: stopped", err=True)
