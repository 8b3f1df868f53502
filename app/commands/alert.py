"""`gpuledger alert`: deliver new and changed findings by Slack and email (issue 7)."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.commands.config import config_option
from app.errors import AppError, reports_errors
from app.options import Finite, lake_option

if TYPE_CHECKING:
    from warehouse.lake import Lake

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
        click.echo(
            f"--- action (would run once the scheduler confirms the job): {shlex.join(action.argv)}"
        )
    for finding, why in report.waiting:
        click.echo(f"--- waiting: {finding.finding_id} ({finding.detector}): {why}")
    if report.backlog:
        click.echo(f"--- {report.backlog} earlier message(s) wait in the ledger to be retried")
    for n in report.unrouted:
        click.echo(f"--- nobody to tell: {n.finding.finding_id} ({n.finding.detector})")
    click.echo(
        f"Dry run: {report.findings} finding(s), {len(report.notices)} notice(s), "
        f"{len(report.queued)} message(s) would be sent; nothing was sent or recorded."
    )


def _show_status(lake: Lake) -> None:
    from app.alerts.ledger import LEDGER_FILE, Ledger

    path = lake.root / "_state" / LEDGER_FILE
    if not path.exists():
        click.echo(f"No alert ledger yet ({path}): nothing was ever sent from this lake.")
        return
    ledger = Ledger.snapshot(path)
    try:
        counts = ledger.counts()
        click.echo(
            "Messages: "
            + (", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none")
        )
        for key, state, channel, recipient, attempts, error in ledger.undelivered():
            click.echo(
                f"  {state:8} {channel:7} {recipient}  key {key}, {attempts} attempt(s)"
                + (f": {error}" if error else "")
            )
        for a in ledger.actions():
            click.echo(
                f"Action {a['started_ts']} {a['cluster']}/{a['job_id']}: {a['argv']} "
                f"→ exit {a['returncode']}: {a['output'] or ''}"
            )
    finally:
        ledger.close()


def _requeue_failed(lake: Lake) -> int:
    from app.alerts.ledger import LEDGER_FILE, Ledger
    from app.alerts.runner import utc_now

    if not lake.exists():
        raise AppError(f"lake {str(lake)!r} does not exist (--lake or GPULEDGER_LAKE)")
    path = lake.state_dir() / LEDGER_FILE
    if not path.exists():
        return 0
    ledger = Ledger.open(path)
    try:
        return ledger.requeue_failed(utc_now())
    finally:
        ledger.close()


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
    text = "Alerts: " + ", ".join(parts)
    if report.unrouted:
        ids = ", ".join(n.finding.finding_id for n in report.unrouted[:5])
        text += (
            f"\nWarning: {len(report.unrouted)} notice(s) had nobody to tell ({ids}); set "
            "alerts.admin_emails (hardware findings) or the account's managers"
        )
    return text


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
    "--status",
    is_flag=True,
    help="Show the ledger: messages by state, those not delivered and why, the action audit.",
)
@click.option(
    "--retry-failed",
    is_flag=True,
    help="First put every 'failed' message back in the queue (e.g. after fixing the SMTP relay).",
)
@click.option(
    "--interval",
    type=Finite(min=0.1),
    default=None,
    help="Seconds between polls with --follow [default: alerts.follow_interval_s, 60].",
)
@click.pass_context
@reports_errors
def command(
    ctx: click.Context,
    lake: Lake,
    config_path: Path | None,
    dry_run: bool,
    follow: bool,
    status: bool,
    retry_failed: bool,
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
    again sends nothing twice. What could not be delivered (server down, a relay or login
    refused) is retried by later runs, alerts.retry_later_s apart and doubling, until
    alerts.give_up_after_runs runs gave up on it: then it is 'failed', and --retry-failed
    queues it again. A recipient refused with SMTP 5xx fails at once.

    \b
    Examples:
      gpuledger alert --dry-run                  # what would go out now
      gpuledger alert --config /etc/gpuledger.toml
      gpuledger alert --follow --interval 60     # as a service
      gpuledger alert --status                   # what is waiting, what failed, actions taken
      gpuledger alert --retry-failed             # resend what failed, once the relay is fixed
    """
    from click.core import ParameterSource

    from app.alerts.runner import Seams, run_cycle
    from app.alerts.runner import follow as follow_loop
    from app.alerts.settings import AlertsConfig
    from app.config import load_config
    from warehouse.lake import Lake

    if dry_run and follow:
        raise click.BadParameter("--dry-run runs once; leave out --follow", param_hint="--follow")
    if retry_failed and (dry_run or status):
        raise click.BadParameter(
            "--retry-failed changes the ledger; leave out --dry-run and --status",
            param_hint="--retry-failed",
        )
    cfg = load_config(config_path)
    alerts = cfg.section(AlertsConfig)
    if ctx.get_parameter_source("lake") == ParameterSource.DEFAULT:
        lake = Lake.at(cfg.lake.root)
    if status:
        _show_status(lake)
        return
    seams = Seams(sleep=time.sleep)
    if retry_failed:
        click.echo(f"Requeued {_requeue_failed(lake)} failed message(s).")
    if dry_run:
        _show_dry(run_cycle(lake, alerts, seams, dry_run=True))
        return
    if not follow:
        report = run_cycle(lake, alerts, seams)
        click.echo(_summary(report))
        d = report.delivery
        if d.failed:
            key, error = d.failed[0]
            raise AppError(
                f"{len(d.failed)} message(s) could not be delivered "
                f"(first: {key}: {error}); they stay in the ledger as 'failed' "
                "(`gpuledger alert --retry-failed` sends them again)"
            )
        if d.refused:
            key, error = d.refused[0]
            raise AppError(
                f"{error} (message {key}); {len(d.retrying)} message(s) wait for a later run "
                f"(alerts.retry_later_s, {alerts.retry_later_s:g} s): fix the channel"
            )
        return
    every = interval if interval is not None else alerts.follow_interval_s
    click.echo(f"Following {lake.root} every {every:g} s (Ctrl-C to stop)", err=True)

    def on_cycle(report: object) -> None:
        from app.alerts.runner import CycleReport

        assert isinstance(report, CycleReport)
        d = report.delivery
        # a service log line only when something happened
        if report.notices or d.delivered or d.retrying or d.failed or report.actions:
            click.echo(_summary(report))

    try:
        follow_loop(lake, alerts, seams, every, lambda: False, on_cycle)
    except KeyboardInterrupt:
        click.echo("Stopped.", err=True)
