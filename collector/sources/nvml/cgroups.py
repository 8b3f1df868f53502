"""Map a host PID to the Slurm job or Kubernetes pod that owns it, from `/proc/<pid>/cgroup`.

What is detectable (the cgroup path is the only thing trusted; `environ` only refines it):

* Slurm, cgroup v1 (`…:/slurm[_<node>]/uid_<u>/job_<id>/step_<s>/task_<t>`, any controller line)
  and v2 (`0::/system.slice/[<node>_]slurmstepd.scope/job_<id>/step_<s>/user/task_<t>`). The
  stepd's own `…/slurmstepd.scope/system` is no job. A job-shaped component counts only below a
  component that names Slurm, so an unrelated `job_5` cgroup is not taken for a job.
* Array tasks: the cgroup carries the raw job id (JobIDRaw). When `/proc/<pid>/environ` is
  readable (the agent runs as root) and its SLURM_JOB_ID equals that raw id, SLURM_ARRAY_JOB_ID
  and SLURM_ARRAY_TASK_ID give the warehouse's `<array>_<task>` id; otherwise the raw id is used.
  An environment is its process's to set, so the id is decided per raw id, not per process:
  every process of one raw id gets the one array id its processes claim, this tick or earlier
  while the agent runs (one whose environment was cleared, e.g. `apptainer --cleanenv`, gets
  it too; a task none of whose processes was ever seen with its environment keeps its raw id),
  the raw id where they claim several;
  and an array job's id is never above the raw id of its task (Slurm numbers the tasks from the
  array's own id up), so no process claims a later job's id.
* Kubernetes pods: `pod<uid>` in cgroupfs (`/kubepods/[burstable|besteffort/]pod<uid>/<cid>`) and
  systemd (`kubepods-[burstable-|besteffort-]pod<uid_with_underscores>.slice/
  {cri-containerd,crio,docker}-<cid>.scope`) forms; guaranteed pods have no QoS level. The job
  is `<namespace>/<pod>`, as the Kubernetes collector keys it, where the kubelet's pod log
  folders name the UID (pod_names.py); else the UID.
* Containers inside a Slurm job: Apptainer/Singularity processes stay in the job's cgroup (they
  are ordinary children of the step); rootless Podman without a delegated cgroup stays in the
  caller's cgroup, and with `--cgroups=split` nests below it (`…/job_<id>/…/libpod-<cid>.scope`);
  Docker started with `--cgroup-parent` inside the job's cgroup nests there too. All of these are
  found. A container that the Docker/Podman daemon places in its own scope (`/docker/<cid>`,
  `/system.slice/docker-<cid>.scope`, `/machine.slice/libpod-<cid>.scope`) carries no trace of
  the job in its cgroup: it is reported as `container_outside_job`, not guessed.
* Where several owners are nested, the outermost Slurm job wins, else the outermost pod: a
  Slurm job run inside a pod (slurmd in a pod, e.g. Slinky) is the job, but nothing below a
  job's cgroup (which its user may create, e.g. rootless Podman's `--cgroups=split`) and no pod
  below a pod names another owner: a cgroup named `…/job_100/…/slurm/job_999` is job 100's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Literal

from collector.sources.nvml.pod_names import PodNames

__all__ = [
    "Owner",
    "OwnerLookup",
    "lookup_owner",
    "parse_cgroup",
    "resolve_owners",
]

MAX_PROC_FILE_BYTES: Final = 1 << 20  # /proc/<pid>/environ can be large; cgroup never is

_JOB: Final = re.compile(r"^job_(\d+)$")
_STEP: Final = re.compile(r"^step_([A-Za-z0-9_.-]+)$")
# Pod UIDs are RFC 4122 UUIDs (systemd writes `_` for `-`); static pods use 32 hex digits.
_POD: Final = re.compile(
    r"(?:^|[-_])pod([0-9a-f]{8}([-_]?)[0-9a-f]{4}\2[0-9a-f]{4}\2[0-9a-f]{4}\2[0-9a-f]{12})"
    r"(?:\.slice)?$"
)
_CONTAINER: Final = re.compile(
    r"^(?:(cri-containerd|crio|docker|libpod)-)?([0-9a-f]{64})(?:\.scope)?$"
)

Kind = Literal["slurm", "k8s"]


@dataclass(frozen=True, slots=True)
class Owner:
    """Who owns a process: a Slurm job or a Kubernetes pod.

    `job_id` is the id the lake keys jobs by (`1234`, `1400_7` for an array task,
    `<namespace>/<pod>` for a pod, or its UID where nothing on the node names it);
    `raw_id` is what the cgroup says (JobIDRaw or pod UID). `container` names the runtime and
    the first 12 hex digits of a container id seen on the way (e.g. `docker:3f2a…`), if any.
    """

    kind: Kind
    job_id: str
    raw_id: str
    step: str | None = None
    container: str | None = None


@dataclass(frozen=True, slots=True)
class OwnerLookup:
    """The owner of one PID, or why there is none (`reason` is a count key)."""

    pid: int
    owner: Owner | None
    reason: str | None = None


def _container_in(components: list[str]) -> str | None:
    for part in reversed(components):
        match = _CONTAINER.match(part)
        if match:
            runtime = match.group(1) or "container"
            return f"{runtime}:{match.group(2)[:12]}"
    return None


def _owner_in_path(path: str) -> tuple[int, Owner] | None:
    """The owner named by one cgroup path, with its depth (component index): the outermost
    Slurm job, else the outermost pod (what lies below a job's cgroup is its user's to name)."""
    parts = [p for p in path.split("/") if p]
    found: tuple[int, Owner] | None = None
    slurm_seen = False
    for depth, part in enumerate(parts):
        if "slurm" in part:
            slurm_seen = True
        job = _JOB.match(part)
        if job and slurm_seen:
            step = next((m.group(1) for p in parts[depth + 1 :] if (m := _STEP.match(p))), None)
            below = parts[depth + 1 :]
            return depth, Owner("slurm", job.group(1), job.group(1), step, _container_in(below))
        pod = _POD.search(part)
        if pod and found is None:
            uid = pod.group(1).replace("_", "-")
            found = (depth, Owner("k8s", uid, uid, None, _container_in(parts[depth + 1 :])))
            slurm_seen = False  # a Slurm inside the pod must name itself below it
    return found


def _is_container_scope(path: str) -> bool:
    parts = [p for p in path.split("/") if p]
    return any(p in ("docker", "libpod_parent") or p.startswith("libpod") for p in parts) or (
        _container_in(parts) is not None
    )


def parse_cgroup(text: str) -> tuple[Owner | None, str | None]:
    """The owner named by the text of a `/proc/<pid>/cgroup` file, or (None, reason).

    Lines are `hierarchy-id:controllers:path`. Each line is read; where they disagree (hybrid
    v1/v2 hosts) the unified `0::` line wins, then the deepest match. Reasons:
    `container_outside_job` (a daemon-managed container scope), `no_job_cgroup`.
    """
    best: tuple[int, int, Owner] | None = None  # (unified?, depth, owner)
    container = False
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        hierarchy, controllers, path = fields
        unified = 1 if hierarchy == "0" and controllers == "" else 0
        found = _owner_in_path(path)
        if found is None:
            container = container or _is_container_scope(path)
            continue
        depth, owner = found
        if best is None or (unified, depth) > best[:2]:
            best = (unified, depth, owner)
    if best is not None:
        return best[2], None
    return None, "container_outside_job" if container else "no_job_cgroup"


def _read_proc(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(MAX_PROC_FILE_BYTES)


def _environ(proc_root: Path, pid: int) -> dict[str, str] | None:
    try:
        raw = _read_proc(proc_root / str(pid) / "environ")
    except OSError:  # gone, or not ours to read (the agent is not root)
        return None
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def _array_id(owner: Owner, environ: dict[str, str] | None) -> Owner:
    """`<array>_<task>` for an array task, when the process's environment agrees with its cgroup."""
    if environ is None or environ.get("SLURM_JOB_ID") != owner.raw_id:
        return owner
    array, task = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    if array and task and array.isdigit() and task.isdigit() and int(array) <= int(owner.raw_id):
        return Owner(owner.kind, f"{array}_{task}", owner.raw_id, owner.step, owner.container)
    return owner


def _pod_named(owner: Owner, pods: PodNames | None) -> Owner:
    """A pod's owner keyed by `<namespace>/<pod>` where `pods` names its UID."""
    name = pods.name(owner.raw_id) if pods is not None else None
    if name is None:
        return owner
    return Owner(owner.kind, name, owner.raw_id, owner.step, owner.container)


def lookup_owner(pid: int, proc_root: Path, pods: PodNames | None = None) -> OwnerLookup:
    """The owner of `pid` from `<proc_root>/<pid>/cgroup` (and `environ` for array tasks; a
    pod's name from `pods`).

    A process that exited between being listed and being read gives reason `process_gone`; a
    cgroup file that cannot be read for another reason gives `cgroup_unreadable`.
    """
    try:
        text = _read_proc(proc_root / str(pid) / "cgroup").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return OwnerLookup(pid, None, "process_gone")
    except OSError:
        return OwnerLookup(pid, None, "cgroup_unreadable")
    owner, reason = parse_cgroup(text)
    if owner is None:
        return OwnerLookup(pid, None, reason)
    if owner.kind == "slurm":
        owner = _array_id(owner, _environ(proc_root, pid))
    else:
        owner = _pod_named(owner, pods)
    return OwnerLookup(pid, owner)


def resolve_owners(
    pids: Iterable[int],
    proc_root: Path,
    pods: PodNames | None = None,
    arrays: dict[str, str] | None = None,
) -> dict[int, OwnerLookup]:
    """The owner (or reason for none) of each distinct PID, in first-seen order; the processes
    of one Slurm job (raw id) all get the one array id they claim, else the one `arrays` (raw
    id → array id, kept by the caller across calls, updated here) holds from an earlier call,
    else the raw id: a task whose only GPU process runs with a cleared environment keeps the
    id another of its processes gave."""
    found = {pid: lookup_owner(pid, proc_root, pods) for pid in dict.fromkeys(pids)}
    known = arrays if arrays is not None else {}
    claims: dict[str, set[str]] = {}
    for lookup in found.values():
        owner = lookup.owner
        if owner is not None and owner.kind == "slurm" and owner.job_id != owner.raw_id:
            claims.setdefault(owner.raw_id, set()).add(owner.job_id)
    for raw, claimed in claims.items():
        if len(claimed) == 1:
            known[raw] = next(iter(claimed))
    for pid, lookup in found.items():
        owner = lookup.owner
        if owner is None or owner.kind != "slurm":
            continue
        several = len(claims.get(owner.raw_id, ())) > 1
        job_id = owner.raw_id if several else known.get(owner.raw_id, owner.raw_id)
        if job_id != owner.job_id:
            found[pid] = OwnerLookup(pid, replace(owner, job_id=job_id))
    return found
