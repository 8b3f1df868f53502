"""`gpuledger alert`: deliver new and changed findings by Slack and email (issue 7)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from app.commands.config import config_option
from app.errors import AppError, reports_errors
from app.options import lake_option

__all__ = ["command"]


def _show_dry(report: object) -> None:
    from app.alerts.runner import CycleReport

    assert isinstance(report, CycleReport)
    for out in report.queued:
        click.echo(f"--- {out.channel} → {out.recipient} ({out.kind}, {out.role}) key {out.key}")
        p = out.payload
        if out.channel == "email":
            click.echo(f"Subject: {p['subject']}\n")
            click.echo(p["text"].rstrip())
        else:
            click.echo(p["slack_text"])
        click.echo()
    for action, _code, _note in report.actions:
        click.echo(f"--- action (would run): {' '.join(action.argv)}")
    for finding, why in report.waiting:
        click.echo(f"--- waiting: {finding.finding_id} ({finding.detector}): {why}")
    if report.backlog:
        click.echo(f"--- {report.backlog} earlier message(s) wait in the ledger to be retried")
    click.echo(
        f"Dry run: {report.findings} finding(s), {len(report.notices)} notice(s), "
        f"{len(report.queued)} message(s) would be sent; nothing was sent or recorded."
    )


def _summary(report: object) -> str:
    from app.alerts.runner import CycleReport

    assert isinstance(report, CycleReport)
    d = report.delivery
    parts = [
        f"{report.findings} finding(s)",
        f"{len(report.notices)} new notice(s)",
        f"{len(d.delivered)} message(s) delivered",
    ]
    if d.retrying:
        parts.append(f"{len(d.retrying)} waiting to retry")
    if d.failed:
        parts.append(f"{len(d.failed)} failed")
    if report.actions:
        parts.append(f"{len(report.actions)} action(s)")
    return "Alerts: " + ", ".join(parts)


@click.command("alert")
@lake_option
@config_option
@click.option(
    "--dry-run", is_flag=True, help="Print the messages that would go out; send and record nothing."
)
@click.option(
    "--follow",
    is_flag=True,
    help="Keep running: poll the findings every --interval seconds and react within one.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=None,
    help="Seconds between polls with --follow [default: alerts.follow_interval_s, 60].",
)
@click.pass_context
@reports_errors
def command(
    ctx: click.Context,
    lake: Path,
    config_path: Path | None,
    dry_run: bool,
    follow: bool,
    interval: float | None,
) -> None:
    """Turn new and changed findings into Slack and email messages, exactly once.

    \b
    Owners hear about their jobs (email, and Slack DM when the directory has their Slack ID),
    account managers from the final notice on, admins get hardware findings and a digest.
    Idle jobs escalate: first, second and final notice, then (only with
    alerts.action_enabled) scancel / pod delete, recorded in the audit table. Hygiene: one
    alert per subject per rule per alerts.period_hours, quiet hours and workdays for
    non-critical alerts, per-user opt-out, alerts.test_mode sends to admins only.
    Every message is recorded in <lake>/_state/alerts.sqlite with an idempotency key; running
    again sends nothing twice, and what could not be delivered is retried next time.

    \b
    Examples:
      gpuledger alert --dry-run                  # what would go out now
      gpuledger alert --config /etc/gpuledger.toml
      gpuledger alert --follow --interval 60     # as a service
    """
    from click.core import ParameterSource

    from app.alerts.runner import Seams, run_cycle
    from app.alerts.runner import follow as follow_loop
    from app.alerts.settings import AlertsConfig
    from app.config import load_config

    if dry_run and follow:
        raise click.BadParameter("--dry-run runs once; leave out --follow", param_hint="--follow")
    cfg = load_config(config_path)
    alerts = cfg.section(AlertsConfig)
    if ctx.get_parameter_source("lake") == ParameterSource.DEFAULT:
        lake = cfg.lake.root
    seams = Seams(sleep=time.sleep)
    if dry_run:
        _show_dry(run_cycle(lake, alerts, seams, dry_run=True))
        return
    if not follow:
        report = run_cycle(lake, alerts, seams)
        click.echo(_summary(report))
        if report.delivery.failed:
            key, error = report.delivery.failed[0]
            raise AppError(
                f"{len(report.delivery.failed)} message(s) could not be delivered "
                f"(first: {key}: {error}); they stay in the ledger as 'failed'"
            )
        return
    every = interval if interval is not None else alerts.follow_interval_s
    click.echo(f"Following {lake} every {every:g} s (Ctrl-C to stop)", err=True)

    def on_cycle(report: object) -> None:
        click.echo(_summary(report))

    try:
        follow_loop(lake, alerts, seams, every, lambda: False, on_cycle)
    except KeyboardInterrupt:
        click.echo("Stopped.", err=True)
