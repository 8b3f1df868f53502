"""`gpuledger collect slurm --cluster C`: land Slurm jobs (sacct) and GPU indices (scontrol)."""

from __future__ import annotations

import datetime as dt
import functools
from typing import TYPE_CHECKING

import click

from app.errors import reports_errors
from app.options import ClusterName, Finite, Timestamp, lake_option

if TYPE_CHECKING:
    from warehouse.lake import Lake

__all__ = ["command"]

MAX_REASONS_SHOWN = 3


def _when(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@click.command(name="slurm")
@click.option(
    "--cluster", type=ClusterName(), required=True, help="Cluster name to land the jobs under."
)
@click.option(
    "--since",
    type=Timestamp(),
    default=None,
    help="Start of the window, UTC unless it has an offset [default: the last run's end minus "
    "10 minutes; on the first run, the last 24 hours].",
)
@lake_option
@click.option(
    "--timeout",
    type=Finite(1, 3600),
    default=300,
    show_default=True,
    help="Seconds to wait for each sacct or scontrol call.",
)
@reports_errors
def command(cluster: str, since: dt.datetime | None, lake: Lake, timeout: float) -> None:
    """Collect Slurm jobs and the GPUs of running jobs into the lake.

    \b
    Runs on a host with the Slurm client commands, as root or SlurmUser (to see every user's
    jobs). Each run asks sacct once for the jobs eligible, running or ending since the last
    run (with 10 minutes of overlap), once more for jobs it last saw unfinished, and
    scontrol once for the GPU indices of running jobs. Steps fold into their jobs. A job lands
    as a new version only when it changed, so running this every few minutes (cron, a
    systemd timer) lands each change once. Malformed sacct lines are skipped and counted.
    State lives in <lake>/_state/slurm.sqlite.
    """
    from collector.sources.slurm.collect import collect_slurm, run_command

    result = collect_slurm(
        lake, cluster, functools.partial(run_command, timeout_s=timeout), since=since
    )
    click.echo(
        f"Slurm cluster {cluster!r}, {_when(result.window_start)} to {_when(result.window_end)}: "
        f"{result.jobs_seen} job(s) seen, {result.jobs_landed} landed "
        f"({result.jobs_new} new, {result.jobs_updated} updated); GPU allocations: "
        f"{result.gpu_rows_opened} opened, {result.gpu_rows_closed} closed; "
        f"{len(result.malformed)} malformed line(s) skipped"
        + (
            ": "
            + "; ".join(str(m) for m in result.malformed[:MAX_REASONS_SHOWN])
            + (" …" if len(result.malformed) > MAX_REASONS_SHOWN else "")
            if result.malformed
            else "."
        )
    )
    if result.unmapped_jobs:
        shown = ", ".join(result.unmapped_jobs[:5])
        click.echo(
            f"Warning: {len(result.unmapped_jobs)} running job(s) hold GPUs that no scontrol "
            f"record maps to indexes ({shown}; no index given, or the record unreadable: see "
            "the skipped lines); their samples stay unattributed.",
            err=True,
        )
