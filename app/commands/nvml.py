"""`gpuledger collect nvml`: the node agent (NVML sampling, PID → job mapping, spool → lake).

The `collect` group attaches `command`. The collector layer and nvidia-ml-py are imported inside
the function, so `--help` works on a machine without either.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.errors import reports_errors
from app.options import Finite, NonEmptyPath, lake_option

if TYPE_CHECKING:
    from collector.sources.nvml.agent import AgentSummary, ProcessSeen, TickResult
    from warehouse.lake import Lake

__all__ = ["command", "default_spool"]

SYSTEM_SPOOL = Path("/var/spool/gpuledger")
LOCAL_SPOOL = Path("spool")


def default_spool() -> Path:
    """/var/spool/gpuledger where it exists or can be created and written, else ./spool."""
    probe = SYSTEM_SPOOL if SYSTEM_SPOOL.exists() else SYSTEM_SPOOL.parent
    return SYSTEM_SPOOL if os.access(probe, os.W_OK | os.X_OK) else LOCAL_SPOOL


def _format_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{reason} {n:,}" for reason, n in sorted(counts.items()))


def _tick_line(tick: TickResult) -> str:
    """One line per tick for the --interval loop (on stderr)."""
    jobs = ", ".join(tick.jobs) if tick.jobs else "none"
    line = (
        f"{tick.ts:%H:%M:%S} {tick.gpus} GPU(s), {tick.samples} sample row(s), "
        f"{tick.events} event(s), jobs: {jobs}"
    )
    if tick.offline:
        line += f"; OFFLINE: {', '.join(tick.offline)}"
    if tick.landed.error is not None:
        line += f"; lake not reachable, {tick.landed.pending} file(s) kept in the spool"
    return line


def _process_line(seen: ProcessSeen) -> str:
    """E.g. `pid 4242 on GPU 0 (GPU-…): Slurm job 1234, step 0` (for --show-processes)."""
    where = f"GPU {seen.gpu_index}" + (
        f" MIG {seen.mig_instance}" if seen.mig_instance is not None else ""
    )
    owner = seen.owner
    if owner is None:
        who = f"no job ({seen.reason})"
    elif owner.kind == "slurm":
        who = f"Slurm job {owner.job_id}" + (f", step {owner.step}" if owner.step else "")
    else:
        who = f"Kubernetes pod {owner.job_id}"
    if owner is not None and owner.container:
        who += f", container {owner.container}"
    return f"pid {seen.pid} on {where} ({seen.gpu_uuid}): {who}"


def render_summary(summary: AgentSummary, spool: Path, lake: Lake) -> str:
    """What the run sampled and landed, and what was nulled or skipped by reason."""
    lines = [
        f"Sampled {summary.samples:,} gpu_samples row(s), {summary.events:,} gpu_events row(s) "
        f"and {summary.job_gpus:,} job_gpus interval update(s) in {summary.ticks} tick(s); "
        f"landed {summary.landed_files:,} spooled file(s) from {spool} into {lake}",
        "Fields nulled or PIDs unattributed, by reason: "
        + (_format_counts(dict(summary.counts)) or "none"),
    ]
    if summary.pending:
        lines.append(
            f"Not landed yet: {summary.pending} file(s) stay in {spool} "
            f"({summary.last_land_error}); the next run lands them"
        )
    return "\n".join(lines)


@click.command(name="nvml")
@click.option("--cluster", required=True, help="Cluster name the samples land under.")
@click.option(
    "--interval",
    # (a row stands for S: above an hour it is no sampling step, and the marts take it
    # for none: sql/views/sample_steps.sql)
    type=Finite(min=1.0, max=3600.0),
    default=30.0,
    show_default=True,
    metavar="S",
    help="Sample every S seconds; also the span each row stands for (with --once too).",
)
@click.option("--once", is_flag=True, help="Sample once, land, and exit (e.g. from cron).")
@click.option(
    "--spool",
    type=NonEmptyPath(file_okay=False, path_type=Path),
    default=None,
    help="Local spool folder (default: /var/spool/gpuledger if writable, else ./spool).",
)
@click.option(
    "--node",
    default=None,
    help="Host name the rows carry (default: this host's short name).",
)
@click.option(
    "--proc-root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path("/proc"),
    show_default=True,
    help="The host's /proc (e.g. /host/proc when the agent runs in a container).",
)
@click.option(
    "--pod-logs",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("/var/log/pods"),
    show_default=True,
    help="The kubelet's pod log folders (<namespace>_<pod>_<uid>), which name a pod's job "
    "<namespace>/<pod> from the UID its cgroup gives, as the Kubernetes collector keys it "
    "(e.g. /host/var/log/pods in a container). Where none names it, the UID.",
)
@click.option(
    "--show-processes",
    is_flag=True,
    help="Print each GPU process and the job its cgroup maps it to (to check the mapping).",
)
@lake_option
@reports_errors
def command(
    cluster: str,
    interval: float,
    once: bool,
    spool: Path | None,
    node: str | None,
    proc_root: Path,
    pod_logs: Path,
    show_processes: bool,
    lake: Lake,
) -> None:
    """Run the NVML node agent: sample this node's GPUs into the lake.

    \b
    Every tick writes one gpu_samples row per GPU (per MIG instance where MIG is on): GPU
    utilisation, memory used/free (MiB), power (W), energy (J), GPU/memory temperature,
    SM/memory clocks, clock-event reasons, volatile ECC counts, row-remap state and the last
    XID. Fields the GPU does not support are left null and counted. Each compute process's
    PID is mapped through /proc/<pid>/cgroup to its Slurm job or Kubernetes pod, giving
    job_gpus intervals (mapping 'nvml-cgroup'). XIDs, a GPU going offline, new ECC DBE
    errors, row-remap failures and HW slowdown / thermal / power-brake throttling land as
    gpu_events. Records applications report with collector.throughput land too.

    \b
    Rows are written to the local spool first and then landed in the lake; if the lake
    cannot be written they stay in the spool and land on a later tick, never twice.
    Needs nvidia-ml-py (pip install 'gpuledger[nvml]') and the host PID namespace.

    \b
    Examples:
      gpuledger collect nvml --cluster della --lake /shared/lake
      gpuledger collect nvml --cluster della --interval 60 --once   # from cron, every minute
    """
    from collector.sources.dcgm_exporter.scrape import stop_on_signals
    from collector.sources.nvml.agent import AgentConfig, run_agent

    config = AgentConfig(
        cluster=cluster,
        node=socket.gethostname().split(".")[0] if node is None else node,
        spool=spool or default_spool(),
        lake=lake,
        interval_s=interval,
    )
    stop = threading.Event()

    def report(tick: TickResult) -> None:
        if not once:
            click.echo(_tick_line(tick), err=True)
        if show_processes:
            for seen in tick.processes:
                click.echo(_process_line(seen))

    with stop_on_signals(stop):
        summary = run_agent(
            config, once=once, proc_root=proc_root, pod_logs=pod_logs, stop=stop, on_tick=report
        )
    click.echo(render_summary(summary, config.spool, lake))
