"""`gpuledger collect slurm-shares --cluster C`: land Slurm's share tree (sacctmgr associations)."""

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


@click.command(name="slurm-shares")
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
    help="Seconds to wait for sacctmgr.",
)
@reports_errors
def command(cluster: str, lake: Lake, timeout: float) -> None:
    """Collect the accounts, users and their fair-share shares (RawShares) into the lake.

    \b
    One `sacctmgr show associations` call (slurmdbd, not slurmctld). Each run lands the whole
    tree as a new snapshot in the `associations` table; the weekly fairness report uses the
    latest one as the entitlements (`gpuledger report weekly`). Run it daily, or after
    changing shares with `sacctmgr modify … set fairshare=N`.
    """
    from collector.sources.slurm.assoc import collect_associations
    from collector.sources.slurm.collect import run_command

    landed, bad = collect_associations(
        lake,
        cluster,
        functools.partial(run_command, timeout_s=timeout),
        dt.datetime.now(dt.UTC),
    )
    click.echo(
        f"Slurm cluster {cluster!r}: {landed} association(s) landed"
        + (f"; {len(bad)} malformed line(s) skipped: {bad[0]}" if bad else ".")
    )
    if not landed:
        click.echo(
            f"Warning: sacctmgr lists no association for cluster {cluster!r} "
            "(is the name right? `sacctmgr show cluster`).",
            err=True,
        )
