"""`gpuledger collect …`: one click group that every live collector adds its subcommand to.

Each collector is its own module under app/commands/ exposing its click command as `command`
(or `command_<module>`); list the module in `SUBCOMMAND_MODULES` and it appears as
`gpuledger collect <name>`. Only this group is registered with the top-level CLI, so several
collector modules never clash over `collect`.
"""

from __future__ import annotations

from importlib import import_module

import click

__all__ = ["SUBCOMMAND_MODULES", "collect_group", "command"]

SUBCOMMAND_MODULES: tuple[str, ...] = (
    "slurm",
    "dcgm_exporter",
    "nvml",
    "kubernetes",
    "prometheus",
    "slurm_shares",
    "slurm_config",
)


@click.group(name="collect")
def collect_group() -> None:
    """Collect scheduler records and GPU telemetry from live systems into the lake."""


def _attach(group: click.Group, modules: tuple[str, ...]) -> None:
    for name in modules:
        module = import_module(f"app.commands.{name}")
        group.add_command(getattr(module, f"command_{name}", None) or module.command)


_attach(collect_group, SUBCOMMAND_MODULES)

command = collect_group
