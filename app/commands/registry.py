"""Every command module's command, imported by name so that tools can follow each one.

To add a command: write app/commands/<name>.py exposing `command` (a click command or group),
import the module below and list `<name>.command` in COMMANDS. Collectors go under
`gpuledger collect` instead: see app/commands/collect.py.
"""

from __future__ import annotations

import click

from app.commands import (
    alert,
    check,
    collect,
    config,
    detect,
    evaluate,
    job,
    mail,
    philly,
    prune,
    report,
    run,
    serve,
    serve_exporters,
    status,
    train,
    whatif,
)

__all__ = ["COMMANDS", "register"]

COMMANDS: tuple[click.Command, ...] = (
    philly.command,
    collect.command,
    serve_exporters.command,
    serve.command,
    config.command,
    alert.command,
    detect.command,
    check.command,
    job.command,
    mail.command,
    train.command,
    evaluate.command,
    report.command,
    run.command,
    status.command,
    whatif.command,
    prune.command,
)


def register(group: click.Group) -> None:
    """Add every command of COMMANDS to the `gpuledger` group."""
    for command in COMMANDS:
        group.add_command(command)
