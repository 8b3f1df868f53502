"""`gpuledger job JOBID`: one job's efficiency report and the change to make next time."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from app import json_text
from app.emissions_text import describe_emissions
from app.errors import AppError, reports_errors
from app.options import ClusterName, lake_option

if TYPE_CHECKING:
    from detectors.job_report import JobReport
    from warehouse.lake import Lake

__all__ = ["command", "render_json", "render_text"]

WIDTH = 80
SPARK_WIDTH = 32


def _pct(value: float | None) -> str:
    return "   -" if value is None else f"{value * 100:3.0f}%"


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _throughput_lines(job: Mapping[str, Any]) -> list[str]:
    """What the training loop reported (collector.throughput): tokens/s per GPU, MFU."""
    rate, mfu, params = job.get("tokens_per_s_per_gpu"), job.get("mfu"), job.get("model_params")
    if rate is None:
        return []
    line = f"  Training: {rate:,.0f} tokens/s per GPU"
    if params is not None:
        line += f", a {params / 1e9:,.3g} B-parameter model"
    lines = [line]
    if mfu is not None:
        lines.append(f"  MFU           {_bar(mfu)}  (6 × parameters × tokens/s ÷ the GPUs' peak)")
    elif params is not None:
        lines.append("  MFU: n/a (GPU model unknown, mixed or MIG, or the counts exceed its peak)")
    return lines


def _bar(value: float | None, width: int = 40) -> str:
    if value is None or not math.isfinite(value):  # (NaN: a figure another tool's file broke)
        return "[" + " " * width + "   n/a]"
    filled = round(min(max(value, 0.0), 1.0) * width)
    return "[" + "|" * filled + " " * (width - filled) + f" {value * 100:3.0f}%]"


def _clock(seconds: float | None) -> str:
    from detectors.slurm_time import hhmmss

    return "-" if seconds is None else hhmmss(seconds)


def _wrap(text: str, indent: str = "  ", rest: str = "      ", width: int = WIDTH) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=rest) or [indent]


def _title(text: str, width: int = WIDTH) -> list[str]:
    return ["", text.center(width).rstrip(), "=" * width]


def _when(ts: dt.datetime | None) -> str:
    return "-" if ts is None else ts.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _at_end(summary: dict[str, Any], width: int) -> list[str]:
    """The AdminComment summary (app.jobmail.summary) as a section; {} when there is none."""
    lines = _title("At the Job's End (AdminComment)", width)
    if not summary:
        return [*lines, "  No gpuledger summary in the job's AdminComment."]
    busy, idle = summary.get("busy"), summary.get("idle_gpu_h")
    if busy is None and idle is None:
        lines.append("  No GPU telemetry was known at the job's end.")
    else:
        lines.append(
            f"  GPU busy {_pct(busy).strip()}, {_num(idle, '.2f')} GPU-h idle; "
            f"bottleneck: {summary.get('diagnosis') or '-'}"
        )
    if summary.get("finding"):
        lines += _wrap(f"Main finding: {summary['finding']}", width=width)
    if summary.get("note"):
        lines += _wrap(f"Note: {summary['note']}", width=width)
    return lines


def render_text(
    report: JobReport,
    *,
    detected: bool = False,
    width: int = WIDTH,
    spark_width: int = SPARK_WIDTH,
    at_end: dict[str, Any] | None = None,
) -> str:
    """The report as jobstats users know it, plus per-GPU sparklines, diagnosis and findings.

    `width` is the width of its rules and wrapped paragraphs (job-end mail uses 78, with a
    shorter sparkline: `spark_width`). `at_end`, when given, is the summary stored in the
    job's AdminComment at its end ({}: none), shown after the overall utilization.
    """
    from app.sparkline import render_sparkline
    from detectors.job_advice import job_started, usage_runtime_s, when_no_advice

    job = report.job
    # a job cancelled while it waited: it held nothing, and no telemetry is missing (a job
    # requeued and pending again has no start either, and its earlier runs held GPUs)
    started = job_started(job)
    limit, runtime = job.get("time_limit_s"), job.get("runtime_s")
    used = f"  ({runtime / limit:.0%} used)" if limit and runtime is not None else ""
    nodes = job.get("nodes") or sorted({g["node"] for g in report.gpus if g.get("node")})
    models = sorted({g["model"] for g in report.gpus if g.get("model")})
    mem = job.get("mem_req_mib")
    lines = ["=" * width, "Job Statistics (gpuledger)".center(width).rstrip(), "=" * width]
    fields = [
        ("Job ID", job["job_id"]),
        ("User/Account", f"{job.get('user') or '-'}/{job.get('account') or '-'}"),
        ("Job Name", job.get("job_name") or "-"),
        ("State", job.get("state") or "-"),
        ("Nodes", f"{len(nodes)} ({', '.join(nodes)})" if nodes else "-"),
        (
            "GPUs",
            f"{job.get('gpus') or 0}" + (f" ({', '.join(models)})" if models else "")
            if started
            else f"{job.get('gpus_requested') or job.get('gpus') or 0} asked for, none held "
            "(it never started)",
        ),
        ("CPU Cores", job.get("cpus") or "-"),
        ("CPU Memory", "-" if mem is None else f"{mem / 1024:.0f} GiB"),
        ("QOS/Partition", f"{job.get('qos') or '-'}/{job.get('partition') or '-'}"),
        ("Cluster", job["cluster"]),
        # (sacct gives a job cancelled while pending its end as its start)
        ("Start Time", _when(job.get("start_ts")) if started else "-"),
        ("Run Time", _clock(runtime)),
        ("Time Limit", ("UNLIMITED" if limit is None else _clock(limit)) + used),
    ]
    covered = usage_runtime_s(job)
    requeued = _requeued(job, covered)
    if requeued:
        fields.append(("Requeued", requeued))
    if covered is not None and runtime is not None and covered < runtime - 60:
        # the mail's final run time, beyond what the lake has collected of the job yet
        fields.append(
            ("Collected", f"{_clock(covered)} so far (the figures below cover that part)")
        )
    lines += [f"{name:>15}: {value}" for name, value in fields]

    lines += _title("Overall Utilization", width)
    cpus, cpu_time, rss = job.get("cpus"), job.get("cpu_time_s"), job.get("max_rss_mib")
    if cpus and cpu_time is not None and covered:
        lines.append(f"  CPU util      {_bar(cpu_time / (cpus * covered))}")
    if mem and rss is not None:
        lines.append(f"  CPU memory    {_bar(rss / mem)}")
    if not started:
        lines.append("  The job never started: it held no GPUs and used nothing.")
    elif not job.get("samples") and job.get("alloc_gpu_h") is None:
        lines.append(
            "  No GPU telemetry was attributed to this job (if it ran on GPUs, build the "
            "marts: gpuledger attribute)."
        )
    elif not job.get("samples"):
        # the marts are built and hold its allocation: the hours it held are known, how
        # busy its GPUs were is not (a cluster without telemetry yet, or an unmapped job)
        lines += _wrap(
            f"GPU-hours: {_num(job.get('alloc_gpu_h'), '.2f')} allocated; no GPU telemetry was "
            "attributed to this job, so how busy its GPUs were is unknown.",
            width=width,
        )
    else:
        lines += [
            f"  GPU busy      {_bar(job.get('busy_mean'))}",
            f"  SM active     {_bar(job.get('sm_active_mean'))}",
            f"  Tensor active {_bar(job.get('tensor_active_mean'))}",
            f"  DRAM active   {_bar(job.get('dram_active_mean'))}",
            f"  GPU-hours: {_num(job.get('alloc_gpu_h'), '.2f')} allocated, "
            f"{_num(job.get('active_gpu_h'), '.2f')} active, "
            f"{_num(job.get('idle_gpu_h'), '.2f')} idle, "
            f"{_num(job.get('effective_gpu_h'), '.2f')} effective",
            f"  Energy: {_num(job.get('energy_kwh'), '.2f')} kWh at "
            f"{_num(job.get('power_w_mean'), '.0f')} W per GPU on average"
            + _unpowered(report.gpus, job.get("energy_kwh")),
            f"  {describe_emissions(job)}",
        ]
        if job.get("shared"):
            lines += [
                "  Shared GPU: other jobs held its GPUs at the same time. The allocated time is",
                "  split evenly among them; each sample counts for the jobs its row names, or for",
                "  all of them where it names none, split evenly. These figures are estimates.",
            ]

    lines += _throughput_lines(job)
    if at_end is not None:
        lines += _at_end(at_end, width)

    if report.gpus:
        lines += _title("Per-GPU Activity", width)
        lines.append(
            f"  {'GPU':<14} {'busy':>5} {'SM':>5} {'tens':>5} {'DRAM':>5} "
            f"{'mem GiB':>8} {'W':>5} {'kWh':>6}  busy over time"
        )
        for g in report.gpus:
            index = g.get("gpu_index")
            name = f"{g.get('node') or '?'}/{'?' if index is None else index}"
            if g.get("mig_instance") is not None:
                name += f".{g['mig_instance']}"
            fb = g.get("fb_used_mib_max")
            lines.append(
                f"  {name:<14} {_pct(g.get('busy_mean')):>5} {_pct(g.get('sm_active_mean')):>5} "
                f"{_pct(g.get('tensor_active_mean')):>5} {_pct(g.get('dram_active_mean')):>5} "
                f"{_num(None if fb is None else fb / 1024, '8.1f'):>8} "
                f"{_num(g.get('power_w_mean'), '5.0f'):>5} {_num(g.get('energy_kwh'), '6.2f'):>6}"
                f"  {render_sparkline(g.get('busy_series') or [], spark_width)}"
            )

    d = report.diagnosis
    lines += _title("Bottleneck", width)
    if started:
        lines += _wrap(f"{d.get('diagnosis')}: {d.get('advice') or ''}".rstrip(), width=width)
    else:
        lines.append("  not started: nothing ran, so there is nothing to diagnose.")

    lines += _title("Findings", width)
    if report.findings:
        for f in report.findings:
            stake = f.get("gpu_h_at_stake")
            extra = "" if stake is None else f" ({stake:.1f} GPU-h at stake)"
            if f.get("config_id"):  # which configuration produced it (config check shows it)
                extra += f" [config {f['config_id']}]"
            lines += _wrap(
                f"[{f['severity']}] {f['detector']}: {f.get('message') or ''}{extra}", width=width
            )
    else:
        lines.append(
            "  None: `gpuledger detect` found nothing for this job."
            if detected
            else "  None (run `gpuledger detect` to look for them)."
        )

    lines += _title("Next Time", width)
    if report.advice:
        for a in report.advice:
            lines.append(f"  {a.headline}")
            setting = a.setting(job.get("source"))
            if setting:
                lines.append(f"      {setting}")
            lines += _wrap(a.reason, "      ", "      ", width)
    else:
        lines += _wrap(when_no_advice(job), width=width)
    return "\n".join(lines) + "\n"


def _requeued(job: Mapping[str, Any], covered: float | None) -> str | None:
    """How often the scheduler requeued the job, and whether the figures hold its earlier runs
    (its GPU-hours are of every run the lake holds an allocation of, its Start Time and Run
    Time of the last): more GPU-hours allocated than its GPUs held in its last run say they do.
    None for a job never requeued."""
    from detectors.wording import counted, noun_for

    times = job.get("requeues")
    if not isinstance(times, int) or isinstance(times, bool) or times <= 0:
        return None
    said = counted(times, "time")
    alloc, gpus = job.get("alloc_gpu_h"), job.get("gpus")
    if alloc is None or not gpus or covered is None or job.get("start_ts") is None:
        return said
    last_run = gpus * covered / 3600  # the most its GPUs held in its last run
    if alloc > last_run * 1.01 + 0.01:
        return f"{said} (the figures below include its earlier {noun_for(times, 'run')})"
    return said


def _unpowered(gpus: list[dict[str, Any]], energy_kwh: float | None) -> str:
    """ ", of 1 of its 2 GPUs: the other reported no power" where some of the job's GPUs
    reported neither power nor energy: the figure is of the others alone (it read as the
    whole job's)."""
    silent = sum(1 for g in gpus if g.get("energy_kwh") is None)
    if energy_kwh is None or not silent or silent == len(gpus):
        return ""
    other = "the other" if silent == 1 else "the others"
    return f", of {len(gpus) - silent} of its {len(gpus)} GPUs: {other} reported no power"


def render_json(report: JobReport, at_end: dict[str, Any] | None = None) -> str:
    """The report as one JSON object (times in ISO 8601 UTC); with `at_end` (the AdminComment
    summary, {} for none) also `admin_comment`."""

    def default(value: Any) -> Any:
        if isinstance(value, dt.datetime | dt.date):
            return value.isoformat()
        return str(value)

    body: dict[str, Any] = report.to_dict()
    if at_end is not None:
        body["admin_comment"] = at_end or None
    return json_text.dumps(body, default=default)


@click.command("job")
@click.argument("job_id")
@click.option(
    "--cluster",
    type=ClusterName(),
    default=None,
    help="The job's cluster (needed only when several clusters have the id).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "summary"]),
    default="text",
    show_default=True,
    help="A report for the terminal, one JSON object for scripts, or the one-line JSON "
    "summary (busy, idle GPU-h, main finding) a slurmctld epilog stores in AdminComment.",
)
@click.option(
    "--admin-comment",
    is_flag=True,
    help="Also show the summary a slurmctld epilog stored in the job's AdminComment at its "
    "end (read with sacct on the job's cluster): for old jobs whose telemetry the lake no "
    "longer holds.",
)
@click.option(
    "--slurm-cluster",
    default=None,
    metavar="NAME",
    help="Slurm's name of the job's cluster (SLURM_CLUSTER_NAME, in a slurmctld epilog): the "
    "job is looked up on that cluster alone where the lake holds it (never another "
    "cluster's job of the same id), on any cluster where the lake names it otherwise.",
)
@click.option(
    "--job-name",
    default=None,
    metavar="NAME",
    help="The job's name as Slurm gives it (SLURM_JOB_NAME): a job of the same id in the lake "
    "with another name is another job, and is refused.",
)
@lake_option
@reports_errors
def command(
    job_id: str,
    cluster: str | None,
    fmt: str,
    admin_comment: bool,
    slurm_cluster: str | None,
    job_name: str | None,
    lake: Lake,
) -> None:
    """One job's efficiency report and the change to make next time.

    \b
    Like Princeton's jobstats, from the lake: the allocation, overall and per-GPU
    activity (busy, SM, tensor, DRAM, memory, power, energy) with a sparkline of
    each GPU's busy fraction over the run, the bottleneck (compute-, memory-,
    input- or communication-bound, idle, stalled), the job's findings (after
    `gpuledger detect`), and what to change next time (--gres, --time,
    --cpus-per-gpu, a MIG slice; for a hung job a collective timeout or a
    watchdog; after a node failure --requeue and checkpoints), the same advice
    as the dashboard's Job page.
    Examples:
      gpuledger job 123456
      gpuledger job 123456_7 --cluster della --format json
      gpuledger job 123456 --format summary   # for AdminComment (docs: job-end mail)
      gpuledger job 123456 --admin-comment    # with the summary stored at its end
    Build the marts first (`gpuledger attribute`) so the usage is current.
    """
    from app.jobmail.compose import lake_clusters, named_otherwise, slurm_cluster_in
    from detectors.job_report import AmbiguousJob, UnknownJob, load_job_report
    from warehouse.one_job import connect_job

    if cluster is None and slurm_cluster:
        cluster, _ = slurm_cluster_in(lake, slurm_cluster)
    con = connect_job(lake.root, job_id, cluster)  # the job's cluster and days, not the whole lake
    try:
        report = load_job_report(con, job_id, cluster)
    except (UnknownJob, AmbiguousJob) as exc:
        raise AppError(str(exc)) from exc
    otherwise = named_otherwise(report.job, job_name)
    if otherwise is not None:
        raise AppError(otherwise)
    at_end = None
    if admin_comment:
        from app.jobmail.summary import parse_admin_comment
        from collector.sources.slurm.admin_comment import read_admin_comment

        # the comment of the job on its own cluster: sacct without one asks the local cluster,
        # whose job of the same id is another where the lake holds several (Slurm's name for it
        # where given; else the lake's, which must then be Slurm's, as the mail's lookup wants)
        on = slurm_cluster or (report.job.get("cluster") if len(lake_clusters(lake)) > 1 else None)
        stored = read_admin_comment(job_id, cluster=on)
        at_end = parse_admin_comment(stored) or {}
    if fmt == "json":
        click.echo(render_json(report, at_end), nl=False)
    elif fmt == "summary":
        from app.jobmail.summary import render_summary

        click.echo(render_summary(report), nl=False)
    else:  # whether detect has stored findings in the lake at all, for "None" to mean none
        detected = bool(lake.table_files("findings"))
        click.echo(render_text(report, detected=detected, at_end=at_end), nl=False)
