"""Subcommands that live in their own modules (collectors, importers); `register` adds them."""

from __future__ import annotations

import click

__all__ = ["register"]


def register(group: click.Group) -> None:
    """Add every command module's command to the `gpuledger` group."""
    # Each entry: a module under app/commands/ exposing `command` (a click command or group).
    from importlib import import_module

    for name in COMMAND_MODULES:
        group.add_command(import_module(f"app.commands.{name}").command)


COMMAND_MODULES: tuple[str, ...] = (
    "philly",
    "collect",
    "serve_exporters",
    "serve",
    "config",
    "alert",
    "detect",
    "check",
    "job",
    "mail",
    "train",
    "evaluate",
    "report",
    "run",
    "status",
    "whatif",
)
