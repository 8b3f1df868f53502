"""The Policy lab's two runs (app/app_pages/policy_lab.py): the recorded workload replayed under
the recorded policy (the baseline) and under a proposal, with the figures the page lays out.

A Slurm cluster is replayed by `detectors.replay.engine`, a Kubernetes one (most of its jobs
from `collect kubernetes`) by the Kueue replay over the ClusterQueues the lake recorded. As in
`gpuledger whatif compare`, both runs go on past the end of the data until every job they can
start has started (a job the proposal delays past the end counts as delayed, not as never
started); the figures over time (GPU-hours, occupancy) are counted to the end of the data, and
the calibration is the baseline cut there. Bad settings raise the replay's PolicyError, nothing
to replay raises NoWorkload: the page shows either as one line.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from warehouse.lake import Lake

if TYPE_CHECKING:
    from detectors.replay.engine import Outcome, Workload
    from detectors.replay.metrics import Calibration, Comparison

__all__ = ["busy", "kueue_lab", "kueue_queues", "scheduler_of", "slurm_lab"]


def busy(start: np.ndarray, end: np.ndarray, gpus: np.ndarray, at: np.ndarray) -> np.ndarray:
    """GPUs running at each instant of `at` (jobs in [start, end); a NaN end: never ends)."""
    ran = ~np.isnan(start)
    ends = np.where(np.isnan(end[ran]), np.inf, end[ran])
    s_order = np.argsort(start[ran])
    e_order = np.argsort(ends)
    up = np.concatenate(([0], np.cumsum(gpus[ran][s_order])))
    down = np.concatenate(([0], np.cumsum(gpus[ran][e_order])))
    began = up[np.searchsorted(start[ran][s_order], at, side="right")]
    ended = down[np.searchsorted(ends[e_order], at, side="right")]
    running: np.ndarray = began - ended
    return running


def scheduler_of(root: str, cluster: str) -> str:
    """`kueue` when most of the cluster's jobs came from Kubernetes, else `slurm`."""
    from detectors.replay.kueue.workload import cluster_scheduler

    with Lake.at(root).connect(require=("jobs",)) as con:
        return cluster_scheduler(con, cluster)


def _waits(w: Workload, runs: Sequence[tuple[str, Outcome]]) -> pl.DataFrame:
    """Each run's waits of the period (jobs already running at its start waited before it,
    as the comparison's table counts them)."""
    from detectors.replay.metrics import period_waits

    frames = []
    for run, out in runs:
        ran = period_waits(w, out)
        frames.append(
            pl.DataFrame({"run": run, "wait_h": (out.start_e[ran] - w.submit_e[ran]) / 3600.0})
        )
    return pl.concat(frames)


def _occupancy(
    w: Workload, runs: Sequence[tuple[str, Outcome]], total_gpus: Sequence[float]
) -> pl.DataFrame:
    """Hourly GPUs busy ÷ the run's `total_gpus` (its nodes' or its quota's) per run, from the
    period's start to the last end of either run (past the end of the data where a run goes
    on)."""
    first = w.first_e
    ends = [out.end_e[np.isfinite(out.end_e)] for _, out in runs]
    last = max([w.horizon_e, *(float(e.max()) for e in ends if e.size)])
    at = np.arange(first, last + 1.0, 3600.0)
    return pl.concat(
        pl.DataFrame(
            {
                "time": [dt.datetime.fromtimestamp(t, dt.UTC) for t in at],
                "run": run,
                "occupancy": busy(out.start_e, out.end_e, w.gpus, at) / max(total, 1.0),
            }
        )
        for (run, out), total in zip(runs, total_gpus, strict=True)
    )


def _calibration(cal: Calibration) -> dict[str, Any]:
    return {
        "jobs": cal.jobs,
        "median_abs_start_s": cal.median_abs_start_s,
        "p90_abs_start_s": cal.p90_abs_start_s,
        "rank_correlation": cal.rank_correlation,
        "only_real": cal.started_only_real,
        "only_replay": cal.started_only_replay,
    }


def _common(
    w: Workload, c: Comparison, cal: Calibration, runs: Sequence[tuple[str, Outcome]]
) -> dict[str, Any]:
    return {
        "jobs": w.size,
        "waits": _waits(w, runs),
        "wait_table": c.waits,
        "shares": c.shares,
        "calibration": _calibration(cal),
        "calibration_waits": cal.wait_by_account,
        "data_end": dt.datetime.fromtimestamp(w.horizon_e, dt.UTC),
    }


def slurm_lab(
    root: str, cluster: str, since: dt.datetime, until: dt.datetime, changes: Sequence[str]
) -> dict[str, Any]:
    """The Slurm replay's baseline against `changes`, as the page lays it out."""
    from detectors.replay.engine import replay, within_data
    from detectors.replay.metrics import (
        calibrate,
        compare,
        slurm_capacity_gpu_h,
        slurm_entitlement,
    )
    from detectors.replay.policy import Policy, apply_settings
    from detectors.replay.workload import check_changes, load_workload, recorded_settings

    with Lake.at(root).connect(require=("jobs",)) as con:
        w = load_workload(con, cluster, since, until)
        recorded = apply_settings(Policy(), recorded_settings(con, cluster))
    proposed = apply_settings(recorded, changes)
    check_changes(w, recorded, changes)  # a misspelt name is said, not replayed as no change
    base, new = replay(w, recorded, past_end=True), replay(w, proposed, past_end=True)
    capacity = (slurm_capacity_gpu_h(w, recorded), slurm_capacity_gpu_h(w, proposed))
    c = compare(w, base, new, slurm_entitlement(w, recorded), capacity)
    runs = (("baseline", base), ("proposal", new))
    summary = pl.DataFrame(
        {
            "figure": [
                "jobs started",
                "GPU-hours run",
                "GPU occupancy",
                "Jain's index (share ÷ entitlement)",
                "jobs cut short by a new limit",
                "GPU-hours those lose",
                "jobs left queued at the end (the baseline started them)",
            ],
            "baseline": [float(c.started[0]), c.gpu_h[0], c.occupancy[0], c.jain[0], 0, 0, 0],
            "proposal": [
                float(c.started[1]),
                c.gpu_h[1],
                c.occupancy[1],
                c.jain[1],
                float(c.cut_jobs),
                c.cut_gpu_h,
                float(c.held_jobs),
            ],
        }
    )
    if any(c.preempted):  # a QOS preempted (preempt/qos in either run)
        summary = pl.concat(
            [
                summary,
                pl.DataFrame(
                    {
                        "figure": ["jobs preempted by a QOS", "GPU-hours of requeued runs lost"],
                        "baseline": [float(c.preempted[0]), c.requeued_gpu_h[0]],
                        "proposal": [float(c.preempted[1]), c.requeued_gpu_h[1]],
                    }
                ),
            ],
            how="vertical_relaxed",
        )
    return _common(w, c, calibrate(w, within_data(w, base)), runs) | {
        "scheduler": "slurm",
        "gpus": int(w.node_gpus.sum()),
        "summary": summary,
        "occupancy": _occupancy(w, runs, [c / w.span_h for c in capacity]),
    }


def kueue_queues(root: str, cluster: str) -> list[str]:
    """The ClusterQueues the lake recorded for `cluster` (the knobs' choices)."""
    from detectors.replay.kueue.policy import KueuePolicy, apply_kueue_settings
    from detectors.replay.kueue.workload import recorded_kueue_settings

    with Lake.at(root).connect(require=("jobs",)) as con:
        settings = recorded_kueue_settings(con, cluster)
    return sorted(apply_kueue_settings(KueuePolicy(), settings).queues)


def kueue_lab(
    root: str, cluster: str, since: dt.datetime, until: dt.datetime, changes: Sequence[str]
) -> dict[str, Any]:
    """The Kueue replay's baseline against `changes` (Kueue's setting names), grouped by
    ClusterQueue (each entitled to its share of the nominal GPU quota), with the commands
    that apply the changes to the recorded ClusterQueues."""
    from detectors.replay.engine import within_data
    from detectors.replay.kueue.engine import replay_kueue
    from detectors.replay.kueue.policy import (
        KueuePolicy,
        apply_kueue_settings,
        kueue_apply_lines,
        quota_resources,
    )
    from detectors.replay.kueue.workload import (
        load_kueue_workload,
        recorded_kueue_settings,
        subset,
    )
    from detectors.replay.metrics import calibrate, compare
    from detectors.replay.workload import NoWorkload

    with Lake.at(root).connect(require=("jobs",)) as con:
        kw = load_kueue_workload(con, cluster, since, until)
        settings = recorded_kueue_settings(con, cluster)
    recorded = apply_kueue_settings(KueuePolicy(), settings)
    proposed = apply_kueue_settings(recorded, changes)
    queued = [q in recorded.queues or q in proposed.queues for q in kw.jobs.partition]
    if not any(queued):
        raise NoWorkload(
            f"none of cluster {cluster!r}'s GPU workloads was queued in a Kueue ClusterQueue the "
            "lake knows (run `gpuledger collect kubernetes` where Kueue is installed)"
        )
    kw = subset(kw, queued)
    # the metrics group by `account`: here each workload's ClusterQueue
    w = dataclasses.replace(kw.jobs, account=list(kw.jobs.partition))
    base = replay_kueue(kw, recorded, past_end=True)
    new = replay_kueue(kw, proposed, past_end=True)
    entitlement = {
        name: sum(f.nominal for f in cq.flavors.values()) for name, cq in recorded.queues.items()
    }
    quota = recorded.nominal_gpus
    capacity = (quota * w.span_h, proposed.nominal_gpus * w.span_h)
    c = compare(w, base.outcome, new.outcome, entitlement, capacity)
    runs = (("baseline", base.outcome), ("proposal", new.outcome))
    preempted = [float((out.preemptions > 0).sum()) for out in (base, new)]
    summary = pl.DataFrame(
        {
            "figure": [
                "workloads admitted",
                "workloads preempted",
                "GPU-hours held",
                "of the nominal quota",
                "Jain's index (share ÷ quota share)",
            ],
            "baseline": [float(c.started[0]), preempted[0], c.gpu_h[0], c.occupancy[0], c.jain[0]],
            "proposal": [float(c.started[1]), preempted[1], c.gpu_h[1], c.occupancy[1], c.jain[1]],
        }
    )
    resources = quota_resources(settings)
    return _common(w, c, calibrate(w, within_data(w, base.outcome)), runs) | {
        "scheduler": "kueue",
        "gpus": int(quota),
        "queues": len(recorded.queues),
        "summary": summary,
        "occupancy": _occupancy(w, runs, [c / w.span_h for c in capacity]),
        "apply": kueue_apply_lines(changes, recorded, resources),
        "unadmittable": base.unadmittable,
    }
