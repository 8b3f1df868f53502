"""What decides Slurm's scheduling, as slurmctld and slurmdbd report it, into `scheduler_config`.

`gpuledger collect slurm-config` asks five questions per run (never one per job or node):

    scontrol show config                  the priority settings and SchedulerParameters
    scontrol show partition -o            MaxTime, DefaultTime, PriorityTier, OverSubscribe, Nodes
    scontrol show node -o                 Gres (with types), CPUs, memory, features, state
    sacctmgr -n -P show qos               priority, GrpTRES, MaxTRESPU, MaxWall, preemption
    sacctmgr -n -P show associations      GrpTRES and MaxTRESPU per account (shares land in
                                          `associations`, as `collect slurm-shares` does)

and lands one snapshot: a row per (kind, name, key). Host lists are expanded (`Nodes` holds
comma-separated names) so readers need no Slurm grammar. Pure parsing here; the runner is
injected (`collect.run_command` runs the real commands).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator

import pyarrow as pa

from collector.errors import MalformedSample
from collector.sources.slurm.assoc import collect_associations
from collector.sources.slurm.fields import MalformedLine
from collector.sources.slurm.hostlist import expand_hostlist
from warehouse.lake import Lake
from warehouse.schema import RAW_TABLES
from warehouse.writer import write_batch

__all__ = [
    "ConfigRow",
    "collect_slurm_config",
    "parse_assoc_limits",
    "parse_oneliners",
    "parse_qos",
    "parse_show_config",
]

ConfigRow = tuple[str, str, str, str | None]  # kind, name, key, value

# What the replay and an operator reading the snapshot need; the rest of each output is left out.
# BOOT_TIME: slurmctld's start, from which its PriorityCalcPeriod ticks count.
CONFIG_KEYS = re.compile(
    r"^(Priority\w*|SchedulerParameters|SchedulerType|SelectType\w*|PreemptType|PreemptMode"
    r"|BOOT_TIME)$"
)
PARTITION_KEYS = (
    "Nodes",
    "MaxTime",
    "DefaultTime",
    "PriorityTier",
    "PriorityJobFactor",
    "OverSubscribe",
    "QoS",
    "State",
    "MaxNodes",
    "PreemptMode",
)
NODE_KEYS = (
    "Gres",
    "CPUTot",
    "RealMemory",
    "AvailableFeatures",
    "State",
    "Partitions",
    "Weight",
)
QOS_FIELDS = ("Name", "Priority", "GrpTRES", "MaxTRESPU", "MaxWall", "Preempt", "PreemptMode")
ASSOC_FIELDS = ("Cluster", "Account", "User", "GrpTRES", "MaxTRESPU")
_PAIR = re.compile(r"(\w+)=(\S*)")


def parse_show_config(text: str) -> Iterator[ConfigRow]:
    """`scontrol show config`: `Key = Value` lines."""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if sep and CONFIG_KEYS.match(key):
            value = value.strip()
            yield ("config", "", key, None if value in ("", "(null)") else value)


def _expand(text: str, where: str) -> str:
    try:
        return ",".join(expand_hostlist(text))
    except MalformedSample as exc:
        raise MalformedSample(f"{where}: {exc}") from None


def parse_oneliners(text: str, kind: str) -> tuple[list[ConfigRow], list[MalformedLine]]:
    """`scontrol show partition -o` (kind "partition") or `show node -o` ("node")."""
    head, keys = (
        ("PartitionName", PARTITION_KEYS) if kind == "partition" else ("NodeName", NODE_KEYS)
    )
    rows: list[ConfigRow] = []
    bad: list[MalformedLine] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        pairs = dict(_PAIR.findall(line))
        name = pairs.get(head)
        if not name:
            bad.append(MalformedLine(f"scontrol show {kind}", number, f"no {head}="))
            continue
        for key in keys:
            if key not in pairs:
                continue
            value: str | None = pairs[key]
            if key == "Nodes" and value and value != "(null)":
                try:
                    value = _expand(value, f"{name} Nodes")
                except MalformedSample as exc:
                    bad.append(MalformedLine(f"scontrol show {kind}", number, str(exc)))
                    continue
            rows.append((kind, name, key, None if value in ("", "(null)") else value))
    return rows, bad


def _pipes(
    text: str, fields: tuple[str, ...], what: str
) -> tuple[list[list[str]], list[MalformedLine]]:
    out: list[list[str]] = []
    bad: list[MalformedLine] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != len(fields):
            bad.append(
                MalformedLine(what, number, f"expected {len(fields)} fields, got {len(parts)}")
            )
            continue
        out.append(parts)
    return out, bad


def parse_qos(text: str) -> tuple[list[ConfigRow], list[MalformedLine]]:
    """`sacctmgr -n -P show qos format=Name,Priority,GrpTRES,MaxTRESPU,MaxWall,Preempt,…`."""
    lines, bad = _pipes(text, QOS_FIELDS, "sacctmgr show qos")
    rows: list[ConfigRow] = []
    for name, *values in lines:
        for key, value in zip(QOS_FIELDS[1:], values, strict=True):
            rows.append(("qos", name, key, value or None))
    return rows, bad


def parse_assoc_limits(text: str, cluster: str) -> tuple[list[ConfigRow], list[MalformedLine]]:
    """Account-level GPU limits (`sacctmgr -n -P show assoc format=Cluster,Account,User,GrpTRES,
    MaxTRESPU`): one row per account and limit that is set; user lines are left out."""
    lines, bad = _pipes(text, ASSOC_FIELDS, "sacctmgr show associations")
    rows: list[ConfigRow] = []
    for row_cluster, account, user, grp, per_user in lines:
        if row_cluster != cluster or not account or user:
            continue
        if grp:
            rows.append(("assoc", account, "GrpTRES", grp))
        if per_user:
            rows.append(("assoc", account, "MaxTRESPU", per_user))
    return rows, bad


def _argv(cluster: str) -> dict[str, list[str]]:
    return {
        "config": ["scontrol", "show", "config"],
        "partition": ["scontrol", "show", "partition", "-o"],
        "node": ["scontrol", "show", "node", "-o"],
        "qos": [
            "sacctmgr",
            "--noheader",
            "--parsable2",
            "show",
            "qos",
            f"format={','.join(QOS_FIELDS)}",
        ],  # fmt: skip
        "assoc": [
            "sacctmgr",
            "--noheader",
            "--parsable2",
            "show",
            "associations",
            f"cluster={cluster}",
            f"format={','.join(ASSOC_FIELDS)}",
        ],  # fmt: skip
    }


def config_table(
    cluster: str, rows: list[ConfigRow], updated: dt.datetime, source: str
) -> pa.Table:
    return pa.table(
        {
            "cluster": [cluster] * len(rows),
            "kind": [r[0] for r in rows],
            "name": [r[1] for r in rows],
            "key": [r[2] for r in rows],
            "value": [r[3] for r in rows],
            "source": [source] * len(rows),
            "updated_ts": [updated] * len(rows),
        },
        schema=RAW_TABLES["scheduler_config"].schema,
    )


def collect_slurm_config(
    lake: Lake,
    cluster: str,
    runner: Callable[[list[str]], str],
    now: dt.datetime,
) -> tuple[int, int, list[MalformedLine]]:
    """Ask the five questions and land one snapshot; return (config rows landed, associations
    landed, malformed lines)."""
    argv = _argv(cluster)
    rows = list(parse_show_config(runner(argv["config"])))
    bad: list[MalformedLine] = []
    for kind in ("partition", "node"):
        found, wrong = parse_oneliners(runner(argv[kind]), kind)
        rows += found
        bad += wrong
    found, wrong = parse_qos(runner(argv["qos"]))
    rows += found
    bad += wrong
    found, wrong = parse_assoc_limits(runner(argv["assoc"]), cluster)
    rows += found
    bad += wrong
    stamp = now.astimezone(dt.UTC)
    if rows:
        write_batch(
            lake.root,
            "scheduler_config",
            config_table(cluster, rows, stamp, "scontrol"),
            f"slurm-config-{stamp:%Y%m%dT%H%M%S%f}",
        )
    shares, wrong = collect_associations(lake, cluster, runner, now)
    return len(rows), shares, bad + wrong
