"""`gpuledger whatif`: replay the recorded workload under the recorded or a proposed policy.

`whatif replay` replays a period and says how far the replay is from what happened (the
calibration every what-if is read beside); `whatif compare` replays it twice, as recorded and
with `--set` changes, and prints the two side by side.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from app.errors import AppError, reports_errors
from app.files_out import write_parquet
from app.options import ClusterName, Timestamp, lake_option, progress_bar

if TYPE_CHECKING:
    from app.whatif_kueue import KueueRun
    from detectors.replay.engine import Outcome, Workload
    from detectors.replay.metrics import Calibration
    from detectors.replay.policy import Policy
    from warehouse.lake import Lake

__all__ = ["command"]

SET_HELP = (
    "A policy change, KEY=VALUE in Slurm's names (repeatable), e.g. "
    "partition.gpu.MaxTime=08:00:00, assoc.vision.GrpTRES=gres/gpu=16, "
    "priority.PriorityWeightFairshare=20000, bf_window=2880, node.gpu-07.State=DRAIN, "
    "qos.high.Priority=1000, PreemptType=preempt/qos, qos.high.Preempt=scavenger; on a "
    "Kueue cluster in Kueue's, e.g. clusterqueue.team-a.nominalQuota.nvidia.com/gpu=16, "
    "clusterqueue.team-a.preemption.reclaimWithinCohort=Any."
)

MAX_DRAWS = 50
DRAWS_HELP = (
    f"Replay N times (1-{MAX_DRAWS}) and report the mean: draw 0 runs the jobs for their "
    "recorded run times, each other draw moves every run time by -1, 0 or +1 s at random "
    "(the same N: the same figures). Slurm runs a job's `sleep 10` for 10 or 11 s from one "
    "run to the next, so the record is one draw of several, and under a tight limit that "
    "second decides which job starts first (an account's mean wait moved ±10 % on a real "
    "Slurm); the mean does not hang on it. Applies to every replay the command makes "
    "(baseline, proposal, calibration); costs N replays' time."
)


def _span(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _stamp(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M")


@dataclass(frozen=True, slots=True)
class _Run:
    workload: Workload
    recorded: Policy
    proposed: Policy
    changes: list[str]
    source: str  # where the recorded policy came from


def _recorded(settings: Sequence[tuple[str, str]]) -> str:
    """What of the lake's record the recorded policy comes from: a lake with shares alone
    was said to hold a `collect slurm-config` snapshot."""
    shares = [key for key, _ in settings if key.endswith(".Shares")]
    parts = ["the scheduler configuration (`collect slurm-config`)"] * (len(shares) < len(settings))
    parts += ["the fair-share shares (`collect slurm-shares`)"] * bool(shares)
    return "the lake's record: " + " and ".join(parts)


def _prepare(
    lake: Lake,
    cluster: str,
    slurm_conf: Path | None,
    since: dt.datetime | None,
    until: dt.datetime | None,
    changes: Sequence[str],
) -> _Run:
    from detectors.replay.policy import Policy, PolicyError, apply_settings
    from detectors.replay.workload import (
        NoWorkload,
        check_changes,
        load_workload,
        recorded_settings,
    )

    con = lake.connect(require=("jobs",))
    try:
        workload = load_workload(con, cluster, since, until)
        settings = recorded_settings(con, cluster)
        recorded = apply_settings(Policy(), settings)
    except NoWorkload as exc:
        raise AppError(str(exc)) from None
    finally:
        con.close()
    if slurm_conf is not None:
        from collector.sources.slurm.conf import settings_from_slurm_conf

        try:
            text = slurm_conf.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise AppError(f"--slurm-conf {slurm_conf}: {exc.strerror or exc}") from None
        try:
            recorded = apply_settings(recorded, settings_from_slurm_conf(text, str(slurm_conf)))
        except PolicyError as exc:
            raise AppError(f"--slurm-conf {slurm_conf}: {exc}") from None
        source = f"{_recorded(settings)} and {slurm_conf}" if settings else str(slurm_conf)
    elif settings:
        source = _recorded(settings)
    else:
        source = (
            "Slurm's defaults: none recorded (priority/basic: first come, first served; "
            "backfill; no limits) — set another with --slurm-conf or try one with --set"
        )
    if not workload.nodes and not recorded.node_gres:
        raise AppError(
            f"cluster {cluster!r}: no GPU nodes to replay on — the lake's `gpus` table has none "
            "and no scheduler configuration names any (run `gpuledger collect slurm-config "
            f"--cluster {cluster}`, or pass --slurm-conf)"
        )
    try:
        proposed = apply_settings(recorded, changes)
        check_changes(workload, recorded, changes)
    except PolicyError as exc:
        raise click.BadParameter(str(exc), param_hint="--set") from None
    return _Run(workload, recorded, proposed, list(changes), source)


def _kueue(
    lake: Lake,
    cluster: str,
    slurm_conf: Path | None,
    since: dt.datetime | None,
    until: dt.datetime | None,
    changes: Sequence[str],
) -> KueueRun | None:
    """The Kueue replay's run when most of the cluster's jobs came from Kubernetes, else None
    (the Slurm replay)."""
    from app.whatif_kueue import prepare_kueue
    from detectors.replay.kueue.workload import cluster_scheduler

    con = lake.connect(require=("jobs",))
    try:
        if cluster_scheduler(con, cluster) != "kueue":
            return None
        if slurm_conf is not None:
            raise click.UsageError(
                f"--slurm-conf is for Slurm clusters; {cluster!r} is a Kubernetes (Kueue) cluster"
            )
        return prepare_kueue(con, cluster, since, until, changes)
    finally:
        con.close()


def _replay(
    w: Workload,
    policy: Policy,
    label: str,
    quiet: bool,
    draws: int,
    *,
    past_end: bool = False,
) -> Outcome:
    """One replay, or with `draws` > 1 the mean of that many (`replay_draws`)."""
    from detectors.replay.draws import replay_draws

    first = float(w.submit_e.min()) if w.size else w.horizon_e
    span = max(w.horizon_e - first, 1.0)
    total = 1000 * draws
    with progress_bar(label, total, enabled=not quiet) as update:
        out = replay_draws(
            w,
            policy,
            draws,
            past_end=past_end,
            progress=lambda d, t: update(
                d * 1000 + min(1000, int((t - first) / span * 1000)), total
            ),
        )
        update(total, total)
    return out


def _draws_words(draws: int) -> str:
    """ ", the mean of N replays …" where --draws N > 1, else nothing."""
    if draws == 1:
        return ""
    return f", the mean of {draws} replays with run times moved by -1/0/+1 s (--draws)"


def _preempted_words(out: Outcome) -> str:
    """ ", N preempted by a QOS" where the replay preempted any job, else nothing."""
    if out.preemptions is None or not out.preemptions.any():
        return ""
    return f", {int((out.preemptions > 0).sum()):,} preempted by a QOS"


def _fates(out: Outcome) -> str:
    """What became of a what-if's jobs, adding up to them all: started (some cut short by a
    limit), held pending for good by a limit (a time limit held so, or a cap below the job's
    GPUs), or never started otherwise (cancelled while pending, no node to hold it)."""
    started = out.start_e == out.start_e  # (not NaN)
    held = out.held_by_limit & ~started
    other = int((~started & ~held).sum())
    said = (
        f"of {out.start_e.size:,} jobs, {int(started.sum()):,} start "
        f"({int((out.cut_by_limit & started).sum()):,} of them cut short by a limit), "
        f"{int(held.sum()):,} held pending by a limit (a time limit or a GPU cap)"
    )
    if other:
        said += f", {other:,} never start (cancelled while pending, or no node can hold them)"
    return said


def _calibration_lines(c: Calibration, what: str = "the recorded policy replayed") -> list[str]:
    lines = [
        f"Calibration: {what} against what happened ({c.jobs:,} jobs "
        f"started in both; {c.started_only_real:,} only in the record, "
        f"{c.started_only_replay:,} only in the replay)",
        f"  |replayed − real start|   median {_span(c.median_abs_start_s)}, "
        f"p90 {_span(c.p90_abs_start_s)}",
        f"  start-order rank correlation   {c.rank_correlation:.3f}",
        "  mean wait per account      real      replayed    difference",
    ]
    for account, jobs, real, replayed, rel in c.wait_by_account.iter_rows():
        lines.append(
            f"    {account[:20]:<20} {_span(real):>10}  {_span(replayed):>10}   {rel * 100:+6.1f} %"
            f"  ({jobs:,} jobs)"
        )
    return lines + _caution(c)


# A replay whose starts are off by more than this (and by more than the jobs' typical wait) is
# far from what happened: its figures are a direction, not numbers to quote.
CAUTION_START_S = 600.0


def _caution(c: Calibration) -> list[str]:
    """One line where the recorded policy replays far from the record: the probe's replay put
    starts 4 h 26 min off while every figure was printed as exact."""
    frame = c.wait_by_account
    jobs = float(frame["jobs"].sum()) if frame.height else 0.0
    typical = float((frame["jobs"] * frame["real_wait_s"]).sum()) / jobs if jobs else 0.0
    off = c.median_abs_start_s
    if not c.jobs or off != off or off <= max(CAUTION_START_S, typical):
        return []
    return [
        f"  Caution: starts replay {_span(off)} off at the median, more than the jobs' mean "
        f"wait ({_span(typical)}): the replay is far from what happened, and a difference "
        "between the columns smaller than that is within its own error."
    ]


def _header(run: _Run) -> str:
    w = run.workload
    past = (
        " (a what-if goes on past it until every job it can start has started)"
        if run.changes
        else ""
    )
    return (
        f"Cluster: {len(w.nodes)} nodes, {int(w.node_gpus.sum()):,} GPUs; {w.size:,} GPU jobs "
        f"submitted {_stamp(float(w.submit_e.min()))} … {_stamp(float(w.submit_e.max()))} UTC; "
        f"replayed to the end of the data, {_stamp(w.horizon_e)} UTC{past}\n"
        f"Recorded policy: {run.source}"
    )


def _options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        (
            lake_option,
            click.option(
                "--cluster", type=ClusterName(), required=True, help="The cluster to replay."
            ),
            click.option(
                "--slurm-conf",
                type=click.Path(dir_okay=False, path_type=Path),
                default=None,
                help="Read the recorded policy from this slurm.conf (partitions, nodes, "
                "priority weights, backfill parameters) instead of Slurm's defaults.",
            ),
            click.option(
                "--since", type=Timestamp(), default=None, help="First submit time to replay."
            ),
            click.option(
                "--until", type=Timestamp(), default=None, help="Replay jobs submitted before."
            ),
            click.option("--set", "changes", multiple=True, metavar="KEY=VALUE", help=SET_HELP),
            click.option(
                "--draws",
                type=click.IntRange(1, MAX_DRAWS),
                default=1,
                show_default=True,
                help=DRAWS_HELP,
            ),
            click.option("-q", "--quiet", is_flag=True, help="No progress bar."),
        )
    ):
        func = option(func)
    return func


@click.group(name="whatif")
def command() -> None:
    """Replay the recorded workload under the recorded or a proposed scheduler policy.

    The replay models Slurm's main scheduler and backfill, multifactor priority with
    fair-share, association GPU limits and partition time limits, over the GPU nodes the
    lake knows; on a Kubernetes cluster, Kueue's admission (ClusterQueue quotas, cohorts,
    borrowing, preemption, fair sharing). Read every what-if beside its calibration: how far
    the replay of the recorded policy is from what really happened.

    Example:  gpuledger whatif compare --cluster della --set partition.gpu.MaxTime=08:00:00
    """


@command.command(name="replay")
@_options
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write one row per job (real and replayed start and end, cut or held by a limit) "
    "to this Parquet file.",
)
@reports_errors
def command_replay(
    lake: Lake,
    cluster: str,
    slurm_conf: Path | None,
    since: dt.datetime | None,
    until: dt.datetime | None,
    changes: tuple[str, ...],
    draws: int,
    quiet: bool,
    out: Path | None,
) -> None:
    """Replay a period; with no --set, the recorded policy, and how far it is from the record.

    Example:  gpuledger whatif replay --cluster della --since 2026-11-01 --out replay.parquet
    """
    from detectors.replay.engine import within_data
    from detectors.replay.metrics import calibrate, outcome_table

    kueue = _kueue(lake, cluster, slurm_conf, since, until, changes)
    if kueue is not None and draws > 1:
        raise click.UsageError(
            f"--draws is for Slurm clusters (Slurm's second-to-second wobble); {cluster!r} is "
            "a Kubernetes (Kueue) cluster"
        )
    if kueue is not None:
        from app.whatif_kueue import echo_kueue_replay

        echo_kueue_replay(kueue, quiet, out)
        return
    run = _prepare(lake, cluster, slurm_conf, since, until, changes)
    began = time.perf_counter()
    baseline = _replay(run.workload, run.recorded, "replaying", quiet, draws)
    seconds = time.perf_counter() - began
    click.echo(_header(run))
    click.echo(
        f"Replayed {run.workload.size:,} jobs in {seconds:.1f} s{_draws_words(draws)}"
        f"{_preempted_words(baseline)}."
    )
    for line in _calibration_lines(calibrate(run.workload, baseline)):
        click.echo(line)
    result = baseline
    if run.changes:
        result = _replay(
            run.workload, run.proposed, "replaying the change", quiet, draws, past_end=True
        )
        click.echo(
            f"With {', '.join(run.changes)}: {_fates(result)}{_preempted_words(result)}"
            " (see `gpuledger whatif compare` for the side-by-side figures)."
        )
        # how near the changed policy comes to the record: a policy the lake did not record
        # (a trace's quotas, say) can be tried as the baseline, and kept if it calibrates better
        # (cut at the end of the data as the baseline's is: the record stops there)
        changed = within_data(run.workload, result)
        for line in _calibration_lines(calibrate(run.workload, changed), "with the changes"):
            click.echo(line)
    if out is not None:
        import polars as pl

        table = outcome_table(run.workload, result)
        table = table.insert_column(0, pl.Series("cluster", [cluster] * table.height))
        try:
            write_parquet(table, out)
        except OSError as exc:
            raise AppError(f"--out {out}: {exc.strerror or exc}") from None
        click.echo(f"Wrote {table.height:,} rows to {out}.")


@command.command(name="compare")
@_options
@reports_errors
def command_compare(
    lake: Lake,
    cluster: str,
    slurm_conf: Path | None,
    since: dt.datetime | None,
    until: dt.datetime | None,
    changes: tuple[str, ...],
    draws: int,
    quiet: bool,
) -> None:
    """Baseline (the recorded policy) against the proposal (--set), side by side.

    Prints queue waits p50/p95 per account and per job size, GPU occupancy, each account's
    share against its entitlement and Jain's fairness index, and the jobs a new time limit
    cuts short (and the GPU-hours they lose) or keeps pending.

    Example:  gpuledger whatif compare --cluster della --set assoc.vision.GrpTRES=gres/gpu=16
    """
    from detectors.replay.engine import within_data
    from detectors.replay.metrics import (
        calibrate,
        compare,
        slurm_capacity_gpu_h,
        slurm_entitlement,
    )

    if not changes:
        raise click.UsageError("compare needs at least one --set KEY=VALUE (the proposal)")
    kueue = _kueue(lake, cluster, slurm_conf, since, until, changes)
    if kueue is not None and draws > 1:
        raise click.UsageError(
            f"--draws is for Slurm clusters (Slurm's second-to-second wobble); {cluster!r} is "
            "a Kubernetes (Kueue) cluster"
        )
    if kueue is not None:
        from app.whatif_kueue import echo_kueue_compare

        echo_kueue_compare(kueue, quiet)
        return
    run = _prepare(lake, cluster, slurm_conf, since, until, changes)
    w = run.workload
    # both past the end of the data, so a job the proposal delays past it still starts (and
    # the baseline is measured the same way); the calibration is the baseline cut at the end
    baseline = _replay(w, run.recorded, "replaying the baseline", quiet, draws, past_end=True)
    proposal = _replay(w, run.proposed, "replaying the proposal", quiet, draws, past_end=True)
    capacity = (slurm_capacity_gpu_h(w, run.recorded), slurm_capacity_gpu_h(w, run.proposed))
    c = compare(w, baseline, proposal, slurm_entitlement(w, run.recorded), capacity)
    click.echo(_header(run))
    click.echo(f"Proposal: {', '.join(run.changes)}")
    if draws > 1:
        click.echo(f"Each side: {_draws_words(draws).lstrip(', ')}")
    click.echo("")
    click.echo(f"{'':34}{'baseline':>14}{'proposal':>14}")
    click.echo(f"{'jobs started':34}{c.started[0]:>14,}{c.started[1]:>14,}")
    click.echo(f"{'GPU-hours run':34}{c.gpu_h[0]:>14,.1f}{c.gpu_h[1]:>14,.1f}")
    click.echo(f"{'GPU occupancy':34}{c.occupancy[0]:>13.1%} {c.occupancy[1]:>13.1%}")
    click.echo(f"{'Jain index (share ÷ entitlement)':34}{c.jain[0]:>14.3f}{c.jain[1]:>14.3f}")
    click.echo(
        f"Cut short by a new limit: {c.cut_jobs:,} jobs, {c.cut_gpu_h:,.1f} GPU-h lost; "
        f"left queued at the end of the data that the recorded policy started: "
        f"{c.held_jobs:,} jobs."
    )
    if any(c.preempted):
        click.echo(
            f"Preempted by a QOS: {c.preempted[0]:,} jobs in the baseline, {c.preempted[1]:,} "
            f"in the proposal; runs a requeue threw away: {c.requeued_gpu_h[0]:,.1f} and "
            f"{c.requeued_gpu_h[1]:,.1f} GPU-h."
        )
    click.echo("")
    heads = ("base p50", "base p95", "new p50", "new p95")
    click.echo(f"{'queue wait':24}" + "".join(f"{h:>14}" for h in heads))
    for group, key, _bj, b50, b95, _nj, n50, n95 in c.waits.iter_rows():
        label = f"{'account' if group == 'account' else 'size'} {key}"[:24]
        click.echo(f"{label:24}" + "".join(f"{_span(v):>14}" for v in (b50, b95, n50, n95)))
    click.echo("")
    click.echo(f"{'share of GPU-hours':24}{'entitled':>10}{'baseline':>10}{'proposal':>10}")
    for account, ent, base_share, new_share in c.shares.iter_rows():
        click.echo(f"{account[:24]:24}{ent:>10.1%}{base_share:>10.1%}{new_share:>10.1%}")
    click.echo("")
    for line in _calibration_lines(calibrate(w, within_data(w, baseline))):
        click.echo(line)
