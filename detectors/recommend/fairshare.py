"""Fair-share weights that follow demand (sacctmgr fairshare=; Kueue fairSharing.weight).

Slurm's shares are hierarchical: an account's shares count against its siblings' (the accounts
under the same parent), level by level (Fair Tree's S = Sraw_self / Sraw_self+siblings). So the
comparison is made per parent, among its child accounts that had jobs in the window (in their
own or any sub-account: usage rolls up the tree). Per child over the window: allocated
GPU-hours A, GPU-hours its jobs spent waiting W (those that started, and those still queued or
cancelled in the queue, up to the window's or the data's end), and its demand share among its
siblings d = (A + W) / Σ(A + W), against its share among them S (raw shares from the configuration,
else the cluster's current ones from the `associations` table that `collect slurm-shares`
lands, else equal). A child whose demand share is `ratio` times its share or more (or 1/`ratio`
or less) is flagged, and the proposal moves its shares halfway toward its demand:
S' = (S + d) / 2, as raw shares out of the same total, so siblings without jobs, user
associations and every other level keep their share.

An account that is under-served (its usage share 1/`ratio` of its share or less while its jobs
waited `min_waited_gpu_h` or more: the weekly report's "under-served") had demand the cluster
did not meet; its demand share is small only next to a sibling that got more than its own
share. Its shares are never cut (that would lower its priority further), and while a sibling
is under-served no account's shares are raised (that would take priority from it). The risk
names the accounts kept out and why, so the recommendation and the report agree.

One recommendation per parent lists its changes: scope `cluster` for the accounts directly
under root (a flat tree gives just that one), `parent=<account>` below. Parents come from the
`associations` table; an account it does not list sits under root. Jobs charged to a parent
account itself are its users' and count for it one level up, not among its sub-accounts.
Fair-share moves priority between accounts, so no GPU-hours are gained (expected_gain is null)
and the risk names the accounts whose priority falls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.recommend.config import FairshareConfig
from detectors.recommend.recommendation import ClusterFacts, Recommendation, sh
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["KIND", "QUERY", "ROOT_ACCOUNT", "account_tree", "current_shares", "recommend"]

KIND = "fairshare_weight"
QUERY = "recommend/window_jobs"
PENDING_QUERY = "recommend/window_pending"
SHARES_QUERY = "report/associations_latest"
DEFAULT_RAW_SHARES = 100.0  # every account's shares when none are known (equal shares)
SLURM_DEFAULT_SHARES = 1.0  # an account missing from a known tree: sacctmgr's default FairShare
ROOT_ACCOUNT = "root"  # Slurm's tree root: its children are the top level


def _account_rows(con: duckdb.DuckDBPyConnection, cluster: str) -> pl.DataFrame:
    return queries.run(con, SHARES_QUERY, cluster=cluster).filter(pl.col("user").is_null())


def current_shares(con: duckdb.DuckDBPyConnection, cluster: str) -> dict[str, float]:
    """The accounts' raw shares as last collected from the cluster (empty when never)."""
    tree = _account_rows(con, cluster).filter(pl.col("raw_shares").is_not_null())
    return {str(row["account"]): float(row["raw_shares"]) for row in tree.iter_rows(named=True)}


def account_tree(con: duckdb.DuckDBPyConnection, cluster: str) -> dict[str, str]:
    """Each account's parent account as last collected (root for a top-level account)."""
    return {
        str(row["account"]): str(row["parent"] or ROOT_ACCOUNT)
        for row in _account_rows(con, cluster).iter_rows(named=True)
        if row["account"] != ROOT_ACCOUNT
    }


def _path(account: str, parents: dict[str, str]) -> list[str]:
    """`account` and its ancestors up to (without) root; an unknown account sits under root."""
    path: list[str] = []
    node = account
    while node != ROOT_ACCOUNT and node not in path:  # a loop in bad data ends at root
        path.append(node)
        node = parents.get(node, ROOT_ACCOUNT)
    return path


def _levels(accounts: list[str], parents: dict[str, str]) -> dict[str, dict[str, str]]:
    """parent -> {account charged -> the child of that parent it rolls up to}, for every level
    the accounts' jobs reach (root first, then parents in name order)."""
    levels: dict[str, dict[str, str]] = {}
    for account in accounts:
        path = _path(account, parents)
        for i, child in enumerate(path):
            parent = path[i + 1] if i + 1 < len(path) else ROOT_ACCOUNT
            levels.setdefault(parent, {})[account] = child
    return dict(sorted(levels.items(), key=lambda kv: (kv[0] != ROOT_ACCOUNT, kv[0])))


def _raw_shares(
    config: FairshareConfig, current: dict[str, float]
) -> tuple[dict[str, float], float, str]:
    """The accounts' raw shares now, the shares of an account not listed, and their source."""
    if config.shares:
        return {a: float(v) for a, v in config.shares.items()}, DEFAULT_RAW_SHARES, "configured"
    if current:
        return current, SLURM_DEFAULT_SHARES, "associations"
    return {}, DEFAULT_RAW_SHARES, "equal"


def _accounts(
    jobs: pl.DataFrame, shares: dict[str, float], default: float = DEFAULT_RAW_SHARES
) -> pl.DataFrame:
    per = (
        jobs.filter(pl.col("account").is_not_null())
        .group_by("account")
        .agg(
            ((pl.col("end_e") - pl.col("start_e")) * pl.col("gpus")).sum().alias("alloc_s"),
            ((pl.col("start_e") - pl.col("submit_e")) * pl.col("gpus")).sum().alias("wait_s"),
        )
        .sort("account")
    )
    raw = [shares.get(a, default) for a in per["account"]]
    return (
        per.with_columns(
            (pl.col("alloc_s") / 3600.0).alias("alloc_gpu_h"),
            (pl.col("wait_s") / 3600.0).alias("waited_gpu_h"),
            pl.Series("raw_shares", raw, pl.Float64),
        )
        .with_columns((pl.col("alloc_gpu_h") + pl.col("waited_gpu_h")).alias("demand_gpu_h"))
        .with_columns(
            (pl.col("raw_shares") / pl.col("raw_shares").sum()).alias("share"),
            # 0 where no sibling ran (every one left queued): 0 ÷ 0 was NaN, which no "≤"
            # holds, and an account that only waited read as not under-served (review)
            pl.when(pl.col("alloc_gpu_h").sum() > 0)
            .then(pl.col("alloc_gpu_h") / pl.col("alloc_gpu_h").sum())
            .otherwise(0.0)
            .alias("usage_share"),
            (pl.col("demand_gpu_h") / pl.col("demand_gpu_h").sum()).alias("demand_share"),
        )
        .with_columns(
            ((pl.col("share") + pl.col("demand_share")) / 2).alias("new_share"),
            (pl.col("usage_share") / pl.col("share")).alias("usage_over_share"),
        )
        .drop("alloc_s", "wait_s")
    )


def _config(facts: ClusterFacts, changes: list[dict[str, Any]], raw_total: float, n: int) -> str:
    lines = []
    if facts.target == "kueue":
        lines.append(
            "# LocalQueue weights count with admission fair sharing (Kueue >= 0.12, alpha: the\n"
            "# AdmissionFairSharing feature gate); <queue> is the account's LocalQueue"
        )
    for c in changes:
        if facts.target == "kueue":
            weight = round(c["new_share"] * n, 3)
            lines.append(
                f"kubectl -n {sh(c['account'])} patch localqueue <queue> --type=merge "
                f'-p \'{{"spec":{{"fairSharing":{{"weight":"{weight}"}}}}}}\''
            )
        else:
            raw = max(1, round(c["new_share"] * raw_total))
            name, cluster = sh(f"name={c['account']}"), sh(f"cluster={facts.cluster}")
            lines.append(f"sacctmgr -i modify account {name} {cluster} set fairshare={raw}")
    return "\n".join(lines) + "\n"


def recommend(
    con: duckdb.DuckDBPyConnection, facts: ClusterFacts, config: FairshareConfig
) -> list[Recommendation]:
    """One recommendation per parent account whose children's shares miss their demand."""
    window = {"since": facts.window_start, "until": facts.window_end}
    started = queries.run(con, QUERY, **window)
    # jobs that waited and never started in the window: demand too, as a job that started
    # after waiting (gone, an account whose every job was left queued was no account here,
    # and its siblings' shares were raised over it)
    queued = queries.run(con, PENDING_QUERY, **window).select(
        "cluster",
        "account",
        "gpus",
        "submit_e",
        pl.col("waited_until_e").alias("start_e"),
        pl.col("waited_until_e").alias("end_e"),
    )
    jobs = pl.concat([started.select(queued.columns), queued], how="vertical_relaxed").filter(
        (pl.col("cluster") == facts.cluster) & pl.col("account").is_not_null()
    )
    shares, default, source = _raw_shares(config, current_shares(con, facts.cluster))
    parents = account_tree(con, facts.cluster)
    charged = sorted(set(jobs["account"].to_list()))
    recs = []
    for parent, child_of in _levels(charged, parents).items():
        level = jobs.filter(pl.col("account").is_in(list(child_of))).with_columns(
            pl.col("account").replace_strict(child_of, return_dtype=pl.String)
        )
        rec = _level(facts, config, parent, _accounts(level, shares, default), source)
        if rec is not None:
            recs.append(rec)
    return recs


def _level(
    facts: ClusterFacts,
    config: FairshareConfig,
    parent: str,
    accounts: pl.DataFrame,
    source: str,
) -> Recommendation | None:
    """The changes among the children of `parent` (`accounts`, their figures among siblings)."""
    if accounts.height < 2 or float(accounts["demand_gpu_h"].sum()) <= 0:
        return None
    over = (pl.col("demand_share") >= config.ratio * pl.col("share")) & (
        pl.col("demand_gpu_h") >= config.min_demand_gpu_h
    )
    under_served = (pl.col("usage_share") <= pl.col("share") / config.ratio) & (
        pl.col("waited_gpu_h") >= config.min_waited_gpu_h
    )
    under = (pl.col("demand_share") <= pl.col("share") / config.ratio) & ~under_served
    held_back = accounts.filter(under_served).to_dicts()
    flagged = accounts.filter(under if held_back else over | under)
    if flagged.is_empty():
        return None
    changes = flagged.to_dicts()
    falling = [c for c in changes if c["new_share"] < c["share"]]
    raw_total = float(accounts["raw_shares"].sum())
    top = parent == ROOT_ACCOUNT
    evidence = {
        "parent": parent,
        "accounts": accounts.to_dicts(),
        "flagged": [c["account"] for c in changes],
        "ratio": config.ratio,
        "raw_shares_total": raw_total,
        "raw_shares_from": source,
        "under_served": [c["account"] for c in held_back],
    }
    among = "" if top else f" among the sub-accounts of {parent}"
    risk = f"priority falls{among} for " + (
        ", ".join(
            f"{c['account']} (share {c['share']:.3f} -> {c['new_share']:.3f})" for c in falling
        )
        or "no account"
    )
    if held_back:
        risk += "; kept out: " + ", ".join(
            f"{c['account']} got {c['usage_over_share']:.1f}× its share while its jobs waited "
            f"{c['waited_gpu_h']:,.1f} GPU-h (under-served: not cut)"
            for c in held_back
        )
        risk += "; no account's share is raised while another is under-served"
    return Recommendation(
        cluster=facts.cluster,
        kind=KIND,
        scope="cluster" if top else f"parent={parent}",
        target=facts.target,
        evidence=evidence,
        expected_gain_gpu_h=None,
        risk=risk,
        config=_config(facts, changes, raw_total, accounts.height),
    )
