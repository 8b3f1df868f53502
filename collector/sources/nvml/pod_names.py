"""A Kubernetes pod's `<namespace>/<pod>` from its UID, on the node the agent runs on.

A process's cgroup names its pod by UID only, while the lake keys a pod's job by
`<namespace>/<pod>` (the Kubernetes collector's job_id, and dcgm-exporter's pod labels): keyed
by UID, the agent's GPU time never met the pod's job, user or account. The kubelet keeps one
log folder per pod on its node, `/var/log/pods/<namespace>_<pod>_<uid>/` (the layout every CRI
runtime writes); neither a namespace (a DNS label) nor a pod name (a DNS subdomain) can hold
`_`, so the folder's name splits one way only.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

__all__ = ["DEFAULT_POD_LOGS", "PodNames"]

DEFAULT_POD_LOGS: Final = Path("/var/log/pods")

_FOLDER: Final = re.compile(
    r"^([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)_([a-z0-9](?:[-a-z0-9.]*[a-z0-9])?)_"
    r"([0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12})$"
)


class PodNames:
    """Pod UID → `<namespace>/<pod>` from the kubelet's pod log folders under `root`.

    The folder is listed again when a UID is not known yet (a pod started since), at most
    once per `refresh` call of the caller's tick; a missing or unreadable folder names none.
    """

    def __init__(self, root: Path | None = DEFAULT_POD_LOGS) -> None:
        self.root = root
        self._names: dict[str, str] = {}
        self._listed = False

    def refresh(self) -> None:
        """Allow one new listing (the agent calls it once a tick)."""
        self._listed = False

    def name(self, uid: str) -> str | None:
        """`<namespace>/<pod>` of the pod with this UID, or None when no folder names it."""
        if uid not in self._names and not self._listed:
            self._list()
        return self._names.get(uid)

    def _list(self) -> None:
        self._listed = True
        if self.root is None:
            return
        try:
            entries = os.listdir(self.root)
        except OSError:  # no such folder (not a Kubernetes node), or not ours to read
            return
        for entry in entries:
            match = _FOLDER.match(entry)
            if match:
                namespace, pod, uid = match.groups()
                self._names[uid] = f"{namespace}/{pod}"
