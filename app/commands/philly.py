"""`gpuledger import philly DIR --cluster C`: land the public Microsoft Philly trace in the lake."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.errors import reports_errors
from app.options import ClusterName, lake_option

if TYPE_CHECKING:
    from warehouse.lake import Lake

__all__ = ["command"]


@click.group(name="import")
def command() -> None:
    """Import a public cluster trace in its own format into the lake."""


@command.command()
@click.argument("directory", metavar="DIR", type=click.Path(path_type=Path))
@click.option(
    "--cluster", type=ClusterName(), required=True, help="Cluster name to land the trace under."
)
@lake_option
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@reports_errors
def philly(directory: Path, cluster: str, lake: Lake, quiet: bool) -> None:
    """Import the Microsoft Philly trace (msr-fiddle/philly-traces) from DIR.

    \b
    DIR holds cluster_job_log, cluster_gpu_util and cluster_machine_list, each plain or
    gzipped (name.gz). Lands jobs (Pass → COMPLETED, Failed → FAILED, Killed → CANCELLED),
    job_gpus (one row per attempt, machine and GPU), gpu_samples (one per machine, minute and
    GPU with a value; an NA, empty or out-of-range cell is no sample: that minute is
    unobserved) and the gpus inventory. Job-log times are UTC;
    cluster_gpu_util times are US-Pacific and converted by their PDT/PST suffix. Where jobs or
    samples use more GPUs than cluster_machine_list gives a machine (msr-fiddle/philly-traces#8),
    the trace wins (an empty cluster_machine_list is warned of: the inventory is then the
    trace's alone). A job killed before any attempt held 0 GPUs (its size is not in the trace).
    Malformed lines are skipped and counted; a file that cannot be read whole fails the import
    with nothing landed. Importing the same DIR again replaces instead of duplicating; a
    cluster that holds another source's jobs or samples is refused (the trace is a cluster of
    its own).
    Run `gpuledger attribute` afterwards to give samples their jobs and build the marts.
    """
    from collector.sources.philly.trace import find_trace_files, import_philly

    if quiet:
        result = import_philly(directory, cluster, lake)
    else:
        size = find_trace_files(directory).gpu_util.stat().st_size
        label = "Reading cluster_gpu_util"
        with click.progressbar(length=max(size, 1), label=label, file=sys.stderr) as bar:

            def update(done: int, _total: int) -> None:
                bar.update(done - bar.pos)

            result = import_philly(directory, cluster, lake, progress=update)
    skipped = sum(result.malformed.values())
    click.echo(
        f"Imported Philly trace from {directory} into cluster {cluster!r} at {lake.root}: "
        f"{result.jobs:,} jobs, {result.allocations:,} allocations "
        f"({result.job_gpus:,} job-GPU rows), {result.samples:,} samples from "
        f"{result.util_lines:,} lines, {result.gpus:,} GPUs in the inventory; "
        f"{skipped:,} malformed lines skipped"
        + (
            " (" + ", ".join(f"{name} {n:,}" for name, n in result.malformed.items() if n) + ")"
            if skipped
            else ""
        )
        + "."
    )
    if result.machine_list_empty:
        click.echo(
            f"Warning: {find_trace_files(directory).machine_list} lists no machine (empty or "
            "unreadable): the inventory comes from cluster_gpu_util and cluster_job_log alone, "
            "so a machine they never show is missing and a machine's GPU count is only what "
            "they show in use.",
            err=True,
        )
    notes = []
    if result.invalid_values:
        notes.append(
            f"{result.invalid_values:,} utilisation values not a number in 0-100 "
            "(e.g. -1.0) landed as null"
        )
    if result.attempts_without_times:
        notes.append(f"{result.attempts_without_times:,} attempts without start/end not landed")
    if result.machines_recounted and not result.machine_list_empty:
        notes.append(
            f"{result.machines_recounted:,} machines hold more GPUs than cluster_machine_list "
            "says (msr-fiddle/philly-traces#8); their GPU count was taken from the trace"
        )
    for note in notes:
        click.echo(f"Note: {note}.", err=True)
    for example in result.examples:
        click.echo(f"Skipped: {example}", err=True)
    click.echo(f"Next: gpuledger attribute --lake {lake.root}", err=True)
