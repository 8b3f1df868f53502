"""The Kueue objects the recommenders write (kueue.x-k8s.io/v1beta1): names, flavor, queues.

Kueue admits no workload whose pods request a resource that its ClusterQueue's
`resourceGroups[].coveredResources` does not list, and nearly every pod requests cpu and
memory: so every ClusterQueue written here covers cpu and memory next to its GPU resources,
with quotas large enough not to constrain (the recommendation is about GPUs), and says in a
comment how to make them real limits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

__all__ = ["CPU_QUOTA", "FLAVOR", "FLAVOR_YAML", "MEMORY_QUOTA", "cluster_queue", "kube_name"]

FLAVOR = "default-flavor"
FLAVOR_YAML = (
    f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata:\n  name: {FLAVOR}\n"
)
# quotas that do not constrain: far above any cluster's allocatable cpu and memory
CPU_QUOTA = 1_000_000  # cores
MEMORY_QUOTA = "1Pi"

QUOTA_NOTE = (
    "# cpu and memory are covered so that pods requesting them (nearly all) are admitted;\n"
    f"# their quotas ({CPU_QUOTA} cores, {MEMORY_QUOTA}) do not constrain. To limit them too, set\n"
    "# them to the nodes' allocatable total, as listed by\n"
    "#   kubectl get nodes -o custom-columns="
    "CPU:.status.allocatable.cpu,MEMORY:.status.allocatable.memory\n"
    "# A pod requesting any other resource (ephemeral-storage, hugepages-*) needs it covered\n"
    "# too, or excluded with the Kueue Configuration's resources.excludeResourcePrefixes.\n"
)


def kube_name(text: str) -> str:
    """`text` as a Kubernetes object name (RFC 1123 label: lower-case alphanumerics and '-'),
    quoted for YAML (a bare `null`, `true` or `0` would not be read as a name)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return json.dumps(name[:63].rstrip("-") or "x")


def cluster_queue(
    name: str,
    gpus: Sequence[tuple[str, int]],
    cohort: str | None = None,
    gpu_borrowing_limit: int | None = None,
) -> str:
    """A ResourceFlavor and a ClusterQueue `name` (a kube_name()) with `gpus` quotas
    ((resource, nominalQuota) pairs) plus cpu and memory that do not constrain; in `cohort`
    when given, the GPU resources then borrowing at most `gpu_borrowing_limit`."""
    covered = ["cpu", "memory", *(resource for resource, _ in gpus)]
    quotas = [f"        nominalQuota: {CPU_QUOTA}", f'        nominalQuota: "{MEMORY_QUOTA}"']
    for _, quota in gpus:
        lines = f"        nominalQuota: {quota}"
        if cohort is not None and gpu_borrowing_limit is not None:
            lines += f"\n        borrowingLimit: {gpu_borrowing_limit}"
        quotas.append(lines)
    resources = "".join(
        f'      - name: "{resource}"\n{quota}\n'
        for resource, quota in zip(covered, quotas, strict=True)
    )
    return (
        QUOTA_NOTE + FLAVOR_YAML + "---\n"
        "apiVersion: kueue.x-k8s.io/v1beta1\n"
        "kind: ClusterQueue\n"
        "metadata:\n"
        f"  name: {name}\n"
        "spec:\n"
        + (f"  cohort: {cohort}\n" if cohort is not None else "")
        + "  namespaceSelector: {}\n"
        "  resourceGroups:\n"
        "  - coveredResources: [" + ", ".join(f'"{r}"' for r in covered) + "]\n"
        "    flavors:\n"
        f"    - name: {FLAVOR}\n"
        "      resources:\n" + resources
    )
