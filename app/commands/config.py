"""`gpuledger config check`: validate the configuration and print it, secrets masked."""

from __future__ import annotations

from pathlib import Path

import click

from app.errors import reports_errors

__all__ = ["command", "config_option"]

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML configuration file (default: $GPULEDGER_CONFIG, else ./gpuledger.toml if present).",
)


@click.group("config")
def command() -> None:
    """Inspect gpuledger's configuration (one TOML file plus GPULEDGER_* overrides)."""


@command.command("check")
@config_option
@click.option(
    "--lake",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Lake root to check instead of the configured one (as other commands' --lake).",
)
@reports_errors
def check(config_path: Path | None, lake: Path | None) -> None:
    """Validate the configuration and print every effective key with its source.

    \b
    Keys come from the file's [section] tables, overridden by GPULEDGER_<SECTION>_<KEY>
    (e.g. GPULEDGER_ALERTS_SMTP_PORT=2525); each [[sources]] entry follows, from the file.
    Secrets (alerts.smtp_password, alerts.slack_token, alerts.slack_webhook_url) are only
    read from the environment or a <key>_file readable by its owner alone, and are shown as
    ********. Exits 1 naming the first bad key.
    """
    from app.config import load_config

    cfg = load_config(config_path)
    click.echo(
        f"# configuration: {cfg.path if cfg.path else '(no file; defaults and environment)'}"
    )
    section = None
    for key, shown, source in cfg.effective():
        name, leaf = key.split(".", 1)
        if name != section:
            click.echo(f"\n[{name}]")
            section = name
        if key == "lake.root" and lake is not None:
            shown, source = repr(str(lake)), "--lake"
        if shown == "(unset)":
            click.echo(f"# {leaf} is unset  # {source}")
        else:
            click.echo(f"{leaf} = {shown}  # {source}")
    for name, keys in cfg.effective_lists():
        # arrays of tables come only from the file (no environment overrides)
        click.echo(f"\n[[{name}]]  # file {cfg.path}")
        for leaf, shown in keys:
            if shown == "(unset)":
                click.echo(f"# {leaf} is unset  # default")
            else:
                click.echo(f"{leaf} = {shown}")
    root = lake if lake is not None else cfg.lake.root
    if not root.is_dir():
        click.echo(f"\nNote: the lake {str(root)!r} does not exist yet.", err=True)
    click.echo("\nOK", err=True)
