"""GPU caps per user and per account (Slurm GrpTRES; Kueue a capped ClusterQueue).

Replays each (user, account) association's and each account's running GPU count over the
window. The cap is a share of the cluster's GPUs (`cap_share` for a user, `account_cap_share`
for an account), never below its largest job (so no job becomes unschedulable). The gain is
the GPU-hours held above the cap, which jobs of other users (other accounts) waiting at those
times could have had; the risk is the same hours of its own work delayed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.recommend.config import GpuCapConfig
from detectors.recommend.kueue import cluster_queue, kube_name
from detectors.recommend.recommendation import ClusterFacts, Recommendation, sh
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["KIND", "QUERY", "running_gpus", "recommend"]

KIND = "gpu_cap"
QUERY = "recommend/window_jobs"


def running_gpus(jobs: pl.DataFrame) -> pl.DataFrame:
    """Step function of GPUs held: one row per (seg_start_e, seg_end_e) with `running` GPUs."""
    events = (
        pl.concat(
            [
                jobs.select(pl.col("start_e").alias("t"), pl.col("gpus").alias("delta")),
                jobs.select(pl.col("end_e").alias("t"), (-pl.col("gpus")).alias("delta")),
            ]
        )
        .group_by("t")
        .agg(pl.col("delta").sum())
        .sort("t")
    )
    return (
        events.with_columns(
            pl.col("delta").cum_sum().alias("running"),
            pl.col("t").shift(-1).alias("seg_end_e"),
        )
        .rename({"t": "seg_start_e"})
        .drop_nulls("seg_end_e")
        .select("seg_start_e", "seg_end_e", "running")
    )


def _waiting(others: pl.DataFrame, above: pl.DataFrame) -> tuple[int, float]:
    """Other users' jobs pending while the association was above its cap, and their GPU-hours."""
    if others.is_empty() or above.is_empty():
        return 0, 0.0
    overlap = (
        others.join(above, how="cross")
        .with_columns(
            (
                pl.min_horizontal("start_e", "seg_end_e")
                - pl.max_horizontal("submit_e", "seg_start_e")
            ).alias("overlap_s")
        )
        .filter(pl.col("overlap_s") > 0)
    )
    gpu_h = float((overlap["gpus"] * overlap["overlap_s"]).sum()) / 3600.0
    return overlap["job_id"].n_unique(), gpu_h


# what slurm.conf needs for a GrpTRES=gres/gpu limit to hold (as the live test cluster has it)
LIMITS_NEED = (
    "# enforced when slurm.conf has gres/gpu in AccountingStorageTRES and limits in\n"
    "# AccountingStorageEnforce\n"
)


def _queue_yaml(name: str, cohort: str, cap: int) -> str:
    """A ClusterQueue `name` capped at `cap` GPUs in `cohort` (both already kube_name()s)."""
    return cluster_queue(name, [("nvidia.com/gpu", cap)], cohort=cohort, gpu_borrowing_limit=0)


def _namespaces(jobs: pl.DataFrame) -> list[str]:
    """The namespaces a Kubernetes cluster's jobs ran in (a pod's job id is
    `<namespace>/<pod>`), most jobs first."""
    parts = jobs["job_id"].str.split_exact("/", 1)
    spaces = parts.struct.field("field_0").filter(parts.struct.field("field_1").is_not_null())
    return [str(n) for n in spaces.value_counts(sort=True)[spaces.name].to_list() if n]


def _user_config(
    facts: ClusterFacts, user: str, account: str, cap: int, *, namespaces: Sequence[str] = ()
) -> str:
    if facts.target == "kueue":
        name = kube_name(f"{account}-{user}")  # quoted
        # a LocalQueue in each namespace the user's pods ran in: the account's name was taken
        # for one, a namespace that need not exist (an account from a label or a mapping)
        local = "".join(
            "---\n"
            "apiVersion: kueue.x-k8s.io/v1beta1\n"
            "kind: LocalQueue\n"
            "metadata:\n"
            f"  namespace: {space}\n"
            f"  name: {kube_name(user)}\n"
            "spec:\n"
            f"  clusterQueue: {name}\n"
            for space in [json.dumps(n) for n in namespaces] or [kube_name(account)]
        )
        return _queue_yaml(name, kube_name(account), cap) + local
    return (
        f"sacctmgr -i modify user where {sh(f'name={user}')} {sh(f'account={account}')} "
        f"{sh(f'cluster={facts.cluster}')} set GrpTRES=gres/gpu={cap}\n"
        f"# or for every user of a QOS: sacctmgr -i modify qos normal set "
        f"MaxTRESPerUser=gres/gpu={cap}\n" + LIMITS_NEED
    )


def _account_config(facts: ClusterFacts, account: str, cap: int) -> str:
    if facts.target == "kueue":
        return _queue_yaml(kube_name(account), kube_name("gpus"), cap)
    return (
        f"sacctmgr -i modify account where {sh(f'name={account}')} "
        f"{sh(f'cluster={facts.cluster}')} set GrpTRES=gres/gpu={cap}\n" + LIMITS_NEED
    )


def _capped(
    facts: ClusterFacts,
    jobs: pl.DataFrame,
    mine: pl.DataFrame,
    others: pl.DataFrame,
    cap: int,
    config: GpuCapConfig,
) -> dict[str, Any] | None:
    """The evidence for capping `mine` at `cap` GPUs, or None when the cap would not matter."""
    steps = running_gpus(mine).with_columns(
        (pl.col("seg_end_e") - pl.col("seg_start_e")).alias("dur_s")
    )
    above = steps.filter(pl.col("running") > cap)
    excess = float(((above["running"] - cap) * above["dur_s"]).sum()) / 3600.0
    if excess < config.min_excess_gpu_h:
        return None
    waiting, waited_gpu_h = _waiting(others, above)
    if waiting < config.min_waiting_jobs:
        return None
    gpu_h = _gpu_h(mine)
    total_gpu_h = _gpu_h(jobs)
    return {
        "cluster_gpus": facts.gpus_total,
        "cap_gpus": cap,
        "peak_gpus": int(steps["running"].max()),  # type: ignore[arg-type]
        "largest_job_gpus": int(mine["gpus"].max()),  # type: ignore[arg-type]
        "gpu_h": gpu_h,
        "share_of_cluster_gpu_h": gpu_h / total_gpu_h if total_gpu_h else None,
        "hours_above_cap": float(above["dur_s"].sum()) / 3600.0,
        "gpu_h_above_cap": excess,
        "other_jobs_waiting_meanwhile": waiting,
        "other_waiting_gpu_h_meanwhile": waited_gpu_h,
    }


def _gpu_h(jobs: pl.DataFrame) -> float:
    return float(((jobs["end_e"] - jobs["start_e"]) * jobs["gpus"]).sum()) / 3600.0


def _cap(total: int, share: float, mine: pl.DataFrame) -> int:
    """`share` of the cluster's GPUs, rounded up, never below the largest job."""
    return max(math.ceil(total * share - 1e-9), int(mine["gpus"].max()))  # type: ignore[arg-type]


def recommend(
    con: duckdb.DuckDBPyConnection, facts: ClusterFacts, config: GpuCapConfig
) -> list[Recommendation]:
    """A cap for each user association, then each account, that held GPUs above it while
    jobs of others waited."""
    jobs = queries.run(con, QUERY, since=facts.window_start, until=facts.window_end).filter(
        pl.col("cluster") == facts.cluster
    )
    if jobs.is_empty() or facts.gpus_total <= 0:
        return []
    recs: list[Recommendation] = []

    def propose(
        mine: pl.DataFrame,
        others: pl.DataFrame,
        share: float,
        scope: str,
        whose: str,
        config_for: Callable[[int], str],
    ) -> None:
        cap = _cap(facts.gpus_total, share, mine)
        evidence = _capped(facts, jobs, mine, others, cap, config)
        if evidence is None:
            return
        excess = evidence["gpu_h_above_cap"]
        recs.append(
            Recommendation(
                cluster=facts.cluster,
                kind=KIND,
                scope=scope,
                target=facts.target,
                evidence=evidence,
                expected_gain_gpu_h=excess,
                gain_kind="shifted",
                risk=f"{excess:.1f} GPU-h of {whose}",
                config=config_for(cap),
            )
        )

    for (user, account), mine in jobs.group_by(["user", "account"], maintain_order=True):
        if user is not None:
            propose(
                mine,
                jobs.filter(pl.col("user") != user),
                config.cap_share,
                f"user={user},account={account}",
                f"{user}'s work would have waited for the cap",
                partial(_user_config, facts, str(user), str(account), namespaces=_namespaces(mine)),
            )
    for (account,), mine in jobs.group_by(["account"], maintain_order=True):
        if account is not None:
            propose(
                mine,
                jobs.filter(pl.col("account") != account),
                config.account_cap_share,
                f"account={account}",
                f"account {account}'s work would have waited",
                partial(_account_config, facts, str(account)),
            )
    return recs
