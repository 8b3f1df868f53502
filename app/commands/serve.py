"""`gpuledger serve`: the lake's figures at /metrics for Prometheus (FastAPI + uvicorn)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.commands.config import config_option
from app.commands.run import lake_override
from app.errors import AppError, reports_errors

if TYPE_CHECKING:
    from warehouse.lake import Lake

__all__ = ["command"]


@click.command("serve")
@config_option
@lake_override
@click.option(
    "--address",
    default=None,
    help="Address to listen on [default: serve.address, 127.0.0.1; 0.0.0.0 for all].",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port to listen on [default: serve.port, 9747; 0: any free port].",
)
@reports_errors
def command(
    config_path: Path | None, lake: Lake | None, address: str | None, port: int | None
) -> None:
    """Serve the lake's figures to Prometheus at http://ADDRESS:PORT/metrics, and the
    read-only HTTP API at /api/v1 when `[api]` lets someone in.

    \b
    Per cluster, account and partition: GPU-hours allocated, observed, idle and effective over
    the last day and week (as GPU-seconds, Prometheus' base unit), GPUs by state now and the
    jobs running; per running job (the largest `serve.max_job_series` per cluster): its GPUs
    busy and idle, GPU time so far and at stake, and the GPUs it holds (to join dcgm-exporter's
    series); open findings by detector and severity; recommendations by kind; how fresh each
    source is. "Now" is the end of the lake's data, never the wall clock.

    \b
    The figures are read at start and again only when the lake's files change (looked at every
    `serve.refresh_s`), so a scrape is answered from memory. /healthz answers 200 once they
    were read. Grafana dashboards for these series ship in deploy/grafana/.

    \b
    The API (/api/v1, its OpenAPI document at /api/v1/openapi.json) is served when `[api]`
    names a `tokens_file` (lines '<token> <user> [manager]', chmod 600) or a reverse proxy's
    `trusted_user_header`; a user reads their own jobs and usage, a manager everything. With
    the API, /metrics (every running job's user) answers managers only: give Prometheus a
    manager's token (`authorization` with a `credentials_file` in its scrape config).

    \b
    Examples:
      gpuledger serve --lake lake                       # http://127.0.0.1:9747/metrics
      gpuledger serve --lake /data/lake --address 0.0.0.0 --port 9100
    """
    from app.api.settings import ApiSettings
    from app.config import load_config
    from app.pipeline import pipeline_config
    from app.serve.settings import ServeConfig, ServeSettings
    from warehouse.lake import Lake

    cfg = load_config(config_path)
    serve_cfg = cfg.section(ServeConfig)
    served = lake or Lake.at(cfg.lake.root)  # else the configuration's ($GPULEDGER_LAKE wins)
    if not served.exists():
        raise AppError(
            f"no lake at {str(served)!r}: give --lake (or $GPULEDGER_LAKE) a lake folder"
        )
    settings = ServeSettings(
        max_job_series=serve_cfg.max_job_series,
        refresh_s=serve_cfg.refresh_s,
        bucket_s=pipeline_config(cfg).attribution.bucket_s,
    )
    api = ApiSettings.from_config(cfg)  # a tokens file that is not safe: one line, here
    try:
        import uvicorn

        from app.api.auth import managers_only
        from app.api.router import build_router
        from app.serve.server import create_app
    except ImportError as exc:
        raise AppError(
            f"gpuledger serve needs FastAPI and uvicorn ({exc.name} is missing): "
            "pip install 'gpuledger[serve]'"
        ) from None
    host = address or serve_cfg.address
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, serve_cfg.port if port is None else port))
    except OSError as exc:
        listener.close()
        wanted = serve_cfg.port if port is None else port
        raise AppError(f"cannot listen on {host}:{wanted}: {exc.strerror}") from None
    bound = listener.getsockname()[1]  # the port chosen when 0 was asked for
    routers = [build_router(served, api)] if api.enabled else []
    where = f"http://[{host}]:{bound}" if ":" in host else f"http://{host}:{bound}"  # (IPv6)
    click.echo(f"Serving the figures of {served} on {where}/metrics", err=True)
    click.echo(
        f"The API: {where}/api/v1 (its OpenAPI document at {where}/api/v1/openapi.json); "
        "/metrics answers a manager's token or proxy user only"
        if api.enabled
        else "No API: [api] names no tokens_file nor trusted_user_header",
        err=True,
    )
    if api.trusted_user_header is not None and api.proxy_secret is None:
        # documented, and silent: anyone who can reach a trusted address names any user
        click.echo(
            f"Warning: {api.trusted_user_header} is believed from "
            f"{', '.join(sorted(api.trusted_proxies)) or 'no address'} without a proxy secret: "
            "any local user of those hosts can send it and name any user, a manager too; set "
            "[api] proxy_secret (GPULEDGER_API_PROXY_SECRET) and have the proxy send it",
            err=True,
        )
    with listener:
        config = uvicorn.Config(
            create_app(
                served,
                settings,
                routers=routers,
                guard=managers_only(api) if api.enabled else None,
            ),
            fd=listener.fileno(),
            log_level="warning",
            access_log=False,
            # the peer is the address [api] trusted_proxies is checked against: uvicorn's
            # default took it from X-Forwarded-For on a loopback connection, so any local user
            # could name a trusted proxy's address and then any user (a manager) in the header
            proxy_headers=False,
        )
        uvicorn.Server(config).run()
