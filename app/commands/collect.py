"""`gpuledger collect …`: one click group that every live collector adds its subcommand to.

Each collector is its own module under app/commands/ exposing its click command as `command`
(or `command_<module>`); import the module below and list that command in `SUBCOMMANDS`, and it
appears as `gpuledger collect <name>`. Only this group is registered with the top-level CLI, so
several collector modules never clash over `collect`.
"""

from __future__ import annotations

import click

from app.commands import (
    dcgm_exporter,
    kubernetes,
    nvml,
    prometheus,
    slurm,
    slurm_config,
    slurm_shares,
)

__all__ = ["SUBCOMMANDS", "collect_group", "command"]

SUBCOMMANDS: tuple[click.Command, ...] = (
    slurm.command,
    dcgm_exporter.command_dcgm_exporter,
    nvml.command,
    kubernetes.command,
    prometheus.command_prometheus,
    slurm_shares.command,
    slurm_config.command,
)


@click.group(name="collect")
def collect_group() -> None:
    """Collect scheduler records and GPU telemetry from live systems into the lake."""


for subcommand in SUBCOMMANDS:
    collect_group.add_command(subcommand)

command = collect_group
