"""Read what decides scheduling out of a `slurm.conf` file, as `KEY=VALUE` replay settings.

The keys are the policy lab's (`detectors.replay.policy`): `partition.<p>.MaxTime`,
`partition.<p>.PriorityTier`, `partition.<p>.Nodes` (host lists expanded), `node.<n>.Gres`,
`node.<n>.CPUs` and `node.<n>.RealMemory` (`NodeName=DEFAULT` values apply to the lines after
it; RealMemory only where `SelectTypeParameters` makes memory consumable),
`priority.<PriorityName>`, `PreemptType`, `PreemptMode` and the `SchedulerParameters` the replay
models (`bf_window`, `bf_interval`, `bf_max_job_test`, `bf_resolution`, `default_queue_depth`,
`requeue_delay`). Everything else in the file is left out; QOS live in slurmdbd (`sacctmgr`), not
in slurm.conf, so a QOS setting comes from the lake's snapshot or `--set`. Pure: text in,
settings out; `ConfigError` names a line Slurm would refuse, or a text that is no slurm.conf.
"""

from __future__ import annotations

import re
import shlex

from collector.errors import ConfigError, MalformedSample
from collector.sources.slurm.hostlist import expand_hostlist

__all__ = ["settings_from_slurm_conf"]

_PRIORITY = (
    "PriorityType",
    "PriorityWeightAge",
    "PriorityWeightFairshare",
    "PriorityWeightJobSize",
    "PriorityWeightPartition",
    "PriorityWeightQOS",
    "PriorityMaxAge",
    "PriorityDecayHalfLife",
    "PriorityFavorSmall",
    "PriorityFlags",
    "PriorityCalcPeriod",
)
_SCHEDULER = (
    "bf_window",
    "bf_interval",
    "bf_max_job_test",
    "bf_resolution",
    "default_queue_depth",
    "requeue_delay",
)


def _modelled(key: str, value: str) -> bool:
    """Whether the replay models this preemption setting: preempt/qos (or none) with OFF,
    CANCEL or REQUEUE (GANG aside). SUSPEND and preempt/partition_prio are left out, so the
    replay runs without preemption rather than refusing the file."""
    if key == "PreemptType":
        return value in ("preempt/none", "preempt/qos")
    words = {w.strip().upper() for w in value.split(",") if w.strip()} - {"GANG"}
    return len(words) <= 1 and words <= {"OFF", "CANCEL", "REQUEUE"}


def _pairs(line: str, where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        tokens = shlex.split(line, comments=False)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep:
            raise ConfigError(f"{where}: {token!r} is not KEY=VALUE")
        out[key.lower()] = value
    return out


def _hosts(text: str, where: str) -> list[str]:
    try:
        return expand_hostlist(text)
    except MalformedSample as exc:
        raise ConfigError(f"{where}: {exc}") from None


# A line that sets something, as every slurm.conf has (ClusterName=, SlurmctldHost=, …)
_SETTING = re.compile(r"[A-Za-z][A-Za-z0-9]*\s*=")


def settings_from_slurm_conf(text: str, source: str = "slurm.conf") -> list[tuple[str, str]]:
    """The replay settings `text` (a slurm.conf) makes, in file order. A text that is no
    slurm.conf at all (binary, or no `Key=Value` line) is a ConfigError: read as one with
    nothing in it, it replayed Slurm's defaults and said it replayed the file."""
    if "\x00" in text:
        raise ConfigError(f"{source}: not a slurm.conf: it is not text (it holds NUL bytes)")
    if not any(_SETTING.match(line.split("#", 1)[0].strip()) for line in text.splitlines()):
        raise ConfigError(
            f"{source}: not a slurm.conf: no Key=Value line in it (e.g. ClusterName=…)"
        )
    settings: list[tuple[str, str]] = []
    sizes: list[tuple[str, str]] = []  # nodes' CPUs and RealMemory
    node_defaults: dict[str, str] = {}  # NodeName=DEFAULT: for the NodeName lines after it
    memory = True  # whether memory is a consumable resource (SelectTypeParameters=CR_*_Memory)
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{number}"
        head, _, _ = line.partition("=")
        head_key = head.strip().lower()
        if head_key in ("nodename", "partitionname"):
            pairs = _pairs(line, where)
            name = pairs.get(head_key, "")
            if head_key == "nodename" and name.upper() == "DEFAULT":
                node_defaults.update({k: v for k, v in pairs.items() if k != "nodename"})
                continue
            if not name or name.upper() == "DEFAULT":
                continue
            if head_key == "nodename":
                hosts = _hosts(name, where)
                merged = {**node_defaults, **pairs}
                gres = merged.get("gres", "")
                gpu = next((g for g in gres.split(",") if g.startswith("gpu")), "")
                if gpu:
                    gpu = re.sub(r"\(.*\)$", "", gpu)  # gpu:a100:8(S:0-1)
                    settings.extend((f"node.{node}.Gres", gpu) for node in hosts)
                for attr, value in _node_size(merged, where).items():
                    sizes.extend((f"node.{node}.{attr}", value) for node in hosts)
                continue
            if "nodes" in pairs and pairs["nodes"].upper() != "ALL":
                nodes = _hosts(pairs["nodes"], where)
                settings.append((f"partition.{name}.Nodes", ",".join(nodes)))
            if "maxtime" in pairs:
                settings.append((f"partition.{name}.MaxTime", pairs["maxtime"]))
            if "prioritytier" in pairs:
                settings.append((f"partition.{name}.PriorityTier", pairs["prioritytier"]))
            if pairs.get("default", "").upper() == "YES":  # where a job naming none goes
                settings.append((f"partition.{name}.Default", "YES"))
            continue
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key in _PRIORITY:
            settings.append((f"priority.{key}", value))
        elif key in ("PreemptType", "PreemptMode") and _modelled(key, value):
            settings.append((key, value))
        elif key == "SchedulerParameters":
            for item in value.split(","):
                name, sep, v = item.strip().partition("=")
                if sep and name in _SCHEDULER:
                    settings.append((name, v))
        elif key.lower() == "selecttypeparameters":
            memory = "MEMORY" in value.upper()
    return settings + [(k, v) for k, v in sizes if memory or not k.endswith(".RealMemory")]


def _node_size(pairs: dict[str, str], where: str) -> dict[str, str]:
    """A NodeName line's CPUs and RealMemory, where it gives them: `CPUs`, else Slurm's
    Boards × Sockets × CoresPerSocket × ThreadsPerCore when any of those is given (a line with
    none leaves the node's CPUs unknown to the replay, not Slurm's default of 1); RealMemory
    (MiB) unless it is Slurm's default of 1."""
    out: dict[str, str] = {}
    layout = ("boards", "socketsperboard", "sockets", "corespersocket", "threadspercore")
    try:
        if "cpus" in pairs:
            out["CPUs"] = str(int(pairs["cpus"]))
        elif any(k in pairs for k in layout):
            sockets = int(pairs.get("sockets") or 0) or int(pairs.get("boards", 1)) * int(
                pairs.get("socketsperboard", 1)
            )
            cores, threads = (
                int(pairs.get("corespersocket", 1)),
                int(pairs.get("threadspercore", 1)),
            )
            out["CPUs"] = str(sockets * cores * threads)
        if int(pairs.get("realmemory", 1)) > 1:
            out["RealMemory"] = str(int(pairs["realmemory"]))
    except ValueError as exc:
        raise ConfigError(
            f"{where}: a node's CPUs or memory is not a whole number ({exc})"
        ) from None
    return out
