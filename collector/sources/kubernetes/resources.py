"""Kubernetes quantities, times and a pod's effective resource requests (pure functions).

* Quantities (`"500m"`, `"64Gi"`, `"1e3"`, `"8"`) follow apimachinery's grammar: a decimal number
  with an optional binary (`Ki`…`Ei`), decimal (`n u m k M G T P E`) or exponent suffix.
* A pod's effective request of a resource follows the scheduler's rule: the larger of (a) the
  sum over its containers plus its sidecars (init containers with `restartPolicy: Always`) and
  (b) for each other init container, its own request plus the sidecars started before it. A
  container that sets a limit but no request of a resource requests its limit (always so for
  extended resources such as GPUs, which cannot be overcommitted).
* GPU resources are NVIDIA's device-plugin names: `nvidia.com/gpu` (whole GPUs, or MIG devices
  under the `single` MIG strategy), `nvidia.com/gpu.shared` (time-slicing/MPS replicas with
  `renameByDefault`) and `nvidia.com/mig-<profile>` (MIG instances under the `mixed` strategy).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from collector.errors import MalformedSample

__all__ = [
    "GPU_RESOURCE",
    "effective_requests",
    "gpu_resources",
    "is_gpu_resource",
    "mig_profile",
    "parse_quantity",
    "parse_time_ms",
]

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
_MIG_PREFIX = "nvidia.com/mig-"
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?P<suffix>[eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
# Kubernetes' quantities fit 2^63 (about 9.2e18) and resolve to nano units: beyond 1e±30 a
# value is no resource.
_MAX_EXPONENT = 30
_SUFFIXES = {
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


def parse_quantity(value: object) -> Decimal:
    """Return the value of a Kubernetes quantity (`"250m"` → 0.25, `"1Gi"` → 1073741824).

    Raises MalformedSample for anything that is not a quantity.
    """
    if isinstance(value, bool):
        raise MalformedSample(f"invalid quantity {value!r}")
    if isinstance(value, int | float):
        number = Decimal(str(value))
        if not number.is_finite():
            raise MalformedSample(f"invalid quantity {value!r}")
        return number
    if not isinstance(value, str):
        raise MalformedSample(f"invalid quantity {value!r}: expected a string like '8' or '64Gi'")
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise MalformedSample(f"invalid quantity {value!r}: expected e.g. '8', '500m' or '64Gi'")
    try:
        number = Decimal(match["number"])
    except InvalidOperation:  # pragma: no cover - the pattern admits only valid decimals
        raise MalformedSample(f"invalid quantity {value!r}") from None
    suffix = match["suffix"]
    if suffix is None:
        return number
    if suffix in _SUFFIXES:  # ("Ei" is exbi, not an exponent)
        return number * _SUFFIXES[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > _MAX_EXPONENT:  # no resource is that large or small (1e999999 hung)
        raise MalformedSample(f"invalid quantity {value!r}: exponent out of range")
    return number.scaleb(exponent)


def parse_time_ms(value: object, what: str = "time") -> int | None:
    """Milliseconds since the epoch of an RFC 3339 time (`2026-11-30T09:12:44Z`); None for null."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise MalformedSample(f"invalid {what} {value!r}: expected an RFC 3339 time")
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise MalformedSample(f"invalid {what} {value!r}: expected an RFC 3339 time") from None
    if parsed.tzinfo is None:  # the API always writes UTC; be lenient with hand-made input
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)


def is_gpu_resource(name: str) -> bool:
    """Whether `name` is a GPU resource of NVIDIA's device plugin (whole, shared or MIG)."""
    return name in (GPU_RESOURCE, SHARED_GPU_RESOURCE) or name.startswith(_MIG_PREFIX)


def mig_profile(name: str) -> str | None:
    """The MIG profile of a mixed-strategy resource (`nvidia.com/mig-1g.10gb` → `1g.10gb`)."""
    return name[len(_MIG_PREFIX) :] if name.startswith(_MIG_PREFIX) else None


# The most GPUs one object can ask for or have: the lake's counts are int32 (`jobs.gpus`), and
# the API server takes any whole number for an extended resource (a pending pod asking for
# "1e12" stopped every collect of its cluster with a traceback).
MOST_GPUS = 2**31 - 1


def gpu_resources(resources: Mapping[str, Decimal]) -> dict[str, int]:
    """The GPU resources among `resources` with a positive amount, as whole device counts.
    Raises MalformedSample for counts no device count can be (above MOST_GPUS, alone or in
    all: a pod's GPUs are their sum)."""
    out: dict[str, int] = {}
    for name, amount in resources.items():
        if is_gpu_resource(name) and amount > 0:
            if amount > MOST_GPUS:
                raise MalformedSample(f"{name}: {amount} is no count of GPUs")
            out[name] = int(amount.to_integral_value(rounding=ROUND_CEILING))
    if sum(out.values()) > MOST_GPUS:
        raise MalformedSample(f"{' + '.join(sorted(out))}: {sum(out.values())} is no count of GPUs")
    return out


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """One container's requests; a resource with only a limit requests its limit."""
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise MalformedSample(f"container {container.get('name')!r}: resources is not an object")
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    out = {str(k): parse_quantity(v) for k, v in limits.items()}
    out.update({str(k): parse_quantity(v) for k, v in requests.items()})
    return out


def _add(total: dict[str, Decimal], more: Mapping[str, Decimal]) -> dict[str, Decimal]:
    out = dict(total)
    for name, amount in more.items():
        out[name] = out.get(name, Decimal(0)) + amount
    return out


def _maximum(left: Mapping[str, Decimal], right: Mapping[str, Decimal]) -> dict[str, Decimal]:
    return {k: max(left.get(k, Decimal(0)), right.get(k, Decimal(0))) for k in {*left, *right}}


def effective_requests(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """The pod's effective request of every resource its containers name (scheduler's rule)."""
    containers: Iterable[Mapping[str, Any]] = spec.get("containers") or []
    init_containers: Iterable[Mapping[str, Any]] = spec.get("initContainers") or []
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for init in init_containers:
        own = _container_requests(init)
        if init.get("restartPolicy") == "Always":
            # A sidecar keeps running beside every later init container and the app containers.
            sidecars = _add(sidecars, own)
            init_peak = _maximum(init_peak, sidecars)
        else:
            init_peak = _maximum(init_peak, _add(sidecars, own))
    app: dict[str, Decimal] = dict(sidecars)
    for container in containers:
        app = _add(app, _container_requests(container))
    return _maximum(app, init_peak)
