"""`gpuledger config check`: validate the configuration and print it, secrets masked."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.errors import reports_errors
from app.options import NonEmptyPath

if TYPE_CHECKING:
    from app.config import Config

__all__ = ["command", "config_option"]

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML configuration file (default: $GPULEDGER_CONFIG, else ./gpuledger.toml if present).",
)


def _problems(cfg: Config) -> list[str]:
    """What a valid configuration still gets wrong as a whole, one line each: e.g. sign-in
    required on the dashboard with nothing saying whose sign-in to trust (all refused)."""
    from app.access import policy_problem
    from app.alerts.render import check_templates
    from app.alerts.settings import AlertsConfig
    from app.config import DashboardConfig, access_policy

    problems = []
    problem = policy_problem(access_policy(cfg.section(DashboardConfig)))
    if problem:
        problems.append(problem)
    from app.api.settings import ApiConfig
    from app.api.tokens import TokensFileError, load_tokens

    tokens_file = cfg.section(ApiConfig).tokens_file
    if tokens_file is not None:
        try:
            load_tokens(tokens_file)
        except TokensFileError as exc:
            problems.append(str(exc))
    from app.service.settings import PrometheusConfig, credential_problems

    problems += credential_problems(cfg.values["sources"], cfg.section(PrometheusConfig))
    alerts = cfg.section(AlertsConfig)
    # files `gpuledger alert` refuses to run without (config check said OK to them)
    for key, path in (("directory", alerts.directory), ("smtp_ca_file", alerts.smtp_ca_file)):
        if path is not None and not path.is_file():
            problems.append(f"alerts.{key}: {str(path)!r} is not a file")
    templates = alerts.templates_dir
    if templates is not None:
        # each overriding template is rendered against a sample finding
        broken = check_templates(templates)
        if broken:
            problems.append(f"alerts.templates_dir: {broken}")
    return problems


@click.group("config")
def command() -> None:
    """Inspect gpuledger's configuration (one TOML file plus GPULEDGER_* overrides)."""


@command.command("check")
@config_option
@click.option(
    "--lake",
    type=NonEmptyPath(file_okay=False, path_type=Path),
    default=None,
    help="Lake root to check instead of the configured one (as other commands' --lake).",
)
@reports_errors
def check(config_path: Path | None, lake: Path | None) -> None:
    """Validate the configuration and print every effective key with its source.

    \b
    Keys come from the file's [section] tables, overridden by GPULEDGER_<SECTION>_<KEY>
    (e.g. GPULEDGER_ALERTS_SMTP_PORT=2525); each [[sources]] entry follows, from the file.
    The pipeline's tables list every key with its default where the file does not set it:
    [attribute], [detect.<detector>] (enabled, the scope keys partitions, exclude_partitions,
    exclude_accounts, exclude_users, exclude_qos, and the thresholds of its rule family;
    environment: GPULEDGER_DETECT_<DETECTOR>_<KEY>), [recommend] and [recommend.<kind>].
    Secrets (alerts.smtp_password, alerts.slack_token, alerts.slack_webhook_url,
    prometheus.password, prometheus.bearer_token, api.proxy_secret) are only read from the
    environment or a <key>_file readable by its owner alone, and are shown as ********.
    Exits 1 naming the first bad key, or with one line saying what the settings get wrong
    together (e.g. dashboard sign-in required but no allowed domain, issuer or user; an
    alerts.templates_dir template that does not render against a sample finding; an
    alerts.directory or alerts.smtp_ca_file that is not there).
    """
    from app.config import ConfigError, load_config

    cfg = load_config(config_path)
    click.echo(
        f"# configuration: {cfg.path if cfg.path else '(no file; defaults and environment)'}"
    )
    section = None
    # the values the pipeline runs with: a key one section takes from another's (the idle-cancel
    # replay's bucket follows attribute.bucket_s) showed its own default instead
    from app.pipeline.settings import pipeline_config

    used = {
        key: (shown, source) for key, shown, source in pipeline_config(cfg).recommend.effective()
    }
    for key, shown, source in cfg.effective():
        shown, source = used.get(key, (shown, source))
        name, leaf = key.rsplit(".", 1)  # [detect.idle_job] idle_minutes
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
    problems = _problems(cfg)
    if problems:
        raise ConfigError(problems[0])
    root = lake if lake is not None else cfg.lake.root
    if not root.is_dir():
        click.echo(f"\nNote: the lake {str(root)!r} does not exist yet.", err=True)
    click.echo("\nOK", err=True)
