"""`gpuledger serve-exporters`: a simulated fleet's dcgm-exporter endpoints, for Prometheus.

Each node gets its own port on 127.0.0.1 (`--port`, `--port`+1, …); the command prints the
endpoints and a `scrape_configs` entry to paste into prometheus.yml, and serves until Ctrl-C or
SIGTERM. `--openmetrics FILE` instead writes days of history for
`promtool tsdb create-blocks-from openmetrics FILE DATA_DIR`.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path

import click

from app.errors import AppError, reports_errors
from app.options import ClusterName

__all__ = ["command"]


def _check_writable(path: Path | None, hint: str) -> None:
    """A usage error for a file `path` that cannot be made: a folder, or in no folder (as
    `bench --out`; a file's folder is not made for it, as `query --out`)."""
    if path is None:
        return
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir() or not folder.is_dir():
        raise click.BadParameter(
            f"cannot write {str(path)!r}: "
            + ("it is a folder" if path.is_dir() else f"no folder {str(folder)!r}"),
            param_hint=hint,
        )


@click.command(name="serve-exporters")
@click.option(
    "--gpus",
    type=click.IntRange(1, 4096),
    default=16,
    show_default=True,
    help="Simulated GPUs (8 per node).",
)
@click.option("--seed", type=int, default=42, show_default=True, help="Simulation seed.")
@click.option(
    "--cluster",
    type=ClusterName(),
    default="sim",
    show_default=True,
    help="Simulated cluster's name.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=9400,
    show_default=True,
    help="First node's port; node i listens on port+i (0: any free ports).",
)
@click.option(
    "--exporter-version",
    "version",
    type=click.Choice(["4.8", "4.9"]),
    default="4.8",
    show_default=True,
    help="4.8: ≤4.8 names and units, Hostname label; 4.9: renamed fields in base units "
    "(Hz, J, bytes, ratios), hostname label.",
)
@click.option(
    "--collect-interval",
    type=click.IntRange(1, 3600),
    default=5,
    show_default=True,
    help="Seconds between value changes (dcgm-exporter's -c); must divide a day.",
)
@click.option(
    "--scrape-interval",
    type=click.IntRange(1, 3600),
    default=15,
    show_default=True,
    help="Scrape interval in seconds written into the printed Prometheus config.",
)
@click.option(
    "--targets-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the endpoints as a Prometheus file_sd JSON file.",
)
@click.option(
    "--openmetrics",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write history as OpenMetrics to this file and exit (no serving).",
)
@click.option(
    "--days",
    type=click.IntRange(1, 60),
    default=2,
    show_default=True,
    help="With --openmetrics: days of history, ending at the start of today (UTC).",
)
@click.option(
    "--interval",
    type=click.IntRange(1, 3600),
    default=15,
    show_default=True,
    help="With --openmetrics: seconds between samples.",
)
@reports_errors
def command(
    gpus: int,
    seed: int,
    cluster: str,
    host: str,
    port: int,
    version: str,
    collect_interval: int,
    scrape_interval: int,
    targets_file: Path | None,
    openmetrics: Path | None,
    days: int,
    interval: int,
) -> None:
    """Serve simulated dcgm-exporter /metrics, one port per node, values advancing in real time.

    \b
    Example:
      gpuledger serve-exporters --gpus 32 --port 9400 --scrape-interval 15 > prometheus-scrape.yml
    """
    from collector.sim.exporters import (
        ExporterServers,
        FleetConfig,
        SimulatedFleet,
        history,
        scrape_config,
    )
    from collector.sim.exposition import render_openmetrics
    from collector.sources.dcgm_exporter.scrape import stop_on_signals

    for path, hint in ((targets_file, "--targets-file"), (openmetrics, "--openmetrics")):
        _check_writable(path, hint)  # said now, not after the fleet is simulated
    cfg = FleetConfig(
        cluster=cluster,
        gpus=gpus,
        seed=seed,
        collect_interval_s=collect_interval,
        version="4.9" if version == "4.9" else "4.8",
    )
    if openmetrics is not None:
        today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        start = today - dt.timedelta(days=days)
        samples = history(cfg, start=start, days=days, interval_s=interval)
        try:
            with open(openmetrics, "w", encoding="utf-8") as out:
                for chunk in render_openmetrics(
                    samples, version=cfg.version, extra_labels=(("cluster", cluster),)
                ):
                    out.write(chunk)
        except OSError as exc:
            raise AppError(f"cannot write {str(openmetrics)!r} ({exc.strerror or exc})") from None
        click.echo(
            f"Wrote {samples.num_rows:,} GPU samples ({start:%Y-%m-%d} + {days} d) to "
            f"{openmetrics}; load with: promtool tsdb create-blocks-from openmetrics "
            f"--max-block-duration=72h {openmetrics} DATA_DIR",
            err=True,
        )
        return
    click.echo("Simulating the fleet…", err=True)
    fleet = SimulatedFleet(cfg)
    stop = threading.Event()
    with ExporterServers(fleet, host=host, port=port) as servers, stop_on_signals(stop):
        for node, target in servers.targets.items():
            click.echo(f"{node}: http://{target}/metrics", err=True)
        if targets_file is not None:
            entry = [{"targets": sorted(servers.targets.values()), "labels": {"cluster": cluster}}]
            try:
                targets_file.write_text(json.dumps(entry, indent=2) + "\n", encoding="utf-8")
            except OSError as exc:
                raise AppError(
                    f"cannot write {str(targets_file)!r} ({exc.strerror or exc})"
                ) from None
        click.echo(scrape_config(servers.targets, cluster=cluster, interval_s=scrape_interval))
        click.echo("Serving until Ctrl-C / SIGTERM.", err=True)
        while not stop.wait(1.0):
            pass


if __name__ == "__main__":
    command()
