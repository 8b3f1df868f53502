"""Slurm's fair-share arithmetic and the fairness scalars, reproduced for the weekly report.

Pure functions over small lists (one entry per association; a cluster has tens to hundreds):
classic fair-share `F = 2^(-U_E/S)`, Fair Tree's level fair-share `LF = S/U` and its rank-based
FairShare, Jain's index and the max/min ratio. Formulas: reference/fairness-policy-prediction §1.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "ROOT_ACCOUNT",
    "Association",
    "FairShare",
    "classic_factors",
    "fair_tree",
    "jain_index",
    "max_min_ratio",
]


ROOT_ACCOUNT = "root"  # Slurm's tree root: its children are the top level


@dataclass(frozen=True, slots=True)
class Association:
    """One node of the share tree: an account (`user` None) or a user under `account`.

    `parent` is the parent account of an account (None for a top-level one); a user's parent is
    its `account`. `shares` are raw shares; `usage` any additive usage (decayed GPU-hours).
    """

    account: str
    user: str | None
    parent: str | None
    shares: float
    usage: float

    @property
    def parent_account(self) -> str | None:
        """The account this node sits under; None at the top level (under Slurm's root)."""
        parent = self.account if self.user is not None else self.parent
        return None if parent == ROOT_ACCOUNT else parent


@dataclass(frozen=True, slots=True)
class FairShare:
    """What `sshare -l` shows for an association, computed from shares and usage."""

    account: str
    user: str | None
    norm_shares: float  # among siblings (Fair Tree's NormShares)
    entitled_share: float  # product down the tree (classic S)
    norm_usage: float  # usage / cluster total (NormUsage)
    effective_usage: float  # Fair Tree: usage / parent's usage
    level_fs: float  # norm_shares / effective_usage; inf without usage
    classic_factor: float  # 2^(-U_E/S)
    fair_tree_factor: float | None  # rank / user associations (users only)


def _children(nodes: Sequence[Association]) -> dict[str | None, list[Association]]:
    by_parent: dict[str | None, list[Association]] = {}
    for node in nodes:
        by_parent.setdefault(node.parent_account, []).append(node)
    return by_parent


def _subtree_usage(node: Association, kids: Mapping[str | None, list[Association]]) -> float:
    """An account's usage is its own plus every descendant's (Slurm rolls usage up the tree)."""
    if node.user is not None:
        return node.usage
    return node.usage + sum(_subtree_usage(c, kids) for c in kids.get(node.account, []))


def fair_tree(nodes: Sequence[Association]) -> list[FairShare]:
    """Fair-share of every association, as Slurm's Fair Tree and classic algorithms compute it.

    Top-level nodes are those whose parent is None (the children of Slurm's root). Level
    fair-share is S/U among siblings (inf when the node has no usage, 0 when it has no shares);
    siblings are ranked by it, highest first, depth first, and a user's Fair Tree factor is
    its rank ÷ the number of users (ties share a rank; tied accounts merge their children), as
    in Slurm's fair_tree.c. The classic factor uses the effective usage
    U_E = U + (U_E,parent − U) × S_level (U_E = U at the top level).
    """
    kids = _children(nodes)
    total = sum(n.usage for n in nodes)
    results: dict[tuple[str, str | None], FairShare] = {}
    user_count = sum(1 for n in nodes if n.user is not None)

    def level(siblings: list[Association], parent_share: float, parent_ue: float | None) -> None:
        shares_sum = sum(n.shares for n in siblings)
        usages = {(n.account, n.user): _subtree_usage(n, kids) for n in siblings}
        usage_sum = sum(usages.values())
        for n in siblings:
            norm = n.shares / shares_sum if shares_sum > 0 else 0.0
            usage = usages[(n.account, n.user)]
            eff = usage / usage_sum if usage_sum > 0 else 0.0
            lfs = 0.0 if norm == 0 else (math.inf if eff == 0 else norm / eff)
            s = parent_share * norm
            u = usage / total if total > 0 else 0.0
            ue = u if parent_ue is None else u + (parent_ue - u) * norm
            classic = 0.0 if s == 0 else 2.0 ** (-ue / s)
            results[(n.account, n.user)] = FairShare(
                n.account, n.user, norm, s, u, eff, lfs, classic, None
            )
            if n.user is None:
                level(kids.get(n.account, []), s, ue)

    level(kids.get(None, []), 1.0, None)

    # Fair Tree ranking: walk siblings by level FS (highest first), depth first.
    rank = [user_count]
    remaining = [user_count]
    factors: dict[tuple[str, str | None], float] = {}

    def walk(siblings: list[Association], account_tied: bool) -> None:
        ordered = sorted(
            siblings,
            key=lambda n: (-results[(n.account, n.user)].level_fs, n.user is None, n.user or ""),
        )
        previous: float | None = None
        i = 0
        while i < len(ordered):
            node = ordered[i]
            lfs = results[(node.account, node.user)].level_fs
            tied = account_tied if i == 0 else lfs == previous
            if node.user is not None:
                if not tied:
                    rank[0] = remaining[0]
                factors[(node.account, node.user)] = rank[0] / user_count
                remaining[0] -= 1
                i += 1
            else:
                # Accounts tied on level FS are merged: their children compete as one level.
                merged = [node]
                while (
                    i + len(merged) < len(ordered)
                    and ordered[i + len(merged)].user is None
                    and results[(ordered[i + len(merged)].account, None)].level_fs == lfs
                ):
                    merged.append(ordered[i + len(merged)])
                children = [c for m in merged for c in kids.get(m.account, [])]
                walk(children, tied)
                i += len(merged)
            previous = lfs

    if user_count:
        walk(kids.get(None, []), False)
    return [
        dataclasses.replace(r, fair_tree_factor=factors.get((r.account, r.user)))
        for r in results.values()
    ]


def classic_factors(usage_share: Sequence[float], entitled: Sequence[float]) -> list[float | None]:
    """Classic `F = 2^(-U/S)` for flat accounts (None where the share is 0 or unknown)."""
    return [
        None if s is None or s <= 0 else 2.0 ** (-u / s)
        for u, s in zip(usage_share, entitled, strict=True)
    ]


def jain_index(values: Sequence[float]) -> float | None:
    """Jain's fairness index (Σx)² / (n Σx²): 1 when all equal, 1/n when one has everything.

    None for no values or when every value is 0 (nobody used anything: nothing to compare).
    """
    if not values or max(values) <= 0:
        return None
    top = max(values)  # scale to [0, 1] first: tiny or huge values neither under- nor overflow
    scaled = [v / top for v in values]
    return sum(scaled) ** 2 / (len(scaled) * sum(v * v for v in scaled))


def max_min_ratio(values: Sequence[float]) -> float | None:
    """Largest over smallest value; inf when the smallest is 0 and the largest is not."""
    if not values:
        return None
    low, high = min(values), max(values)
    if high == 0:
        return None
    return math.inf if low == 0 else high / low
