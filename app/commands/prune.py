"""`gpuledger prune`: delete the raw samples of old days whose derived partitions stand for them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.commands.config import config_option
from app.errors import AppError, reports_errors
from app.options import lake_option, lake_writer, no_wait_option
from app.retention.settings import MAX_DAYS

if TYPE_CHECKING:
    from warehouse.lake import Lake

__all__ = ["command"]

# kept days listed by name, then counted
_LISTED = 10


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} GiB"


@click.command("prune")
@config_option
@lake_option
@click.option(
    "--keep-raw-days",
    type=click.IntRange(min=1, max=MAX_DAYS),
    default=None,
    help="Keep this many days of raw samples per cluster, counted back from the end of its "
    "data [default: retention.raw_days of the configuration, 90].",
)
@click.option("--dry-run", is_flag=True, help="Say what would go, change nothing.")
@no_wait_option
@reports_errors
def command(
    config_path: Path | None,
    lake: Lake,
    keep_raw_days: int | None,
    dry_run: bool,
    no_wait: bool,
) -> None:
    """Delete old raw samples, findings and alert deliveries by [retention].

    \b
    The 5-minute per-GPU-per-job buckets (gpu_job_buckets) and the marts built from them hold
    what every mart, report and dashboard page shows, so once a day's buckets are built from
    its samples as they are now, its sample files can go. A day older than the newest
    --keep-raw-days days of its cluster's data (the end of the data, not the wall clock) is
    pruned only when:
      - its partitions were built from exactly its files and its allocations now;
      - every file of its sample-level marts decodes;
      - its buckets count every one of its samples.
    Any other old day is kept, and the reason printed. Only gpu_samples is pruned; jobs,
    allocations and events stay. A day once pruned keeps its figures as they were built.
    Findings whose problem ended more than retention.findings_days before the end of their
    cluster's data go too, and alert messages settled more than retention.alert_ledger_days
    ago (with the notices no message or stored finding needs). `gpuledger run` does the same
    after each round. A setting of 0 keeps everything of its kind.

    \b
    Examples:
      gpuledger prune --lake ./lake --dry-run
      gpuledger prune --lake ./lake --keep-raw-days 30
    """
    import dataclasses

    from app.commands.detect import pipeline_and_lake
    from app.config import load_config
    from app.retention.prune import prune_lake
    from app.retention.settings import RetentionConfig

    retention = load_config(config_path).section(RetentionConfig)
    if keep_raw_days is not None:
        retention = dataclasses.replace(retention, raw_days=keep_raw_days)
    config, lake = pipeline_and_lake(config_path, lake)
    if not lake.exists():  # (a cron line with a mistyped lake "succeeded" and never pruned)
        raise AppError(f"no lake at {str(lake)!r}: give --lake (or $GPULEDGER_LAKE) a lake folder")
    with lake_writer(lake, "prune", no_wait):
        outcome = prune_lake(lake, config.attribution, retention, dry_run=dry_run)
    verb = "Would delete" if dry_run else "Deleted"
    plan = outcome.raw
    if plan is None:
        click.echo("Raw samples: every day kept (retention.raw_days is 0, or none landed).")
    else:
        keep = retention.raw_days
        samples = sum(day.samples for day in plan.prune)
        click.echo(
            f"{verb} the raw samples of {len(plan.prune):,} day(s) older than the newest {keep} "
            f"of each cluster: {samples:,} samples, {_size(plan.bytes)} "
            f"({sum(len(d.files) for d in plan.prune):,} files)."
        )
        for day in plan.prune[:_LISTED]:
            click.echo(f"  {day.key[0]} {day.key[1]}: {day.samples:,} samples, {_size(day.bytes)}")
        if len(plan.prune) > _LISTED:
            click.echo(f"  … and {len(plan.prune) - _LISTED:,} more")
        if plan.kept:
            click.echo(f"Kept {len(plan.kept):,} old day(s):")
            for (cluster, date), why in plan.kept[:_LISTED]:
                click.echo(f"  {cluster} {date}: {why}")
            if len(plan.kept) > _LISTED:
                click.echo(f"  … and {len(plan.kept) - _LISTED:,} more")
            if any("not built" in why for _, why in plan.kept):
                click.echo("Run `gpuledger attribute` first to build them.")
    if outcome.findings is not None:
        click.echo(
            f"{verb} {outcome.findings:,} finding(s) whose problem ended over "
            f"{retention.findings_days} days before the end of their cluster's data."
        )
    if outcome.messages is not None:
        click.echo(
            f"{verb} {outcome.messages:,} alert message(s) settled over "
            f"{retention.alert_ledger_days} days ago, and {outcome.notices:,} notice(s)."
        )
