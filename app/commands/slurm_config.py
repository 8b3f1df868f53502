"""`gpuledger collect slurm-config --cluster C`: land what decides Slurm's scheduling."""

from __future__ import annotations

import datetime as dt
import functools
from typing import TYPE_CHECKING

import click

from app.errors import reports_errors
from app.options import ClusterName, Finite, lake_option

if TYPE_CHECKING:
    from warehouse.lake import Lake

__all__ = ["command"]


@click.command(name="slurm-config")
@click.option(
    "--cluster",
    type=ClusterName(),
    required=True,
    help="Slurm cluster name (as sacctmgr knows it).",
)
@lake_option
@click.option(
    "--timeout",
    type=Finite(1, 3600),
    default=120,
    show_default=True,
    help="Seconds to wait for each scontrol or sacctmgr call.",
)
@reports_errors
def command(cluster: str, lake: Lake, timeout: float) -> None:
    """Collect partitions, nodes, QOS, account limits, priority and backfill settings.

    \b
    Five calls per run: `scontrol show config`, `scontrol show partition -o`, `scontrol show
    node -o`, `sacctmgr show qos` and `sacctmgr show associations`. Each run lands a snapshot
    in the `scheduler_config` table (and the share tree in `associations`); `gpuledger whatif`
    replays the workload under the latest snapshot. Run it daily, and after every change
    to slurm.conf or the associations.
    """
    from collector.sources.slurm.collect import run_command
    from collector.sources.slurm.config import collect_slurm_config

    rows, shares, bad = collect_slurm_config(
        lake,
        cluster,
        functools.partial(run_command, timeout_s=timeout),
        dt.datetime.now(dt.UTC),
    )
    click.echo(
        f"Slurm cluster {cluster!r}: {rows} setting(s) and {shares} association(s) landed"
        + (f"; {len(bad)} malformed line(s) skipped: {bad[0]}" if bad else ".")
    )
