"""The scheduler policy a replay runs under, and the `KEY=VALUE` settings that change it.

One setting syntax serves three sources: a `slurm.conf` read by the collector, the settings the
lake recorded, and a what-if's `--set`. Keys (Slurm's own names after the prefix):

    partition.<name>.MaxTime        a Slurm time: MM, HH:MM:SS, D-HH[:MM[:SS]], UNLIMITED
    partition.<name>.PriorityTier   an integer
    partition.<name>.Nodes          comma-separated node names (hostlists expanded by the reader)
    partition.<name>.Default        YES: the partition a job that records none is in (Slurm's
                                    default partition, slurm.conf's Default=YES), or NO
    assoc.<account>.GrpTRES         gres/gpu=N (the account's GPUs running at once), or -1: none
    assoc.<account>.MaxTRESPerUser  gres/gpu=N (each user of the account)
    assoc.<account>.Shares          the account's fair-share weight, on the recorded scale: its
                                    part of the share tree (sshare's NormShares of a leaf; the
                                    parts add up to 1), or 1 for each account without a tree
    assoc.<account>.<user>.GrpTRES  gres/gpu=N: one user's association (in that account)
    qos.<name>.Priority             the QOS's priority (an integer; its multifactor factor is it
                                    ÷ the highest QOS priority)
    qos.<name>.GrpTRES              gres/gpu=N: the GPUs the QOS's jobs run at once, or -1
    qos.<name>.MaxTRESPerUser       gres/gpu=N: each user's in the QOS (MaxTRESPU: the same)
    qos.<name>.MaxWall              a Slurm time: the QOS's time limit cap (as MaxTime)
    qos.<name>.Preempt              comma-separated QOS names its jobs may preempt ('' : none)
    qos.<name>.PreemptMode          CANCEL, REQUEUE, OFF or cluster (PreemptMode's): what
                                    happens to the QOS's jobs when preempted
    PreemptType                     preempt/none or preempt/qos
    PreemptMode                     OFF, CANCEL or REQUEUE (GANG is ignored)
    priority.<Name>                 PriorityType, PriorityWeight{Age,Fairshare,JobSize,Partition,
                                    QOS}, PriorityMaxAge, PriorityDecayHalfLife, PriorityFavorSmall,
                                    PriorityFlags (NO_FAIR_TREE: classic fair-share),
                                    PriorityCalcPeriod (how often fair-share is recomputed)
    bf_window (minutes), bf_interval (s), bf_max_job_test, bf_resolution (s), default_queue_depth
    boot_time                       when slurmctld last started (scontrol's BOOT_TIME: epoch
                                    seconds or YYYY-MM-DDTHH:MM:SS, UTC): PriorityCalcPeriod's
                                    ticks count from it
    over_limit                      hold (a job asking more than MaxTime stays pending, as Slurm
                                    does) or cut (it runs, cut at MaxTime: users resubmit)
    node.<name>.State               DRAIN (never used) or IDLE
    node.<name>.Gres                gpu:N or gpu:<type>:N (a node added or resized)
    node.<name>.CPUs                the node's CPUs (scontrol's CPUTot), a whole number ≥ 1
    node.<name>.RealMemory          the node's memory in MiB (as slurm.conf gives it), ≥ 1

A node with no CPUs or RealMemory set is unconstrained on that resource (as is a job whose
CPUs or memory the record does not give).

A bad key or value raises `PolicyError`, one line naming it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from detectors.shell_words import scontrol_on, sh, sh_comment

__all__ = [
    "Policy",
    "PolicyError",
    "QosPolicy",
    "apply_settings",
    "parse_slurm_time",
    "preempt_mode",
    "setting_keys",
    "shares_on_the_recorded_scale",
    "slurm_lines",
    "unknown_associations",
    "unknown_names",
]


class PolicyError(ValueError):
    """A setting the replay cannot take: the message names it and says what is expected."""


@dataclass(frozen=True, slots=True)
class PartitionPolicy:
    max_time_s: int | None = None  # None: no limit
    priority_tier: int = 1
    nodes: tuple[str, ...] | None = None  # None: the nodes the lake saw its jobs on


@dataclass(frozen=True, slots=True)
class QosPolicy:
    """One QOS (slurmdbd's `sacctmgr show qos`): what the replay models of it."""

    priority: int = 0
    gpu_cap: int | None = None  # GrpTRES=gres/gpu=N: the QOS's GPUs running at once
    user_gpu_cap: int | None = None  # MaxTRESPU=gres/gpu=N: each user's in the QOS
    max_wall_s: int | None = None  # MaxWall: a time limit cap, as a partition's MaxTime
    preempt: frozenset[str] = frozenset()  # the QOS whose running jobs its jobs may preempt
    preempt_mode: str | None = None  # CANCEL, REQUEUE or OFF; None: the cluster's PreemptMode


@dataclass(frozen=True, slots=True)
class Policy:
    """Everything the replay's scheduler decides by. Defaults are Slurm 22.05's."""

    priority_type: str = "priority/basic"  # basic: first come, first served (by submit time)
    weight_age: float = 0.0
    weight_fairshare: float = 0.0
    weight_job_size: float = 0.0
    weight_partition: float = 0.0
    weight_qos: float = 0.0
    max_age_s: float = 7 * 86400.0
    decay_half_life_s: float = 7 * 86400.0
    favor_small: bool = False
    fair_tree: bool = True  # Slurm's default since 19.05; PriorityFlags=NO_FAIR_TREE: classic
    calc_period_s: float = 300.0  # PriorityCalcPeriod: how often fair-share is recomputed
    sched_latency_s: float = 1.0  # a submit or an end reaches the scheduler this much later
    boot_e: float | None = None  # slurmctld's start (its ticks' phase); None: epoch-aligned
    bf_window_s: float = 1440 * 60.0
    bf_interval_s: float = 30.0
    bf_max_job_test: int = 500
    bf_resolution_s: float = 60.0
    default_queue_depth: int = 100
    over_limit: str = "hold"  # a job asking more than MaxTime: "hold" (Slurm) or "cut" to it
    partitions: Mapping[str, PartitionPolicy] = field(default_factory=dict)
    default_partition: str | None = None  # where a job that records no partition goes
    account_gpu_cap: Mapping[str, int] = field(default_factory=dict)
    user_gpu_cap: Mapping[str, int] = field(default_factory=dict)  # per account: each user
    assoc_user_gpu_cap: Mapping[tuple[str, str], int] = field(default_factory=dict)  # one user
    shares: Mapping[str, float] = field(default_factory=dict)
    drained: frozenset[str] = frozenset()
    node_gres: Mapping[str, tuple[int, str]] = field(default_factory=dict)  # node → (gpus, type)
    node_cpus: Mapping[str, int] = field(default_factory=dict)  # node → CPUs (absent: unknown)
    node_mem_mib: Mapping[str, int] = field(default_factory=dict)  # node → MiB (absent: unknown)
    qos: Mapping[str, QosPolicy] = field(default_factory=dict)
    preempt_type: str = "preempt/none"  # or preempt/qos
    preempt_mode: str = "OFF"  # the cluster's: OFF, CANCEL or REQUEUE
    requeue_delay_s: float = 120.0  # a requeued job may start again this much (+1 s) later

    def max_time(self, partition: str) -> int | None:
        p = self.partitions.get(partition)
        return None if p is None else p.max_time_s

    def max_wall(self, qos: str) -> int | None:
        q = self.qos.get(qos)
        return None if q is None else q.max_wall_s


_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_slurm_time(text: str) -> int | None:
    """Seconds of a Slurm time limit (`None` for UNLIMITED/INFINITE). Slurm's forms: `MM`,
    `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`."""
    t = text.strip()
    if t.upper() in ("UNLIMITED", "INFINITE"):
        return None
    m = _TIME.match(t)
    if not m:
        raise ValueError(t)
    days, a, b, c = m.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        return int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    if c is not None:  # HH:MM:SS
        return int(a) * 3600 + int(b) * 60 + int(c)
    if b is not None:  # MM:SS
        return int(a) * 60 + int(b)
    return int(a) * 60  # MM


_PRIORITY_FLOATS = {
    "PriorityWeightAge": "weight_age",
    "PriorityWeightFairshare": "weight_fairshare",
    "PriorityWeightJobSize": "weight_job_size",
    "PriorityWeightPartition": "weight_partition",
    "PriorityWeightQOS": "weight_qos",
}
_SCHED = {  # key → (field, scale to seconds, integer)
    "bf_window": ("bf_window_s", 60.0, False),
    "bf_interval": ("bf_interval_s", 1.0, False),
    "bf_resolution": ("bf_resolution_s", 1.0, False),
    "bf_max_job_test": ("bf_max_job_test", 1.0, True),
    "default_queue_depth": ("default_queue_depth", 1.0, True),
    "sched_latency": ("sched_latency_s", 1.0, False),
    "requeue_delay": ("requeue_delay_s", 1.0, False),
}
_QOS_ATTRS = ("Priority", "GrpTRES", "MaxTRESPerUser", "MaxWall", "Preempt", "PreemptMode")
_PREEMPT_TYPES = ("preempt/none", "preempt/qos")


def setting_keys() -> list[str]:
    """Every key pattern `apply_settings` takes (for help texts and error lines)."""
    return [
        "partition.<name>.{MaxTime,PriorityTier,Nodes,Default}",
        "assoc.<account>.{GrpTRES,MaxTRESPerUser,Shares}",
        "assoc.<account>.<user>.GrpTRES",
        "qos.<name>.{" + ",".join(_QOS_ATTRS) + "}",
        "PreemptType",
        "PreemptMode",
        "priority.{PriorityType,PriorityMaxAge,PriorityDecayHalfLife,PriorityFavorSmall,PriorityFlags,PriorityCalcPeriod,"
        + ",".join(_PRIORITY_FLOATS)
        + "}",
        *_SCHED,
        "boot_time",
        "over_limit",
        "node.<name>.{State,Gres,CPUs,RealMemory}",
    ]


def _priority_keys() -> str:
    return next(k for k in setting_keys() if k.startswith("priority."))


# The largest count a setting takes (GPUs, CPUs, MiB): the replay holds counts in int64
# arrays, and a value past them ended in an OverflowError's traceback.
MOST = 2**31 - 1


def _count(key: str, value: str, digits: str) -> int:
    n = int(digits)
    if n > MOST:
        raise PolicyError(f"{key}={value}: expected at most {MOST:,}")
    return n


def _gpu_tres(key: str, value: str) -> int | None:
    v = value.strip()
    if v in ("-1", ""):
        return None
    m = re.fullmatch(r"(?:gres/gpu(?::[\w.-]+)?=)?(\d+)", v)
    if not m:
        raise PolicyError(f"{key}={value}: expected gres/gpu=N (a GPU count) or -1 for no limit")
    return _count(key, value, m.group(1))


def _number(key: str, value: str, *, integer: bool = False, minimum: float = 0.0) -> float:
    try:
        n = float(value)
    except ValueError:
        raise PolicyError(f"{key}={value}: not a number") from None
    if not math.isfinite(n) or n < minimum or (integer and (n != int(n) or n > MOST)):
        kind = "an integer" if integer else "a number"
        most = f" and ≤ {MOST:,}" if integer else ""
        raise PolicyError(f"{key}={value}: expected {kind} ≥ {minimum:g}{most}")
    return n


def _time(key: str, value: str) -> int | None:
    try:
        return parse_slurm_time(value)
    except ValueError:
        raise PolicyError(
            f"{key}={value}: not a Slurm time (e.g. 90, 08:00:00, 2-00:00:00, UNLIMITED)"
        ) from None


def _instant(key: str, value: str) -> float:
    """Epoch seconds of `value`: epoch seconds, or an ISO time (UTC unless it says)."""
    v = value.strip()
    try:
        return float(v)
    except ValueError:
        pass
    try:
        when = dt.datetime.fromisoformat(v)
    except ValueError:
        raise PolicyError(
            f"{key}={value}: expected epoch seconds or a time such as 2026-12-04T20:33:09"
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()


def preempt_mode(key: str, value: str, *, qos: bool = False) -> str | None:
    """The preemption mode `value` names (`None`: a QOS's `cluster`, the cluster's mode):
    OFF, CANCEL or REQUEUE; GANG is ignored (it time-slices, which the replay does not)."""
    words = {w.strip().upper() for w in value.split(",") if w.strip()} - {"GANG"}
    if qos and words <= {"CLUSTER"}:
        return None
    if not words:
        return "OFF"
    if len(words) == 1 and (mode := next(iter(words))) in ("OFF", "CANCEL", "REQUEUE"):
        return mode
    expected = "OFF, CANCEL, REQUEUE" + (" or cluster" if qos else "")
    raise PolicyError(
        f"{key}={value}: expected {expected} (SUSPEND, WITHIN and PRIORITY are not modelled)"
    )


def _apply_qos(p: Policy, key: str, name: str, attr: str, value: str) -> Policy:
    old = p.qos.get(name, QosPolicy())
    if attr == "MaxTRESPU":  # sacctmgr's column name
        attr = "MaxTRESPerUser"
    if attr == "Priority":
        new = dataclasses.replace(old, priority=int(_number(key, value, integer=True)))
    elif attr == "GrpTRES":
        new = dataclasses.replace(old, gpu_cap=_gpu_tres(key, value))
    elif attr == "MaxTRESPerUser":
        new = dataclasses.replace(old, user_gpu_cap=_gpu_tres(key, value))
    elif attr == "MaxWall":
        new = dataclasses.replace(old, max_wall_s=_time(key, value) if value.strip() else None)
    elif attr == "Preempt":
        names = frozenset(n for n in (s.strip() for s in value.strip("'\"").split(",")) if n)
        new = dataclasses.replace(old, preempt=names)
    elif attr == "PreemptMode":
        new = dataclasses.replace(old, preempt_mode=preempt_mode(key, value, qos=True))
    else:
        raise PolicyError(f"{key}: unknown QOS setting {attr!r} ({', '.join(_QOS_ATTRS)})")
    return dataclasses.replace(p, qos={**p.qos, name: new})


def _default_partition(p: Policy, key: str, value: str, name: str, old: PartitionPolicy) -> Policy:
    """`partition.<name>.Default`: YES makes `name` the default partition (the last one said,
    as slurmctld takes the last `Default=YES` line), NO undoes it; the partition is the
    cluster's either way."""
    flag = value.strip().upper()
    if flag not in ("YES", "NO"):
        raise PolicyError(f"{key}={value}: expected YES or NO")
    default = (
        name if flag == "YES" else (None if p.default_partition == name else p.default_partition)
    )
    return dataclasses.replace(p, partitions={**p.partitions, name: old}, default_partition=default)


def _set(p: Policy, name: str, value: Any) -> Policy:
    return dataclasses.replace(p, **{name: value})


def _apply_one(p: Policy, key: str, value: str) -> Policy:
    parts = key.split(".")
    head = parts[0]
    if head == "partition" and len(parts) == 3 and parts[1]:
        name, attr = parts[1], parts[2]
        old = p.partitions.get(name, PartitionPolicy())
        if attr == "MaxTime":
            new = dataclasses.replace(old, max_time_s=_time(key, value))
        elif attr == "PriorityTier":
            new = dataclasses.replace(old, priority_tier=int(_number(key, value, integer=True)))
        elif attr == "Nodes":
            nodes = tuple(n for n in (s.strip() for s in value.split(",")) if n)
            if not nodes:
                raise PolicyError(f"{key}={value}: expected comma-separated node names")
            new = dataclasses.replace(old, nodes=nodes)
        elif attr == "Default":
            return _default_partition(p, key, value, name, old)
        else:
            raise PolicyError(
                f"{key}: unknown partition setting {attr!r} (MaxTime, PriorityTier, Nodes, Default)"
            )
        return dataclasses.replace(p, partitions={**p.partitions, name: new})
    if head == "assoc" and len(parts) == 3 and parts[1]:
        account, attr = parts[1], parts[2]
        if attr == "GrpTRES":
            caps = dict(p.account_gpu_cap)
            cap = _gpu_tres(key, value)
            caps.pop(account, None) if cap is None else caps.__setitem__(account, cap)
            return dataclasses.replace(p, account_gpu_cap=caps)
        if attr == "MaxTRESPerUser":
            caps = dict(p.user_gpu_cap)
            cap = _gpu_tres(key, value)
            caps.pop(account, None) if cap is None else caps.__setitem__(account, cap)
            return dataclasses.replace(p, user_gpu_cap=caps)
        if attr == "Shares":
            shares = {**p.shares, account: _number(key, value)}
            return dataclasses.replace(p, shares=shares)
        raise PolicyError(
            f"{key}: unknown association setting {attr!r} (GrpTRES, MaxTRESPerUser, Shares)"
        )
    if head == "assoc" and len(parts) == 4 and parts[1] and parts[2]:
        if parts[3] != "GrpTRES":
            raise PolicyError(f"{key}: a user association takes GrpTRES only")
        caps2 = dict(p.assoc_user_gpu_cap)
        cap = _gpu_tres(key, value)
        who = (parts[1], parts[2])
        caps2.pop(who, None) if cap is None else caps2.__setitem__(who, cap)
        return dataclasses.replace(p, assoc_user_gpu_cap=caps2)
    if head == "qos" and len(parts) == 3 and parts[1]:
        return _apply_qos(p, key, parts[1], parts[2], value)
    if key == "PreemptType":
        if value.strip() not in _PREEMPT_TYPES:
            raise PolicyError(
                f"{key}={value}: expected preempt/none or preempt/qos "
                "(preempt/partition_prio is not modelled)"
            )
        return dataclasses.replace(p, preempt_type=value.strip())
    if key == "PreemptMode":
        return dataclasses.replace(p, preempt_mode=preempt_mode(key, value) or "OFF")
    if head == "priority" and len(parts) == 2:
        # Slurm reads these names in any case (scontrol prints PriorityWeightFairShare)
        known = (
            "PriorityType",
            "PriorityMaxAge",
            "PriorityDecayHalfLife",
            "PriorityFavorSmall",
            "PriorityFlags",
            "PriorityCalcPeriod",
        )
        attr = next((k for k in (*known, *_PRIORITY_FLOATS) if k.lower() == parts[1].lower()), "")
        if attr == "PriorityType":
            if value not in ("priority/basic", "priority/multifactor"):
                raise PolicyError(f"{key}={value}: expected priority/basic or priority/multifactor")
            return dataclasses.replace(p, priority_type=value)
        if attr in _PRIORITY_FLOATS:
            return _set(p, _PRIORITY_FLOATS[attr], _number(key, value))
        if attr in ("PriorityMaxAge", "PriorityDecayHalfLife", "PriorityCalcPeriod"):
            seconds = _time(key, value)
            target = {
                "PriorityMaxAge": "max_age_s",
                "PriorityDecayHalfLife": "decay_half_life_s",
                "PriorityCalcPeriod": "calc_period_s",
            }[attr]
            return _set(p, target, float(seconds or 0))
        if attr == "PriorityFlags":
            flags = {f.strip().upper() for f in value.split(",") if f.strip()}
            return dataclasses.replace(p, fair_tree="NO_FAIR_TREE" not in flags)
        if attr == "PriorityFavorSmall":
            flag = value.strip().upper()
            if flag not in ("YES", "NO", "TRUE", "FALSE", "1", "0"):
                raise PolicyError(f"{key}={value}: expected YES or NO")
            return dataclasses.replace(p, favor_small=flag in ("YES", "TRUE", "1"))
        raise PolicyError(f"{key}: unknown priority setting (one of {_priority_keys()})")
    if key == "boot_time":
        return dataclasses.replace(p, boot_e=_instant(key, value))
    if key == "over_limit":
        if value not in ("hold", "cut"):
            raise PolicyError(f"{key}={value}: expected hold or cut")
        return dataclasses.replace(p, over_limit=value)
    if len(parts) == 1 and head in _SCHED:
        target, scale, integer = _SCHED[head]
        zero_ok = head in ("sched_latency", "requeue_delay")
        n = _number(key, value, integer=integer, minimum=0.0 if zero_ok else 1.0)
        return _set(p, target, int(n) if integer else n * scale)
    if head == "node" and len(parts) == 3 and parts[1]:
        node, attr = parts[1], parts[2]
        if attr == "State":
            state = value.strip().upper()
            if state in ("DRAIN", "DOWN"):
                return dataclasses.replace(p, drained=p.drained | {node})
            if state in ("IDLE", "UP", "RESUME"):
                return dataclasses.replace(p, drained=p.drained - {node})
            raise PolicyError(f"{key}={value}: expected DRAIN or IDLE")
        if attr == "Gres":
            m = re.fullmatch(r"gpu(?::([\w.-]+))?:(\d+)", value.strip())
            if not m:
                raise PolicyError(f"{key}={value}: expected gpu:N or gpu:<type>:N")
            gres = {**p.node_gres, node: (_count(key, value, m.group(2)), m.group(1) or "")}
            return dataclasses.replace(p, node_gres=gres)
        if attr == "CPUs":
            cpus = int(_number(key, value, integer=True, minimum=1.0))
            return dataclasses.replace(p, node_cpus={**p.node_cpus, node: cpus})
        if attr == "RealMemory":
            mib = int(_number(key, value, integer=True, minimum=1.0))
            return dataclasses.replace(p, node_mem_mib={**p.node_mem_mib, node: mib})
        raise PolicyError(f"{key}: unknown node setting {attr!r} (State, Gres, CPUs, RealMemory)")
    raise PolicyError(f"{key}: unknown setting; the replay takes {'; '.join(setting_keys())}")


def apply_settings(policy: Policy, settings: Iterable[str | tuple[str, str]]) -> Policy:
    """`policy` with each `KEY=VALUE` (or (key, value)) applied in order."""
    for item in settings:
        if isinstance(item, tuple):
            key, value = item
        else:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise PolicyError(f"{item}: expected KEY=VALUE")
        policy = _apply_one(policy, key.strip(), value.strip())
    return policy


def unknown_names(
    changes: Iterable[str],
    nodes: Iterable[str],
    partitions: Iterable[str],
    no_partition: str = "",
) -> None:
    """Raise PolicyError for a change to a node or partition the cluster does not have (a
    misspelt name changed nothing and the proposal's figures were the baseline's); a node a
    change gives GPUs (`node.<name>.Gres`) is added by it. `no_partition`: what the error
    says for a partition where the cluster has none (its jobs record none)."""
    known_nodes, known_partitions = set(nodes), set(partitions)
    parsed = [item.partition("=")[0].strip().split(".") for item in changes]
    known_nodes |= {p[1] for p in parsed if len(p) == 3 and p[0] == "node" and p[2] == "Gres"}
    for parts in parsed:
        if len(parts) != 3 or parts[0] not in ("node", "partition"):
            continue
        head, name = parts[0], parts[1]
        known = known_nodes if head == "node" else known_partitions
        if name not in known:
            some = ", ".join(sorted(known)[:8]) + (", …" if len(known) > 8 else "")
            if known:
                some = f" (it has {some})"
            elif head == "partition" and no_partition:
                some = f": {no_partition}"
            raise PolicyError(f"{'.'.join(parts)}: the cluster has no {head} {name!r}{some}")


def unknown_associations(
    changes: Iterable[str],
    accounts: Iterable[str],
    users: Iterable[tuple[str, str]],
    qos: Iterable[str],
) -> None:
    """Raise PolicyError for a change to an account, a user's association (account, user) or
    a QOS the cluster's records do not name: `assoc.studnets.GrpTRES` replayed as no change,
    and the proposal's figures read as the baseline's."""
    known_accounts, known_users, known_qos = set(accounts), set(users), set(qos)
    for item in changes:
        parts = item.partition("=")[0].strip().split(".")
        if parts[0] == "assoc" and len(parts) in (3, 4) and parts[1] not in known_accounts:
            raise PolicyError(
                f"{'.'.join(parts)}: {_none_such('account', parts[1], known_accounts)}"
            )
        if parts[0] == "assoc" and len(parts) == 4 and (parts[1], parts[2]) not in known_users:
            mine = {u for a, u in known_users if a == parts[1]}
            raise PolicyError(
                f"{'.'.join(parts)}: {_none_such(f'user in account {parts[1]!r}', parts[2], mine)}"
            )
        if parts[0] == "qos" and len(parts) == 3 and parts[1] not in known_qos:
            raise PolicyError(f"{'.'.join(parts)}: {_none_such('QOS', parts[1], known_qos)}")


def _none_such(kind: str, name: str, known: set[str]) -> str:
    some = ", ".join(sorted(known)[:8]) + (", …" if len(known) > 8 else "")
    return f"the cluster's records have no {kind} {name!r}" + (
        f" (they have {some})" if known else ""
    )


def shares_on_the_recorded_scale(recorded: Policy, changes: Iterable[str]) -> None:
    """Raise PolicyError for an `assoc.<a>.Shares` above 1 where a share tree is recorded: the
    recorded shares are the accounts' parts of it (they add up to 1), so sacctmgr's raw shares
    (15 for an account recorded at 0.15) would hand it nearly the whole cluster."""
    if not recorded.shares:
        return
    for item in changes:
        key, _, value = item.partition("=")
        parts = key.strip().split(".")
        if len(parts) == 3 and parts[0] == "assoc" and parts[2] == "Shares":
            try:
                too_big = float(value) > 1.0
            except ValueError:
                continue  # (apply_settings names it)
            if too_big:
                now = recorded.shares.get(parts[1])
                was = f"; {parts[1]} is recorded at {now:.4g}" if now is not None else ""
                raise PolicyError(
                    f"{key.strip()}={value.strip()}: expected the account's part of the recorded "
                    f"share tree (0–1, sshare's NormShares), not sacctmgr's raw shares{was}"
                )


def slurm_lines(settings: Iterable[str], cluster: str) -> list[str]:
    """The commands (or slurm.conf lines) that put each `KEY=VALUE` setting on `cluster`, as an
    operator would type them; a setting with no single command gets a comment. Every name and
    value is one shell word (`sh`: a partition, account or cluster name is data), and scontrol
    names the cluster (`-M`) as sacctmgr does (`cluster=`)."""
    scontrol = scontrol_on(cluster)
    on = sh(f"cluster={cluster}")
    lines = []
    for item in settings:
        key, _, value = item.partition("=")
        parts = key.strip().split(".")
        value = value.strip()
        head = parts[0]
        said = sh_comment(f"{key.strip()}={value}")
        if head == "partition" and len(parts) == 3:
            lines.append(
                f"{scontrol} update {sh(f'PartitionName={parts[1]}')} {sh(f'{parts[2]}={value}')}"
            )
        elif head == "assoc" and len(parts) == 4:
            lines.append(
                f"sacctmgr -i modify user where {sh(f'name={parts[2]}')} "
                f"{sh(f'account={parts[1]}')} {on} set {sh(f'GrpTRES={value}')}"
            )
        elif head == "assoc" and len(parts) == 3 and parts[2] == "Shares":
            # the lab's share is the account's part of the whole tree (NormShares); sacctmgr's
            # fairshare is a raw number against its siblings': no one number says that
            lines.append(
                f"# {said}: set {sh_comment(parts[1])}'s fairshare (sacctmgr -i modify account "
                f"{sh_comment(f'name={parts[1]}')} {sh_comment(f'cluster={cluster}')} set "
                f"fairshare=N) so that sshare shows its NormShares at {sh_comment(value)}: N "
                "counts against its siblings' raw shares"
            )
        elif head == "assoc" and len(parts) == 3:
            lines.append(
                f"sacctmgr -i modify account where {sh(f'name={parts[1]}')} {on} "
                f"set {sh(f'{parts[2]}={value}')}"
            )
        elif head == "priority" and len(parts) == 2:
            lines.append(
                f"# slurm.conf: {sh_comment(f'{parts[1]}={value}')}   (then: scontrol reconfigure)"
            )
        elif head == "qos" and len(parts) == 3:
            lines.append(
                f"sacctmgr -i modify qos where {sh(f'name={parts[1]}')} "
                f"set {sh(f'{parts[2]}={value}')}"
            )
        elif key.strip() == "PreemptType":
            lines.append(f"# slurm.conf: {said}   (then restart slurmctld)")
        elif key.strip() == "PreemptMode":
            lines.append(f"# slurm.conf: {said}   (then: scontrol reconfigure)")
        elif head == "node" and len(parts) == 3 and parts[2] == "State":
            reason = " Reason=policy-lab" if value.upper() == "DRAIN" else ""
            lines.append(
                f"{scontrol} update {sh(f'NodeName={parts[1]}')} "
                f"{sh(f'State={value.upper()}')}{reason}"
            )
        elif head == "node" and len(parts) == 3:
            lines.append(
                f"# slurm.conf: on NodeName={sh_comment(parts[1])} set "
                f"{sh_comment(f'{parts[2]}={value}')}"
            )
        elif key.strip() == "boot_time":
            lines.append(f"# boot_time={sh_comment(value)}: when slurmctld started, not a setting")
        elif key.strip() == "over_limit":
            lines.append(
                f"# over_limit={sh_comment(value)}: how users react to a limit, not a setting"
            )
        else:
            lines.append(f"# slurm.conf: SchedulerParameters … {said}")
    return lines
