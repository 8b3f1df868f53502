"""Slurm's share tree (`sacctmgr show associations`) into the `associations` table.

One question per run, to slurmdbd, not slurmctld: `sacctmgr --noheader --parsable2 show
associations cluster=<c> format=Cluster,Account,User,ParentName,Fairshare`. Account lines have
no user and name their parent account; user lines have no parent (their account is it).
FairShare `parent` (the user takes its account's share) lands as a null `raw_shares`. Every run
lands the whole tree at one `updated_ts`, so the latest snapshot is the tree as it is now.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from collector.sources.slurm.fields import MalformedLine
from warehouse.lake import Lake
from warehouse.schema import RAW_TABLES
from warehouse.writer import write_batch

__all__ = [
    "SACCTMGR_FIELDS",
    "AssociationRow",
    "associations_table",
    "collect_associations",
    "parse_associations",
    "sacctmgr_argv",
]

SACCTMGR_FIELDS = ("Cluster", "Account", "User", "ParentName", "Fairshare")


@dataclass(frozen=True, slots=True)
class AssociationRow:
    cluster: str
    account: str
    user: str | None
    parent: str | None
    raw_shares: int | None


def sacctmgr_argv(cluster: str) -> list[str]:
    """The one command a run asks (no partition: shares are per account and user)."""
    return [
        "sacctmgr",
        "--noheader",
        "--parsable2",
        "show",
        "associations",
        f"cluster={cluster}",
        f"format={','.join(SACCTMGR_FIELDS)}",
    ]


def parse_associations(text: str, cluster: str) -> tuple[list[AssociationRow], list[MalformedLine]]:
    """Parse `sacctmgr -n -P show assoc format=Cluster,Account,User,ParentName,Fairshare`.

    Lines of other clusters are skipped; a line with the wrong number of fields or a share that
    is neither a number nor `parent` is returned as malformed. Per-partition associations of one
    user repeat the same (account, user): the first is kept.
    """
    rows: dict[tuple[str, str | None], AssociationRow] = {}
    bad: list[MalformedLine] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != len(SACCTMGR_FIELDS):
            bad.append(
                MalformedLine(
                    "sacctmgr", line_no, f"expected {len(SACCTMGR_FIELDS)} fields, got {len(parts)}"
                )
            )
            continue
        row_cluster, account, user, parent, fairshare = (p.strip() for p in parts)
        if row_cluster != cluster or not account:
            continue
        if fairshare.lower() == "parent":
            shares: int | None = None
        else:
            try:
                shares = int(fairshare)
            except ValueError:
                bad.append(
                    MalformedLine("sacctmgr", line_no, f"Fairshare {fairshare!r} is not a number")
                )
                continue
        key = (account, user or None)
        rows.setdefault(key, AssociationRow(cluster, account, user or None, parent or None, shares))
    return list(rows.values()), bad


def associations_table(
    rows: Sequence[AssociationRow], updated: dt.datetime, source: str = "sacctmgr"
) -> pa.Table:
    """The rows as an `associations` batch, all stamped `updated` and from `source`."""
    schema = RAW_TABLES["associations"].schema
    return pa.table(
        {
            "cluster": [r.cluster for r in rows],
            "account": [r.account for r in rows],
            "user": [r.user for r in rows],
            "parent": [r.parent for r in rows],
            "raw_shares": [r.raw_shares for r in rows],
            "source": [source] * len(rows),
            "updated_ts": [updated] * len(rows),
        },
        schema=schema,
    )


def collect_associations(
    lake: Lake,
    cluster: str,
    runner: Callable[[list[str]], str],
    now: dt.datetime,
) -> tuple[int, list[MalformedLine]]:
    """Ask sacctmgr once and land the tree; return (associations landed, malformed lines)."""
    rows, bad = parse_associations(runner(sacctmgr_argv(cluster)), cluster)
    if rows:
        stamp = now.astimezone(dt.UTC)
        write_batch(
            lake.root,
            "associations",
            associations_table(rows, stamp),
            f"sacctmgr-{stamp:%Y%m%dT%H%M%S%f}",
        )
    return len(rows), bad
