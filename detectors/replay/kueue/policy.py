"""The Kueue policy a replay admits under, and the `KEY=VALUE` settings that change it.

The same setting syntax serves what the lake recorded (the `queues` table's ClusterQueues, as
`collect kubernetes` lands them) and a what-if's `--set`. Keys, in Kueue's own field names:

    clusterqueue.<cq>.nominalQuota[.<resource>][@<flavor>]    GPUs (an integer ≥ 0)
    clusterqueue.<cq>.borrowingLimit[.<resource>][@<flavor>]  GPUs, or none (no limit)
    clusterqueue.<cq>.lendingLimit[.<resource>][@<flavor>]    GPUs, or none (lends it all)
    clusterqueue.<cq>.cohort                                  a cohort name, or none
    clusterqueue.<cq>.fairSharing.weight                      a number ≥ 0 (default 1)
    clusterqueue.<cq>.queueingStrategy                        BestEffortFIFO or StrictFIFO
    clusterqueue.<cq>.preemption.withinClusterQueue           Never, LowerPriority,
                                                              LowerOrNewerEqualPriority
    clusterqueue.<cq>.preemption.reclaimWithinCohort          Never, LowerPriority, Any
    priorityclass.<name>                                      the class's priority (an integer)
    fairSharing.enable                                        true or false

`<resource>` (e.g. `nvidia.com/gpu`) is informative: the replay counts one GPU resource per
flavor. `@<flavor>` names the flavor when the ClusterQueue has several. A bad key or value
raises the Slurm policy's `PolicyError`, one line naming it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from detectors.replay.policy import PolicyError

__all__ = [
    "ClusterQueuePolicy",
    "FlavorQuota",
    "KueuePolicy",
    "apply_kueue_settings",
    "kueue_apply_lines",
    "kueue_setting_keys",
    "kueue_yaml_lines",
    "quota_resources",
]

DEFAULT_FLAVOR = "default-flavor"
_QUOTA_ATTRS = ("nominalQuota", "borrowingLimit", "lendingLimit")
_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
_WITHIN = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
_RECLAIM = ("Never", "LowerPriority", "Any")
_NONE = ("", "none", "null", "-1", "unset")


@dataclass(frozen=True, slots=True)
class FlavorQuota:
    """A ClusterQueue's GPU quota in one flavor (None: the limit is not set)."""

    nominal: float = 0.0
    borrowing_limit: float | None = None
    lending_limit: float | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueuePolicy:
    """What Kueue admits a ClusterQueue's workloads by. Defaults are Kueue's."""

    flavors: Mapping[str, FlavorQuota] = field(default_factory=dict)  # in the order tried
    cohort: str | None = None
    weight: float = 1.0
    queueing_strategy: str = "BestEffortFIFO"
    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"


@dataclass(frozen=True, slots=True)
class KueuePolicy:
    """Every ClusterQueue, the priority classes' values and whether fair sharing is on."""

    queues: Mapping[str, ClusterQueuePolicy] = field(default_factory=dict)
    priorities: Mapping[str, int] = field(default_factory=dict)  # priority class → value
    fair_sharing: bool = False

    @property
    def nominal_gpus(self) -> float:
        """The GPUs of every ClusterQueue's nominal quota: what its workloads can hold."""
        return sum(q.nominal for cq in self.queues.values() for q in cq.flavors.values())


def kueue_setting_keys() -> list[str]:
    """Every key pattern `apply_kueue_settings` takes (for help texts and error lines)."""
    return [
        "clusterqueue.<cq>.{nominalQuota,borrowingLimit,lendingLimit}[.<resource>][@<flavor>]",
        "clusterqueue.<cq>.{cohort,fairSharing.weight,queueingStrategy}",
        "clusterqueue.<cq>.preemption.{withinClusterQueue,reclaimWithinCohort}",
        "priorityclass.<name>",
        "fairSharing.enable",
    ]


def _gpus(key: str, value: str, *, optional: bool) -> float | None:
    v = value.strip()
    if optional and v.lower() in _NONE:
        return None
    if not re.fullmatch(r"\d+", v):
        more = ", or none" if optional else ""
        raise PolicyError(f"{key}={value}: expected a whole number of GPUs{more}")
    return float(v)


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> str:
    found = next((a for a in allowed if a.lower() == value.strip().lower()), None)
    if found is None:
        raise PolicyError(f"{key}={value}: expected {', '.join(allowed)}")
    return found


def _split_queue_key(key: str) -> tuple[str, str, str]:
    """(cluster queue, attribute, rest) of `clusterqueue.<cq>.<attr>[.<rest>]`; the queue name
    may hold dots (Kubernetes names do), the attribute is the first known one after it."""
    parts = key.split(".")
    known = (*_QUOTA_ATTRS, "cohort", "fairSharing", "weight", "queueingStrategy", "preemption")
    for i in range(2, len(parts)):
        if parts[i] in known:
            return ".".join(parts[1:i]), parts[i], ".".join(parts[i + 1 :])
    raise PolicyError(
        f"{key}: unknown ClusterQueue setting; the replay takes {'; '.join(kueue_setting_keys())}"
    )


def _flavor(key: str, cq: ClusterQueuePolicy, rest: str) -> str:
    _, at, flavor = rest.partition("@")
    if at:
        if not flavor:
            raise PolicyError(f"{key}: expected a flavor name after @")
        return flavor
    if len(cq.flavors) > 1:
        raise PolicyError(
            f"{key}: the ClusterQueue has flavors {', '.join(cq.flavors)}; name one with "
            "@<flavor> at the end of the key"
        )
    return next(iter(cq.flavors), DEFAULT_FLAVOR)


def _apply_queue(p: KueuePolicy, key: str, value: str) -> KueuePolicy:
    name, attr, rest = _split_queue_key(key)
    if not name:
        raise PolicyError(f"{key}: expected clusterqueue.<name>.{attr}")
    cq = p.queues.get(name, ClusterQueuePolicy())
    if attr in _QUOTA_ATTRS:
        flavor = _flavor(key, cq, rest)
        old = cq.flavors.get(flavor, FlavorQuota())
        if attr == "nominalQuota":
            new = dataclasses.replace(old, nominal=_gpus(key, value, optional=False) or 0.0)
        elif attr == "borrowingLimit":
            new = dataclasses.replace(old, borrowing_limit=_gpus(key, value, optional=True))
        else:
            new = dataclasses.replace(old, lending_limit=_gpus(key, value, optional=True))
        cq = dataclasses.replace(cq, flavors={**cq.flavors, flavor: new})
    elif attr == "cohort" and not rest:
        cohort = value.strip()
        cq = dataclasses.replace(cq, cohort=None if cohort.lower() in _NONE else cohort)
    elif (attr, rest) in (("fairSharing", "weight"), ("weight", "")):
        try:
            weight = float(value)
        except ValueError:
            weight = -1.0
        if not weight >= 0:
            raise PolicyError(f"{key}={value}: expected a number ≥ 0")
        cq = dataclasses.replace(cq, weight=weight)
    elif attr == "queueingStrategy" and not rest:
        cq = dataclasses.replace(cq, queueing_strategy=_choice(key, value, _STRATEGIES))
    elif (attr, rest) == ("preemption", "withinClusterQueue"):
        cq = dataclasses.replace(cq, within_cluster_queue=_choice(key, value, _WITHIN))
    elif (attr, rest) == ("preemption", "reclaimWithinCohort"):
        cq = dataclasses.replace(cq, reclaim_within_cohort=_choice(key, value, _RECLAIM))
    else:
        raise PolicyError(
            f"{key}: unknown ClusterQueue setting; the replay takes "
            f"{'; '.join(kueue_setting_keys())}"
        )
    return dataclasses.replace(p, queues={**p.queues, name: cq})


def _apply_one(p: KueuePolicy, key: str, value: str) -> KueuePolicy:
    head = key.split(".", 1)[0]
    if head == "clusterqueue":
        return _apply_queue(p, key, value)
    if head == "priorityclass" and key.count(".") >= 1 and key.split(".", 1)[1]:
        name = key.split(".", 1)[1]
        if not re.fullmatch(r"-?\d+", value.strip()):
            raise PolicyError(f"{key}={value}: expected an integer priority")
        return dataclasses.replace(p, priorities={**p.priorities, name: int(value)})
    if key == "fairSharing.enable":
        flag = value.strip().lower()
        if flag not in ("true", "false", "yes", "no", "1", "0"):
            raise PolicyError(f"{key}={value}: expected true or false")
        return dataclasses.replace(p, fair_sharing=flag in ("true", "yes", "1"))
    raise PolicyError(
        f"{key}: unknown setting for a Kueue cluster; the replay takes "
        f"{'; '.join(kueue_setting_keys())}"
    )


def apply_kueue_settings(
    policy: KueuePolicy, settings: Iterable[str | tuple[str, str]]
) -> KueuePolicy:
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


def kueue_yaml_lines(settings: Iterable[str]) -> list[str]:
    """How an operator puts each `KEY=VALUE` on a live cluster (kubectl patch or a comment)."""
    lines = []
    for item in settings:
        key, _, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if key.startswith("clusterqueue."):
            name, attr, rest = _split_queue_key(key)
            lines.append(
                f"kubectl edit clusterqueue {name}   # set {attr}{'.' + rest if rest else ''}"
                f" = {value}"
            )
        elif key.startswith("priorityclass."):
            lines.append(f"# WorkloadPriorityClass {key.split('.', 1)[1]}: value: {value}")
        else:
            lines.append(f"# Kueue Configuration (kueue-manager-config): {key}: {value}")
    return lines


def _patch(kind: str, name: str, body: object) -> str:
    return (
        f"kubectl patch {kind} {shlex.quote(name)} --type=merge "
        f"-p {shlex.quote(json.dumps(body, separators=(',', ':')))}"
    )


def _quota_line(name: str, attr: str, flavor: str, resource: str, value: str) -> str:
    """The jq edit of one flavor's resource in a ClusterQueue's spec.resourceGroups (a merge
    patch would replace the whole list, a JSON patch needs its indices)."""
    where = (
        f".spec.resourceGroups[].flavors[] | select(.name == {json.dumps(flavor)}) | "
        f".resources[] | select(.name == {json.dumps(resource)})"
    )
    if value.lower() in _NONE:
        edit = f"del({where} | .{attr})"
    else:
        edit = f"({where}).{attr} = {json.dumps(value)}"
    return (
        f"kubectl get clusterqueue {shlex.quote(name)} -o json | jq {shlex.quote(edit)} "
        "| kubectl replace -f -"
    )


def quota_resources(settings: Iterable[str | tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(ClusterQueue, flavor) → the resource its quota keys name (`recorded_kueue_settings`
    spells each as `clusterqueue.<cq>.nominalQuota.<resource>@<flavor>`)."""
    out: dict[tuple[str, str], str] = {}
    for item in settings:
        key = item[0] if isinstance(item, tuple) else item.partition("=")[0]
        if not key.startswith("clusterqueue."):
            continue
        try:
            name, attr, rest = _split_queue_key(key.strip())
        except PolicyError:
            continue
        resource, at, flavor = rest.partition("@")
        if attr in _QUOTA_ATTRS and resource and at and flavor:
            out[(name, flavor)] = resource
    return out


def kueue_apply_lines(
    settings: Iterable[str],
    policy: KueuePolicy,
    resources: Mapping[tuple[str, str], str] | None = None,
) -> list[str]:
    """The exact commands that put each `KEY=VALUE` on the live cluster: `kubectl patch` of the
    ClusterQueue or WorkloadPriorityClass, a `kubectl get | jq | kubectl replace` for a
    flavor's quota, Kueue's Configuration as a comment. `policy` (the recorded one) names the
    flavor a key leaves out, `resources` the GPU resource of each (ClusterQueue, flavor)
    (default `nvidia.com/gpu`). Raises PolicyError on a key `apply_kueue_settings` refuses."""
    lines = []
    resources = resources or {}
    for item in settings:
        key, _, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if key.startswith("clusterqueue."):
            name, attr, rest = _split_queue_key(key)
            if attr in _QUOTA_ATTRS:
                flavor = _flavor(key, policy.queues.get(name, ClusterQueuePolicy()), rest)
                resource = rest.partition("@")[0] or resources.get((name, flavor), "nvidia.com/gpu")
                lines.append(_quota_line(name, attr, flavor, resource, value))
                continue
            field_path = {
                ("cohort", ""): ("cohort",),
                ("fairSharing", "weight"): ("fairSharing", "weight"),
                ("weight", ""): ("fairSharing", "weight"),
                ("queueingStrategy", ""): ("queueingStrategy",),
                ("preemption", "withinClusterQueue"): ("preemption", "withinClusterQueue"),
                ("preemption", "reclaimWithinCohort"): ("preemption", "reclaimWithinCohort"),
            }.get((attr, rest))
            if field_path is None:
                raise PolicyError(f"{key}: unknown ClusterQueue setting")
            new: object = value
            if attr == "cohort" and value.lower() in _NONE:
                new = None
            body: object = new
            for part in reversed(field_path):
                body = {part: body}
            lines.append(_patch("clusterqueue", name, {"spec": body}))
        elif key.startswith("priorityclass."):
            lines.append(
                _patch("workloadpriorityclass", key.split(".", 1)[1], {"value": int(value)})
            )
        else:
            enable = "true" if value.lower() in ("true", "yes", "1") else "false"
            lines.append(
                "# Kueue's Configuration (the kueue-manager-config ConfigMap in kueue-system): "
                f"fairSharing: {{enable: {enable}}}, then "
                "kubectl -n kueue-system rollout restart deployment kueue-controller-manager"
            )
    return lines
