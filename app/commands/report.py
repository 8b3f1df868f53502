"""`gpuledger report weekly`: the Monday fairness report as HTML, PDF, CSV/Parquet and email."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from app.commands.config import config_option
from app.errors import AppError, reports_errors
from app.options import ClusterName, Finite, NonEmptyPath, lake_option

if TYPE_CHECKING:
    from app.report.data import DataWeeks
    from app.report.week import IsoWeek
    from warehouse.lake import Lake

__all__ = ["command"]


class WeekParam(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """An ISO week, `YYYY-Www`."""

    name = "YYYY-Www"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from app.report.week import IsoWeek, parse_week

        if isinstance(value, IsoWeek):
            return value
        try:
            return parse_week(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class ShareParam(click.ParamType):  # type: ignore[type-arg]
    """`ACCOUNT=SHARES`, e.g. `physics=40`."""

    name = "ACCOUNT=SHARES"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        account, sep, raw = str(value).partition("=")
        try:
            shares = float(raw)
        except ValueError:
            shares = -1.0
        # (float() reads "nan" and "inf": every entitlement came out 0 or NaN)
        if not sep or not account or not math.isfinite(shares) or shares < 0:
            self.fail(f"{value!r}: expected ACCOUNT=SHARES with SHARES ≥ 0, e.g. physics=40")
        return account, shares


@click.group(name="report")
def report_group() -> None:
    """Reports for managers and account owners (the weekly fairness report)."""


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@report_group.command(name="weekly")
@click.option(
    "--week",
    type=WeekParam(),
    default=None,
    metavar="YYYY-Www",
    help="ISO week to report, e.g. 2026-W48 [default: the latest week the data cover whole, "
    "else the week they cover longest].",
)
@click.option(
    "--out",
    type=NonEmptyPath(file_okay=False, path_type=Path),
    default=Path("reports"),
    show_default=True,
    help="Folder to write <cluster>/<week>/ into (HTML, PDF, tables/*.csv|parquet).",
)
@click.option(
    "--cluster",
    type=ClusterName(),
    default=None,
    help="Only this cluster [default: every cluster].",
)
@click.option(
    "--cost-per-gpu-hour",
    type=Finite(min=0, max=1e6),
    default=None,
    help="Price of one GPU-hour, to cost the waste (e.g. 2.50).",
)
@click.option(
    "--cost-per-kwh",
    type=Finite(min=0, max=1e6),
    default=None,
    help="Price of one kWh, to cost the energy (e.g. 0.12).",
)
@click.option(
    "--half-life-days",
    type=Finite(min=0.01, max=3650),
    default=7.0,
    show_default=True,
    help="Usage decay half-life: Slurm's PriorityDecayHalfLife (or Kueue usageHalfLifeTime).",
)
@click.option(
    "--share",
    "shares",
    type=ShareParam(),
    multiple=True,
    metavar="ACCOUNT=SHARES",
    help="Entitlement of an account when the lake has no Slurm associations "
    "(`gpuledger collect slurm-shares`); repeat per account, e.g. --share physics=40.",
)
@click.option("--no-pdf", is_flag=True, help="Write the HTML and tables only (no Chromium).")
@click.option(
    "--email",
    "send_email",
    is_flag=True,
    help="Also email each report (HTML with inline charts, PDF attached) to --email-to.",
)
@click.option(
    "--email-to",
    default=None,
    help="Comma-separated recipients [default: alerts.admin_emails of the configuration].",
)
@config_option
@lake_option
@click.pass_context
@reports_errors
def weekly(
    ctx: click.Context,
    week: Any,
    out: Path,
    cluster: str | None,
    cost_per_gpu_hour: float | None,
    cost_per_kwh: float | None,
    half_life_days: float,
    shares: tuple[tuple[str, float], ...],
    no_pdf: bool,
    send_email: bool,
    email_to: str | None,
    config_path: Path | None,
    lake: Lake,
) -> None:
    """Write the weekly fairness report of each cluster: usage vs entitlement, waits, waste.

    \b
    For every cluster (or --cluster), for the ISO --week (default: the latest week the data
    cover whole; on a live lake, last week; on a backfilled one, its last full week; where
    none is whole, the week they cover longest):
      1. usage vs entitlement per account and user: GPU-hours, usage share raw and decayed
         with --half-life-days, entitled share, Slurm's classic and Fair Tree fair-share
         (and Kueue ClusterQueue shares on Kubernetes);
      2. Jain's index, max/min and dominant share over accounts whose jobs queued;
      3. queue waits p50/p95 by account and job size, the backlog at week end, jobs > 24 h;
      4. waste per account and user, costed, with week-over-week and 4-week trends;
      5. GPU-hours lost to failures and requeues by cause, energy, power findings;
      6. the cluster frame as sreport shows it; 7. recommended actions with evidence.
    Writes <out>/<cluster>/<week>/fairness-<cluster>-<week>.html (self-contained), .pdf
    (headless Chromium) and tables/*.csv + *.parquet. Reads the marts: run
    `gpuledger attribute` first. A week without data gives a report that says so, and the
    command names the weeks that have data.

    \b
    Example:
      gpuledger report weekly --week 2026-W48 --cost-per-gpu-hour 2.5 --share physics=60 \\
          --share bio=40 --email --email-to lead@example.org --config /etc/gpuledger.toml

    \b
    Email goes through the [alerts] SMTP settings (smtp_host, smtp_port, smtp_starttls,
    smtp_user, smtp_password[_file], email_from; env GPULEDGER_ALERTS_SMTP_HOST, …).
    """
    from click.core import ParameterSource

    from app.config import LakeConfig, load_config, load_section
    from warehouse.lake import Lake

    # the whole configuration (its SMTP settings and secrets) only to send the mail: a report
    # written to files reads the lake's section alone
    cfg = load_config(config_path) if send_email else None
    if ctx.get_parameter_source("lake") == ParameterSource.DEFAULT:
        lake = Lake.at(cfg.lake.root if cfg else load_section(LakeConfig, config_path).root)
    elif config_path is not None and cfg is None:
        load_section(LakeConfig, config_path)  # a --config named is read: one not TOML is refused
    _run_weekly(
        week=week,
        out=out,
        cluster=cluster,
        lake=lake,
        no_pdf=no_pdf,
        cost_per_gpu_hour=cost_per_gpu_hour,
        cost_per_kwh=cost_per_kwh,
        half_life_days=half_life_days,
        shares=dict(shares),
        email=_smtp(cfg, email_to) if cfg is not None else None,
        now=_utc_now,
    )


def _smtp(cfg: Any, email_to: str | None) -> tuple[Any, list[str]]:
    """The alerts' SMTP sender and the recipients (--email-to, else alerts.admin_emails)."""
    from app.alerts.settings import AlertsConfig, address_problem
    from app.alerts.smtp import SmtpSender, SmtpSettings

    alerts = cfg.section(AlertsConfig)
    if email_to:
        recipients = [r.strip() for r in email_to.split(",") if r.strip()]
        problem = address_problem(recipients)
        if problem:  # (before any report is written)
            raise click.BadParameter(problem, param_hint="--email-to")
    else:
        recipients = list(alerts.admin_emails)
    if not recipients:
        raise click.BadParameter(
            "--email needs recipients: --email-to, or alerts.admin_emails in the configuration "
            "($GPULEDGER_ALERTS_ADMIN_EMAILS)",
            param_hint="--email-to",
        )
    return SmtpSender(SmtpSettings.from_alerts(alerts)), recipients


def _default_week(found: DataWeeks, moment: dt.datetime, fallback: IsoWeek) -> IsoWeek:
    """The week `default_week` picks (saying why), else the last complete week."""
    from app.report.week import covered

    chosen = found.default(moment)
    if chosen is None:
        click.echo(f"No --week given and no week has data: reporting {fallback.label}.")
        return fallback
    complete = covered(chosen, found.data_end, moment, found.data_start)
    if complete:
        why = "the latest complete week with data"
    elif chosen.end > moment:
        why = "the current week, in progress"
    else:  # a past week the data begin or stop inside: not "in progress" (the lake is not live)
        why = "covered in part: the data begin or end inside it"
    click.echo(
        f"No --week given: reporting {chosen.label}, {why} (data in {found.span}); "
        "pass --week for another."
    )
    return chosen


def _run_weekly(
    *,
    week: Any,
    out: Path,
    cluster: str | None,
    lake: Lake,
    no_pdf: bool,
    cost_per_gpu_hour: float | None,
    cost_per_kwh: float | None,
    half_life_days: float,
    shares: dict[str, float],
    email: tuple[Any, list[str]] | None,
    now: Callable[[], dt.datetime],
) -> None:
    from app.report.data import (
        ReportSettings,
        assemble_report,
        clusters_in_lake,
        data_weeks,
        marts_built,
    )
    from app.report.outputs import write_report
    from app.report.week import last_complete_week

    moment = now()
    con = lake.connect(require=["jobs"])
    if not marts_built(con):
        raise AppError(
            f"the lake at {str(lake)!r} has jobs but no fairness_weekly mart (built before it "
            f"existed, or never attributed): run `gpuledger attribute --lake {lake}` first"
        )
    clusters = clusters_in_lake(con)
    if cluster is not None:
        if cluster not in clusters:
            raise AppError(
                f"no cluster {cluster!r} in the lake at {str(lake)!r}; "
                f"known: {', '.join(clusters) or 'none'}"
            )
        clusters = [cluster]
    target = week or _default_week(data_weeks(con, clusters), moment, last_complete_week(moment))
    settings = ReportSettings(
        half_life_days=half_life_days,
        cost_per_gpu_h=cost_per_gpu_hour,
        cost_per_kwh=cost_per_kwh,
        shares=shares,
    )
    unsent: list[str] = []
    for name in clusters:
        report = assemble_report(con, name, target, settings, moment)
        files = write_report(report, out, pdf=not no_pdf)
        status = (
            ""
            if report.has_data
            else f" (no data this week; {name} has data in {report.data_weeks.span})"
        )
        click.echo(f"{name} {target.label}{status}: {files.html}")
        if files.pdf:
            click.echo(f"{name} {target.label}: {files.pdf}")
        if email is not None:
            from app.alerts.errors import DeliveryError
            from app.report.mail import build_message

            sender, recipients = email
            try:
                sender.send(build_message(report, files, sender.settings.sender, recipients))
            except DeliveryError as exc:
                # the next clusters' reports are still written and sent (one relay refusing
                # the first left the others unwritten)
                click.echo(f"{name} {target.label}: written, not emailed: {exc}", err=True)
                unsent.append(f"{name} ({exc})")
                continue
            click.echo(f"{name} {target.label}: emailed to {', '.join(recipients)}")
    if unsent:
        raise AppError(f"not emailed: {'; '.join(unsent)}; the reports are written")


command = report_group
