"""`gpuledger whatif` on a Kubernetes cluster: the Kueue replay's side of `replay` and `compare`.

`app/commands/whatif.py` sends a cluster whose jobs mostly came from `collect kubernetes` here.
The policy is the lake's latest ClusterQueues (`queues`) with the `--set` changes (Kueue's
names, see `detectors.replay.kueue.policy`); waits, shares and the calibration are grouped by
ClusterQueue, each entitled to its share of the nominal GPU quota.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.errors import AppError
from app.files_out import write_parquet
from app.options import progress_bar

if TYPE_CHECKING:
    import duckdb

    from detectors.replay.engine import Workload
    from detectors.replay.kueue.engine import KueueOutcome, KueueWorkload
    from detectors.replay.kueue.policy import KueuePolicy
    from detectors.replay.metrics import Calibration

__all__ = ["KueueRun", "echo_kueue_compare", "echo_kueue_replay", "prepare_kueue"]


@dataclass(frozen=True, slots=True)
class KueueRun:
    cluster: str
    workload: KueueWorkload
    recorded: KueuePolicy
    proposed: KueuePolicy
    changes: list[str]


def prepare_kueue(
    con: duckdb.DuckDBPyConnection,
    cluster: str,
    since: dt.datetime | None,
    until: dt.datetime | None,
    changes: Sequence[str],
) -> KueueRun:
    """The workloads, the recorded ClusterQueues and the proposal; bad input is one line."""
    from detectors.replay.kueue.policy import KueuePolicy, apply_kueue_settings
    from detectors.replay.kueue.workload import (
        load_kueue_workload,
        recorded_kueue_settings,
        subset,
    )
    from detectors.replay.policy import PolicyError
    from detectors.replay.workload import NoWorkload

    try:
        workload = load_kueue_workload(con, cluster, since, until)
        recorded = apply_kueue_settings(KueuePolicy(), recorded_kueue_settings(con, cluster))
    except NoWorkload as exc:
        raise AppError(str(exc)) from None
    except PolicyError as exc:
        raise AppError(f"cluster {cluster!r}: the recorded ClusterQueues: {exc}") from None
    try:
        proposed = apply_kueue_settings(recorded, changes)
    except PolicyError as exc:
        raise click.BadParameter(str(exc), param_hint="--set") from None
    if not recorded.queues and not proposed.queues:
        raise AppError(
            f"cluster {cluster!r}: its jobs come from Kubernetes but the lake holds no Kueue "
            "ClusterQueue for it (run `gpuledger collect kubernetes` where Kueue is installed, "
            "or describe the queues with --set clusterqueue.<name>.nominalQuota=N)"
        )
    known = {*recorded.queues, *proposed.queues}
    queued = [cq in known for cq in workload.jobs.partition]
    if not any(queued):
        raise AppError(
            f"cluster {cluster!r}: none of its GPU workloads was queued in a ClusterQueue the "
            "lake knows (pods that bypass Kueue are not replayed)"
        )
    return KueueRun(cluster, subset(workload, queued), recorded, proposed, list(changes))


def _by_queue(w: Workload) -> Workload:
    """The workload with each job's ClusterQueue as its group (metrics group by `account`)."""
    return dataclasses.replace(w, account=list(w.partition))


def _percent(value: float) -> str:
    """A share as a percentage; "-" where there is none (no quota recorded to divide by)."""
    return f"{value:.1%}" if math.isfinite(value) else "-"


def _span(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _stamp(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M")


def _header(run: KueueRun) -> str:
    w = run.workload.jobs
    cohorts = {cq.cohort for cq in run.recorded.queues.values() if cq.cohort}
    past = (
        " (a what-if goes on past it until every workload it can admit is admitted)"
        if run.changes
        else ""
    )
    return (
        f"Kueue: {len(run.recorded.queues)} ClusterQueues in {len(cohorts)} cohorts, "
        f"{run.recorded.nominal_gpus:,.0f} GPUs of nominal quota"
        f"{', fair sharing' if run.recorded.fair_sharing else ''}; {w.size:,} GPU workloads "
        f"submitted {_stamp(float(w.submit_e.min()))} … {_stamp(float(w.submit_e.max()))} UTC; "
        f"replayed to the end of the data, {_stamp(w.horizon_e)} UTC{past}"
    )


def _replay(
    run: KueueRun, policy: KueuePolicy, label: str, quiet: bool, *, past_end: bool = False
) -> KueueOutcome:
    from detectors.replay.kueue.engine import replay_kueue

    w = run.workload.jobs
    first = float(w.submit_e.min())
    span = max(w.horizon_e - first, 1.0)
    with progress_bar(label, 1000, enabled=not quiet) as update:
        out = replay_kueue(
            run.workload,
            policy,
            lambda t: update(min(1000, int((t - first) / span * 1000)), 1000),
            past_end=past_end,
        )
        update(1000, 1000)
    return out


def _calibration_lines(c: Calibration) -> list[str]:
    lines = [
        f"Calibration: the recorded ClusterQueues replayed against what happened ({c.jobs:,} "
        f"workloads admitted in both; {c.started_only_real:,} only in the record, "
        f"{c.started_only_replay:,} only in the replay)",
        f"  |replayed − real admission|   median {_span(c.median_abs_start_s)}, "
        f"p90 {_span(c.p90_abs_start_s)}",
        f"  admission-order rank correlation   {c.rank_correlation:.3f}",
        "  mean wait per ClusterQueue  real      replayed    difference",
    ]
    for queue, jobs, real, replayed, rel in c.wait_by_account.iter_rows():
        lines.append(
            f"    {queue[:20]:<20} {_span(real):>10}  {_span(replayed):>10}   {rel * 100:+6.1f} %"
            f"  ({jobs:,} workloads)"
        )
    return lines


def _notes(run: KueueRun, out: KueueOutcome) -> list[str]:
    lines = []
    if out.unadmittable:
        lines.append(
            f"{out.unadmittable:,} workloads name a ClusterQueue with no GPU quota in the "
            "policy: they stay pending."
        )
    return lines


def echo_kueue_replay(run: KueueRun, quiet: bool, out_path: Path | None) -> None:
    """`whatif replay` on a Kueue cluster."""
    from detectors.replay.metrics import calibrate, outcome_table

    w = _by_queue(run.workload.jobs)
    began = time.perf_counter()
    baseline = _replay(run, run.recorded, "replaying", quiet)
    seconds = time.perf_counter() - began
    click.echo(_header(run))
    click.echo(f"Replayed {w.size:,} workloads in {seconds:.1f} s.")
    for line in (*_calibration_lines(calibrate(w, baseline.outcome)), *_notes(run, baseline)):
        click.echo(line)
    result = baseline
    if run.changes:
        # past the end of the data, so a workload the change delays past it is still admitted
        result = _replay(run, run.proposed, "replaying the change", quiet, past_end=True)
        start = result.outcome.start_e
        admitted = int((start == start).sum())
        click.echo(
            f"With {', '.join(run.changes)}: {admitted:,} workloads admitted, "
            f"{int((result.preemptions > 0).sum()):,} preempted at least once "
            "(see `gpuledger whatif compare` for the side-by-side figures)."
        )
    if out_path is not None:
        import polars as pl

        table = outcome_table(run.workload.jobs, result.outcome)
        table = table.insert_column(0, pl.Series("cluster", [run.cluster] * table.height))
        table = table.with_columns(pl.Series("preemptions", result.preemptions))
        try:
            write_parquet(table, out_path)
        except OSError as exc:
            raise AppError(f"--out {out_path}: {exc.strerror or exc}") from None
        click.echo(f"Wrote {table.height:,} rows to {out_path}.")


def echo_kueue_compare(run: KueueRun, quiet: bool) -> None:
    """`whatif compare` on a Kueue cluster: baseline against the proposal, by ClusterQueue."""
    from detectors.replay.engine import within_data
    from detectors.replay.metrics import calibrate, compare

    w = _by_queue(run.workload.jobs)
    # both past the end of the data, so a workload the proposal delays past it is still
    # admitted (and the baseline is measured the same way); the calibration is cut at the end
    baseline = _replay(run, run.recorded, "replaying the baseline", quiet, past_end=True)
    proposal = _replay(run, run.proposed, "replaying the proposal", quiet, past_end=True)
    entitlement = {
        name: sum(f.nominal for f in cq.flavors.values())
        for name, cq in run.recorded.queues.items()
    }
    total = sum(entitlement.values())
    capacity = (run.recorded.nominal_gpus * w.span_h, run.proposed.nominal_gpus * w.span_h)
    c = compare(w, baseline.outcome, proposal.outcome, entitlement, capacity)
    click.echo(_header(run))
    click.echo(f"Proposal: {', '.join(run.changes)}")
    click.echo("")
    click.echo(f"{'':34}{'baseline':>14}{'proposal':>14}")
    click.echo(f"{'workloads admitted':34}{c.started[0]:>14,}{c.started[1]:>14,}")
    preempted = (int((baseline.preemptions > 0).sum()), int((proposal.preemptions > 0).sum()))
    click.echo(f"{'workloads preempted':34}{preempted[0]:>14,}{preempted[1]:>14,}")
    click.echo(f"{'GPU-hours held':34}{c.gpu_h[0]:>14,.1f}{c.gpu_h[1]:>14,.1f}")
    occupancy = [_percent(x) for x in c.occupancy]
    click.echo(f"{'of the nominal quota':34}{occupancy[0]:>13} {occupancy[1]:>13}")
    click.echo(f"{'Jain index (share ÷ quota share)':34}{c.jain[0]:>14.3f}{c.jain[1]:>14.3f}")
    click.echo("")
    heads = ("base p50", "base p95", "new p50", "new p95")
    click.echo(f"{'queue wait':24}" + "".join(f"{h:>14}" for h in heads))
    for group, key, _bj, b50, b95, _nj, n50, n95 in c.waits.iter_rows():
        label = f"{'queue' if group == 'account' else 'size'} {key}"[:24]
        click.echo(f"{label:24}" + "".join(f"{_span(v):>14}" for v in (b50, b95, n50, n95)))
    click.echo("")
    click.echo(f"{'share of GPU-hours':24}{'quota':>10}{'baseline':>10}{'proposal':>10}")
    for queue, _ent, base_share, new_share in c.shares.iter_rows():
        quota = entitlement.get(queue, 0.0) / total if total else math.nan
        click.echo(
            f"{queue[:24]:24}{_percent(quota):>10}{_percent(base_share):>10}"
            f"{_percent(new_share):>10}"
        )
    click.echo("")
    cut = within_data(w, baseline.outcome)
    for line in (*_calibration_lines(calibrate(w, cut)), *_notes(run, baseline)):
        click.echo(line)
