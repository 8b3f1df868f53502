"""`gpuledger status`: what `gpuledger run` has been doing on a lake."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.commands.config import config_option
from app.commands.run import lake_override
from app.errors import AppError, reports_errors

if TYPE_CHECKING:
    from warehouse.lake import Lake

__all__ = ["command"]


@click.command("status")
@config_option
@lake_override
@click.option("--check", is_flag=True, help="Exit 1 when a task is failing or the service is down.")
@reports_errors
def command(config_path: Path | None, lake: Lake | None, check: bool) -> None:
    """Summarise what `gpuledger run` has been doing on this lake.

    Reads <lake>/_state/service.json (rewritten by the service after every step): each task's
    runs, failures, last success and last error, samples and jobs landed, malformed lines,
    source errors, alerts sent and failed, lag behind live data and mart freshness.
    """
    from app.config import LakeConfig, load_section
    from app.service.status import read_status, render_status
    from warehouse.lake import Lake

    # the lake alone: a monitoring user (nagios, root) is not refused over a secret of another
    # section it cannot read (the SMTP password file, the service user's)
    # a --config named is read even beside --lake: one that is not TOML is refused
    named = load_section(LakeConfig, config_path) if config_path is not None else None
    root = lake or Lake.at((named or load_section(LakeConfig)).root)
    if not root.exists():  # (a mistyped lake read as a service that never ran, exit 0)
        raise AppError(f"no lake at {str(root)!r}: give --lake (or $GPULEDGER_LAKE) a lake folder")
    text, healthy = render_status(read_status(root), now=time.time())
    click.echo(text)
    if check and not healthy:
        sys.exit(1)
