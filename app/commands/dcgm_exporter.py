"""`gpuledger collect dcgm-exporter`: scrape dcgm-exporter /metrics endpoints into the lake.

The command is exported as `command_dcgm_exporter`; the `collect` group attaches it. The
collector layer is imported inside the function, so `--help` loads nothing heavy.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import TYPE_CHECKING

import click

from app.errors import AppError, reports_errors
from app.options import ClusterName, Finite, lake_option
from collector.sources.http_url import redact_url

if TYPE_CHECKING:
    from collector.sources.dcgm_exporter.scrape import ScrapeOutcome, ScrapeSummary
    from warehouse.lake import Lake

__all__ = ["command_dcgm_exporter"]

_MAX_FAILURES_LISTED = 3


def _format_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{reason} {n:,}" for reason, n in sorted(counts.items()))


def _round_line(outcome: ScrapeOutcome) -> str:
    """One line per exporter per round, for the --interval loop (on stderr)."""
    url = redact_url(outcome.url)
    if outcome.error is not None:
        return f"{url}: not scraped after {outcome.attempts} attempt(s): {outcome.error}"
    when = outcome.ts.strftime("%H:%M:%S") if outcome.ts is not None else "?"
    skipped = f"; skipped {_format_counts(outcome.counts)}" if outcome.counts else ""
    return (
        f"{when} {url}: {outcome.samples} sample row(s), {outcome.events} event(s), "
        f"{outcome.job_gpus} job_gpus row(s){skipped}"
    )


def render_summary(summary: ScrapeSummary, exporters: int, lake: Lake) -> str:
    """What the run landed, what it skipped by reason, and which exporters failed."""
    lines = [
        f"Landed {summary.samples:,} gpu_samples row(s), {summary.events:,} gpu_events row(s) "
        f"and {summary.job_gpus:,} job_gpus row(s) from {summary.scrapes:,} scrape(s) of "
        f"{exporters} exporter(s) in {summary.rounds} round(s) into {lake}",
        "Lines skipped or values nulled, by reason: "
        + (_format_counts(dict(summary.skipped)) or "none"),
    ]
    for url, failed in sorted(summary.failures.items()):
        error = summary.last_error[url]
        lines.append(f"Failed: {redact_url(url)} in {failed} round(s); last error: {error}")
    return "\n".join(lines)


def _urls(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    from collector.errors import ConfigError
    from collector.sources.dcgm_exporter.scrape import check_url

    for url in value:
        try:
            check_url(url)
        except ConfigError as exc:
            raise click.BadParameter(str(exc)) from exc
    return value


@click.command(name="dcgm-exporter")
@click.option(
    "--url",
    "urls",
    multiple=True,
    required=True,
    metavar="URL",
    callback=_urls,
    help="A dcgm-exporter endpoint, e.g. http://node01:9400/metrics (repeatable).",
)
@click.option(
    "--cluster", type=ClusterName(), required=True, help="Cluster name the samples land under."
)
@click.option("--once", is_flag=True, help="Scrape every exporter once and exit (the default).")
@click.option(
    "--interval",
    # (a row stands for S: above an hour it is no sampling step, and the marts take it
    # for none: sql/views/sample_steps.sql)
    type=Finite(min=1.0, max=3600.0),
    default=None,
    metavar="S",
    help="Scrape every S seconds until Ctrl-C / SIGTERM (the current round still lands).",
)
@click.option(
    "--timeout",
    type=Finite(min=0.1, max=600.0),
    default=10.0,
    show_default=True,
    metavar="S",
    help="Seconds to wait for one exporter's response.",
)
@click.option(
    "--attempts",
    type=click.IntRange(min=1, max=10),
    default=3,
    show_default=True,
    help="Tries per exporter per round before it is reported as down.",
)
@lake_option
@reports_errors
def command_dcgm_exporter(
    urls: tuple[str, ...],
    cluster: str,
    once: bool,
    interval: float | None,
    timeout: float,
    attempts: int,
    lake: Lake,
) -> None:
    """Scrape dcgm-exporter /metrics endpoints into gpu_samples.

    \b
    Each scrape becomes one gpu_samples row per GPU (or MIG instance), keyed by UUID; exporter
    generations up to 4.10 are understood (renamed fields, Hz/J/bytes/ratio units). hpc_job
    and pod labels land as job_gpus rows (mapping 'exporter-label'); new XIDs, volatile DBE ECC
    errors, row-remap failures and HW slowdown / thermal / power-brake throttling land as
    gpu_events. Bad lines and values (e.g. 'ERROR - FAILED TO CONVERT TO STRING', DCGM
    sentinels) are skipped and counted. A scrape re-landed with the same time replaces itself.
    With --once a row spans 30 s (the exporter's default collect interval); with --interval S
    it spans S.

    \b
    Examples:
      gpuledger collect dcgm-exporter --cluster della --url http://g001:9400/metrics --once
      gpuledger collect dcgm-exporter --cluster della --interval 30 \\
          --url http://g001:9400/metrics --url http://g002:9400/metrics
    """
    from collector.sources.dcgm_exporter.scrape import scrape_exporters, stop_on_signals

    if once and interval is not None:
        raise click.BadParameter("use either --once or --interval S, not both", param_hint="--once")
    stop = threading.Event()
    looping = interval is not None

    def report(outcome: ScrapeOutcome) -> None:
        if looping:
            click.echo(_round_line(outcome), err=True)

    started = dt.datetime.now(dt.UTC)
    with stop_on_signals(stop):
        summary = scrape_exporters(
            list(urls),
            cluster,
            lake,
            interval_s=interval,
            timeout_s=timeout,
            attempts=attempts,
            stop=stop,
            on_scrape=report,
        )
    exporters = len(dict.fromkeys(urls))
    click.echo(render_summary(summary, exporters, lake))
    if looping:
        elapsed = dt.datetime.now(dt.UTC) - started
        click.echo(f"Stopped after {elapsed.total_seconds():.0f} s.", err=True)
        return
    if summary.failures:
        failed = sorted(summary.failures)
        listed = "; ".join(f"{u} ({summary.last_error[u]})" for u in failed)
        if len(failed) > _MAX_FAILURES_LISTED:
            listed = "; ".join(failed[:_MAX_FAILURES_LISTED]) + f"; … ({len(failed)} in all)"
        raise AppError(f"{len(failed)} of {exporters} exporter(s) could not be scraped: {listed}")
