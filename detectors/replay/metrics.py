"""What a replay says: how far it is from what happened (calibration), and how two replays
differ (a what-if against its baseline)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from detectors.replay.engine import Outcome, Workload

if TYPE_CHECKING:
    from detectors.replay.policy import Policy

__all__ = [
    "Calibration",
    "Comparison",
    "calibrate",
    "compare",
    "outcome_table",
    "period_waits",
    "size_class",
    "slurm_capacity_gpu_h",
    "slurm_entitlement",
]


@dataclass(frozen=True, slots=True)
class Calibration:
    """The replay of the recorded policy against the record, over jobs started in both."""

    jobs: int  # started in both
    started_only_real: int
    started_only_replay: int
    median_abs_start_s: float
    p90_abs_start_s: float
    rank_correlation: float  # Spearman, of start times
    wait_by_account: pl.DataFrame  # account, jobs, real_wait_s, replay_wait_s, rel_diff


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their ranks)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=float)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2:
        return float("nan")
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def calibrate(w: Workload, out: Outcome) -> Calibration:
    real = w.real_start_e
    sim = out.start_e
    both = ~np.isnan(real) & ~np.isnan(sim)
    if w.pinned is not None:  # running when the period started: not replayed, so not compared
        both &= ~w.pinned.astype(bool)
    delta = np.abs(sim[both] - real[both])
    frame = pl.DataFrame(
        {
            "account": np.array(w.account, dtype=object)[both].tolist(),
            "real_wait_s": (real[both] - w.submit_e[both]),
            "replay_wait_s": (sim[both] - w.submit_e[both]),
        }
    )
    waits = (
        frame.group_by("account")
        .agg(
            pl.len().alias("jobs"),
            pl.col("real_wait_s").mean(),
            pl.col("replay_wait_s").mean(),
        )
        .with_columns(
            (
                (pl.col("replay_wait_s") - pl.col("real_wait_s"))
                / pl.max_horizontal(pl.col("real_wait_s"), pl.lit(1.0))
            ).alias("rel_diff")
        )
        .sort("account")
    )
    return Calibration(
        jobs=int(both.sum()),
        started_only_real=int((~np.isnan(real) & np.isnan(sim)).sum()),
        started_only_replay=int((np.isnan(real) & ~np.isnan(sim)).sum()),
        median_abs_start_s=float(np.median(delta)) if delta.size else float("nan"),
        p90_abs_start_s=float(np.percentile(delta, 90)) if delta.size else float("nan"),
        rank_correlation=_spearman(real[both], sim[both]),
        wait_by_account=waits,
    )


def size_class(gpus: int) -> str:
    """The job-size buckets every comparison groups by."""
    if gpus <= 1:
        return "1 GPU"
    if gpus <= 4:
        return "2-4 GPUs"
    if gpus <= 8:
        return "5-8 GPUs"
    return ">8 GPUs"


def outcome_table(w: Workload, out: Outcome) -> pl.DataFrame:
    """One row per job: the replay's `--out` file (times as epoch seconds; null: never), with
    how often a QOS preempted it where the replay models preemption."""
    columns: dict[str, object] = {
        "job_id": w.job_id,
        "account": w.account,
        "user": w.user,
        "partition": w.partition,
        "gpus": w.gpus,
        "submit_e": w.submit_e,
        "real_start_e": w.real_start_e,
        "sim_start_e": out.start_e,
        "sim_end_e": out.end_e,
        "cut_by_limit": out.cut_by_limit,
        "held_by_limit": out.held_by_limit,
        "runtime_known": out.runtime_known,
    }
    if out.preemptions is not None:
        columns["preemptions"] = out.preemptions
    return pl.DataFrame(columns).with_columns(pl.col(pl.Float64).fill_nan(None))


@dataclass(frozen=True, slots=True)
class Comparison:
    """A what-if against its baseline, each replayed over the same workload and horizon."""

    waits: pl.DataFrame  # group, key, base_p50_s, base_p95_s, new_p50_s, new_p95_s, jobs
    occupancy: tuple[float, float]  # GPU-hours run ÷ GPU-hours there were, base and new
    shares: pl.DataFrame  # account, entitlement, base_share, new_share
    jain: tuple[float, float]
    cut_jobs: int  # jobs the proposal's limits cut shorter than the baseline's do
    cut_gpu_h: float  # GPU-hours they took from those jobs beyond the baseline's cuts
    held_jobs: int  # jobs a new limit keeps pending for good (the baseline started them)
    started: tuple[int, int]
    gpu_h: tuple[float, float]
    preempted: tuple[int, int] = (0, 0)  # jobs a QOS preempted at least once
    requeued_gpu_h: tuple[float, float] = (0.0, 0.0)  # GPU-hours of runs a requeue threw away


def period_waits(w: Workload, out: Outcome) -> np.ndarray:
    """Per job, whether its wait is one of the period's: it started in `out` and was not
    already running when the period started (a `--since` period's pinned jobs waited before
    it, in a queue the replay did not run; the calibration leaves them out too)."""
    waited: np.ndarray = ~np.isnan(out.start_e)
    if w.pinned is not None:
        waited &= ~w.pinned.astype(bool)
    return waited


def _gpu_h(w: Workload, out: Outcome) -> np.ndarray:
    """Per job, the GPU-hours it held within the period (from its start to the horizon)."""
    start = np.maximum(out.start_e, w.first_e)
    run = np.nan_to_num(np.minimum(out.end_e, w.horizon_e) - start, nan=0.0)
    held: np.ndarray = np.maximum(run, 0.0) * w.gpus / 3600.0
    return held


def _jain(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    if x.size == 0 or (x**2).sum() == 0:
        return float("nan")
    return float(x.sum() ** 2 / (x.size * (x**2).sum()))


def compare(
    w: Workload,
    base: Outcome,
    new: Outcome,
    entitlement: dict[str, float],
    capacity_gpu_h: tuple[float, float],
) -> Comparison:
    """Waits p50/p95 per account and job size (over the jobs that waited in the period:
    `period_waits`), occupancy (of each run's capacity: the GPU-hours its nodes or quota could
    hold over the period), shares vs entitlement (Jain's index over share ÷ entitlement; an
    account entitled to nothing is left out of it), and what a new limit cut or held."""

    def waits(out: Outcome) -> pl.DataFrame:
        started = period_waits(w, out)
        return pl.DataFrame(
            {
                "account": np.array(w.account, dtype=object)[started].tolist(),
                "size": [size_class(int(g)) for g in w.gpus[started]],
                "wait_s": out.start_e[started] - w.submit_e[started],
            },
            # typed: a replay that starts no job has no waits, and an untyped empty column
            # could not be joined to the other replay's by account or size
            schema={"account": pl.String, "size": pl.String, "wait_s": pl.Float64},
        )

    rows = []
    for group in ("account", "size"):
        b = (
            waits(base)
            .group_by(group)
            .agg(
                pl.col("wait_s").quantile(0.5).alias("base_p50_s"),
                pl.col("wait_s").quantile(0.95).alias("base_p95_s"),
                pl.len().alias("base_jobs"),
            )
        )
        n = (
            waits(new)
            .group_by(group)
            .agg(
                pl.col("wait_s").quantile(0.5).alias("new_p50_s"),
                pl.col("wait_s").quantile(0.95).alias("new_p95_s"),
                pl.len().alias("new_jobs"),
            )
        )
        joined = b.join(n, on=group, how="full", coalesce=True).rename({group: "key"})
        rows.append(joined.with_columns(pl.lit(group).alias("group")))
    table = (
        pl.concat(rows)
        .select(
            "group",
            "key",
            "base_jobs",
            "base_p50_s",
            "base_p95_s",
            "new_jobs",
            "new_p50_s",
            "new_p95_s",
        )
        .sort("group", "key")
    )

    base_h, new_h = _gpu_h(w, base), _gpu_h(w, new)
    accounts = sorted(set(w.account))
    acct = np.array(w.account, dtype=object)
    ent_total = sum(entitlement.get(a, 1.0) for a in accounts) or 1.0
    base_total, new_total = base_h.sum() or 1.0, new_h.sum() or 1.0
    share = pl.DataFrame(
        {
            "account": accounts,
            "entitlement": [entitlement.get(a, 1.0) / ent_total for a in accounts],
            "base_share": [float(base_h[acct == a].sum() / base_total) for a in accounts],
            "new_share": [float(new_h[acct == a].sum() / new_total) for a in accounts],
        }
    )
    ent = share["entitlement"].to_numpy()
    entitled = ent > 0  # (an account entitled to nothing has no ratio: Jain's index leaves it out)

    def ratio(shares: np.ndarray) -> np.ndarray:
        out = np.full(len(shares), np.nan)
        np.divide(shares, ent, out=out, where=entitled)
        return out

    # what the proposal's limits take beyond what the baseline's already do: a job cut in both
    # (a recorded TIMEOUT the baseline cuts too) is the proposal's only for the time it cuts more
    more = np.maximum(_cut_s(w, new) - _cut_s(w, base), 0.0)
    return Comparison(
        waits=table,
        occupancy=(
            _share_of(float(base_h.sum()), capacity_gpu_h[0]),
            _share_of(float(new_h.sum()), capacity_gpu_h[1]),
        ),
        shares=share,
        jain=(
            _jain(ratio(share["base_share"].to_numpy())),
            _jain(ratio(share["new_share"].to_numpy())),
        ),
        cut_jobs=int((more > 0).sum()),
        cut_gpu_h=float((more * w.gpus).sum() / 3600.0),
        # held for good by a new time limit, or kept queued to the horizon by a new cap (a job
        # the baseline started that the proposal never does)
        held_jobs=int(
            (
                (new.held_by_limit & ~base.held_by_limit)
                | (~np.isnan(base.start_e) & np.isnan(new.start_e))
            ).sum()
        ),
        started=(int((~np.isnan(base.start_e)).sum()), int((~np.isnan(new.start_e)).sum())),
        gpu_h=(float(base_h.sum()), float(new_h.sum())),
        preempted=(_preempted(base), _preempted(new)),
        requeued_gpu_h=(_requeued_gpu_h(w, base), _requeued_gpu_h(w, new)),
    )


def _cut_s(w: Workload, out: Outcome) -> np.ndarray:
    """Per job, the seconds of its recorded run a limit cut off in `out` (0: not cut)."""
    ran = np.nan_to_num(w.run_s - (out.end_e - out.start_e), nan=0.0)
    return np.where(out.cut_by_limit, np.maximum(ran, 0.0), 0.0)


def _share_of(gpu_h: float, capacity_gpu_h: float) -> float:
    return gpu_h / capacity_gpu_h if capacity_gpu_h > 0 else float("nan")


def slurm_capacity_gpu_h(w: Workload, policy: Policy) -> float:
    """The GPU-hours the nodes under `policy` could hold over the period: the recorded nodes,
    resized or added by its `node.<name>.Gres` (a drained node is still the cluster's)."""
    gpus = dict(zip(w.nodes, (int(g) for g in w.node_gpus), strict=True))
    gpus.update({node: count for node, (count, _) in policy.node_gres.items()})
    return float(sum(gpus.values())) * w.span_h


def slurm_entitlement(w: Workload, policy: Policy) -> dict[str, float]:
    """Each account's fair-share shares under `policy`: none for an account the share tree
    lacks (Slurm gives it no share), equal ones where no tree is recorded."""
    accounts = set(w.account)
    if not policy.shares:
        return dict.fromkeys(accounts, 1.0)
    return {a: float(policy.shares.get(a, 0.0)) for a in accounts}


def _preempted(out: Outcome) -> int:
    return 0 if out.preemptions is None else int((out.preemptions > 0).sum())


def _requeued_gpu_h(w: Workload, out: Outcome) -> float:
    return 0.0 if out.requeued_s is None else float((out.requeued_s * w.gpus).sum() / 3600.0)
