"""Run the configured action on an idle job, on its own cluster only, after re-reading it.

An action is taken only on a cluster that `alerts.action_clusters` maps to a scheduler endpoint
(the Slurm cluster name for `scancel --clusters=`, or the kubeconfig context), on a job id of
the scheduler's own format (passed after `--`), and only after the scheduler has been asked
again about that one job and said it is the same job, still running:

* Slurm: `squeue --clusters=<endpoint> --jobs=<id>` must show the lake's user and submit time
  (a requeued job is submitted anew, a reused id is another job) in state RUNNING; then
  `scancel --clusters=<endpoint> --user=<user> --state=RUNNING -- <id>`, whose filters keep
  even a job that changed in between from being cancelled.
* Kubernetes: the pod must have the lake's UID (a pod re-created under the same name is
  another job) and be Running. A controller re-creates a deleted pod, so the action goes to
  its owner: a Kueue Workload owned by the pod or its controller is set inactive, else a
  batch Job is suspended; only a bare pod (no owner) is deleted; any other owner is left alone.

Every command is an argument list, never a shell string. The ledger's audit record is written
before the command runs and completed after, so an action is attempted at most once per job.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from app.alerts.findings import FindingContext
from app.alerts.settings import AlertsConfig

if TYPE_CHECKING:
    from collector.sources.kubernetes.api import KubernetesApi

__all__ = [
    "ActionRunner",
    "KubeApiFactory",
    "SubprocessRunner",
    "confirm",
    "job_id_problem",
    "job_suspend_argv",
    "planned_argv",
    "pod_delete_argv",
    "scancel_argv",
    "squeue_argv",
    "workload_deactivate_argv",
]

ACTION_TIMEOUT_S = 60
# Slurm: a job id, an array task `123_4` or a heterogeneous job's component `123+1`
SLURM_JOB_ID = re.compile(r"[0-9]+(?:_[0-9]+|\+[0-9]+)?")
# Kubernetes: a namespace is an RFC 1123 label, a pod or owner name an RFC 1123 subdomain
_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
K8S_NAMESPACE = re.compile(_LABEL)
K8S_NAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*")
KUEUE = ("kueue.x-k8s.io", "v1beta1", "workloads")
SQUEUE_FORMAT = "%i|%u|%T|%V"  # job id, user, state, submit time (epoch: SLURM_TIME_FORMAT=%s)


class ActionRunner(Protocol):
    """Runs one command (with `env` added to the environment); returns its status and output."""

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None
    ) -> tuple[int, str]: ...


class SubprocessRunner:
    """The real runner: `subprocess.run(argv)` with a timeout, never through a shell."""

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None
    ) -> tuple[int, str]:
        try:
            done = subprocess.run(
                list(argv),
                capture_output=True,
                text=True,
                timeout=ACTION_TIMEOUT_S,
                check=False,
                env={**os.environ, **env} if env else None,
            )
        except FileNotFoundError:
            return 127, f"{argv[0]}: command not found"
        except subprocess.TimeoutExpired:
            return 124, f"{argv[0]}: timed out after {ACTION_TIMEOUT_S} s"
        return done.returncode, (done.stdout + done.stderr).strip()


# the Kubernetes API of one kubeconfig context
KubeApiFactory = Callable[[str], "KubernetesApi"]


def job_id_problem(action: str, job_id: str | None) -> str | None:
    """Why `job_id` is no job id the action may name (None when it is one)."""
    if not job_id:
        return "the finding names no job"
    if action == "scancel":
        if SLURM_JOB_ID.fullmatch(job_id):
            return None
        return f"{job_id!r} is no Slurm job id (digits, optionally _N or +N)"
    namespace, sep, pod = job_id.partition("/")
    if sep and K8S_NAMESPACE.fullmatch(namespace) and K8S_NAME.fullmatch(pod):
        return None
    return f"{job_id!r} is no Kubernetes `<namespace>/<pod>` (RFC 1123 names)"


# ---- the commands


def scancel_argv(cfg: AlertsConfig, endpoint: str, job_id: str, user: str) -> tuple[str, ...]:
    """Cancel job `job_id` of `user` on Slurm cluster `endpoint`, only while it runs."""
    return (
        cfg.scancel_command,
        f"--clusters={endpoint}",
        f"--user={user}",
        "--state=RUNNING",
        "--",
        job_id,
    )


def squeue_argv(cfg: AlertsConfig, endpoint: str, job_id: str) -> tuple[str, ...]:
    """Re-read one job on one Slurm cluster (run with SLURM_TIME_FORMAT=%s)."""
    return (
        cfg.squeue_command,
        f"--clusters={endpoint}",
        f"--jobs={job_id}",
        "--states=all",
        "--noheader",
        f"--format={SQUEUE_FORMAT}",
    )


def _kubectl(cfg: AlertsConfig, context: str, namespace: str) -> tuple[str, ...]:
    return (cfg.kubectl_command, f"--context={context}", f"--namespace={namespace}")


def pod_delete_argv(cfg: AlertsConfig, context: str, namespace: str, pod: str) -> tuple[str, ...]:
    """Delete a bare pod (one no controller would re-create)."""
    return (*_kubectl(cfg, context, namespace), "delete", "pod", "--wait=false", "--", pod)


def job_suspend_argv(cfg: AlertsConfig, context: str, namespace: str, job: str) -> tuple[str, ...]:
    """Suspend a batch Job: its pods end and are not re-created until it is resumed."""
    patch = json.dumps({"spec": {"suspend": True}}, separators=(",", ":"))
    return (*_kubectl(cfg, context, namespace), "patch", "job", "--type=merge",
            f"--patch={patch}", "--", job)  # fmt: skip


def workload_deactivate_argv(
    cfg: AlertsConfig, context: str, namespace: str, workload: str
) -> tuple[str, ...]:
    """Set a Kueue Workload inactive: Kueue evicts it and does not admit it again."""
    patch = json.dumps({"spec": {"active": False}}, separators=(",", ":"))
    return (*_kubectl(cfg, context, namespace), "patch", "workloads.kueue.x-k8s.io",
            "--type=merge", f"--patch={patch}", "--", workload)  # fmt: skip


def planned_argv(f: FindingContext, cfg: AlertsConfig, endpoint: str) -> tuple[str, ...]:
    """What the plan expects to run: scancel, or (Kubernetes) the bare-pod delete that the
    re-read replaces with its owner's suspension when the pod has an owner."""
    job_id = f.job_id or ""
    if cfg.action == "scancel":
        return scancel_argv(cfg, endpoint, job_id, f.user or "")
    namespace, _, pod = job_id.partition("/")
    return pod_delete_argv(cfg, endpoint, namespace, pod)


# ---- the re-read


def confirm(
    f: FindingContext,
    endpoint: str,
    cfg: AlertsConfig,
    run: ActionRunner,
    kube_api: KubeApiFactory,
) -> tuple[tuple[str, ...] | None, str]:
    """Ask the scheduler again about the finding's job: (the command to run, why) when it is
    the same job and still running, else (None, why not)."""
    problem = job_id_problem(cfg.action, f.job_id)
    if problem is not None or f.job_id is None:
        return None, problem or "no job"
    if cfg.action == "scancel":
        return _confirm_slurm(f, f.job_id, endpoint, cfg, run)
    return _confirm_pod(f, f.job_id, endpoint, cfg, kube_api)


def _confirm_slurm(
    f: FindingContext, job_id: str, endpoint: str, cfg: AlertsConfig, run: ActionRunner
) -> tuple[tuple[str, ...] | None, str]:
    where = f"job {job_id} on Slurm cluster {endpoint}"
    if not f.user:
        return None, f"the lake names no user of {where}"
    if f.job_submit_ts is None:
        return None, f"the lake has no submit time of {where}"
    code, out = run(squeue_argv(cfg, endpoint, job_id), env={"SLURM_TIME_FORMAT": "%s"})
    if code != 0:
        return None, f"squeue could not read {where} (exit {code}): {out[-300:]}"
    rows = [line.strip().split("|") for line in out.splitlines() if line.count("|") == 3]
    row = next((r for r in rows if r[0] == job_id), None)
    if row is None:
        return None, f"squeue does not know {where} any more"
    _, user, state, submit = row
    if user != f.user:
        return None, f"{where} belongs to {user}, not {f.user}: another job"
    try:
        submitted = dt.datetime.fromtimestamp(int(submit), dt.UTC)
    except ValueError:
        return None, f"squeue gave no readable submit time of {where}: {submit!r}"
    if abs((submitted - f.job_submit_ts).total_seconds()) >= 1:
        return None, (
            f"{where} was submitted {submitted:%Y-%m-%d %H:%M:%S} UTC, the idle job "
            f"{f.job_submit_ts:%Y-%m-%d %H:%M:%S} UTC: another job (requeued or a reused id)"
        )
    if state != "RUNNING":
        return None, f"{where} is {state}, no longer running"
    return scancel_argv(cfg, endpoint, job_id, f.user), f"{where}: same job, still running"


def _owner(meta: Mapping[str, Any]) -> Mapping[str, Any] | None:
    owners = [o for o in meta.get("ownerReferences") or [] if isinstance(o, Mapping)]
    return next((o for o in owners if o.get("controller")), owners[0] if owners else None)


def _confirm_pod(
    f: FindingContext, job_id: str, context: str, cfg: AlertsConfig, kube_api: KubeApiFactory
) -> tuple[tuple[str, ...] | None, str]:
    from collector.errors import CollectorError, MalformedSample
    from collector.sources.kubernetes.pods import top_owner

    namespace, _, name = job_id.partition("/")
    where = f"pod {job_id} in context {context}"
    if not f.job_id_raw:
        return None, f"the lake has no UID of {where}"
    try:
        api = kube_api(context)
        pod = next(
            (p for p in api.list_pods(namespace) if (p.get("metadata") or {}).get("name") == name),
            None,
        )
        if pod is None:
            return None, f"the API server does not know {where} any more"
        meta = pod.get("metadata") or {}
        if meta.get("uid") != f.job_id_raw:
            return (
                None,
                f"{where} has UID {meta.get('uid')}, the idle job {f.job_id_raw}: another pod",
            )
        phase = (pod.get("status") or {}).get("phase")
        if meta.get("deletionTimestamp"):
            return None, f"{where} is being deleted already"
        if phase != "Running":
            return None, f"{where} is {phase}, no longer running"
        owner = _owner(meta)
        uids = {f.job_id_raw} | ({str(owner.get("uid"))} if owner is not None else set())
        # the workload the pod belongs to, as the collector links it (a JobSet's pod is its
        # child Job's): named by the pod's labels, which its creator sets, so never trusted to
        # pick a Workload (another team's JobSet in the namespace), only to refuse
        top = top_owner(meta, name)
        workloads = api.list_custom(*KUEUE, namespace=namespace) or []
    except CollectorError as exc:  # KubernetesApiError, ConfigError (kubeconfig, context)
        return None, f"could not re-read {where}: {exc}"
    except MalformedSample as exc:
        return None, f"could not read the owner of {where}: {exc}"
    direct = (str(owner.get("kind", "")), str(owner.get("name", ""))) if owner else None
    by_uid = [w for w in workloads if any(str(o.get("uid")) in uids for o in _owners(_meta(w)))]
    if len(by_uid) > 1:
        names = ", ".join(sorted(str(_meta(w).get("name")) for w in by_uid))
        return None, f"{where} has several Kueue Workloads ({names}): not one to set inactive"
    if by_uid:
        w_name = str(_meta(by_uid[0]).get("name", ""))
        if not K8S_NAME.fullmatch(w_name):
            return None, f"the Kueue Workload of {where} has no valid name: {w_name!r}"
        return (
            workload_deactivate_argv(cfg, context, namespace, w_name),
            f"{where}: same pod, running; its Kueue Workload {w_name} is set inactive",
        )
    if owner is None:
        return pod_delete_argv(cfg, context, namespace, name), f"{where}: a bare pod, running"
    kind, owner_name = str(owner.get("kind", "")), str(owner.get("name", ""))
    if top is not None and top != direct:
        # a Job a JobSet (or another controller) runs: it would resume the Job suspended, and
        # the action said done while the pod's quota stayed held; its Workload is the
        # JobSet's, whose UID the pod does not carry
        return None, (
            f"{where} belongs to {top[0]} {top[1]} through {kind} {owner_name}: suspending "
            f"the {kind} would be undone by the {top[0]}, and its Kueue Workload cannot be "
            "told from the pod alone"
        )
    if kind == "Job" and str(owner.get("apiVersion", "")).startswith("batch/"):
        if not K8S_NAME.fullmatch(owner_name):
            return None, f"the Job of {where} has no valid name: {owner_name!r}"
        return (
            job_suspend_argv(cfg, context, namespace, owner_name),
            f"{where}: same pod, running; its Job {owner_name} is suspended",
        )
    return None, (
        f"{where} is owned by {kind} {owner_name}, which would re-create a deleted pod; "
        "only a Job or a Kueue Workload is suspended"
    )


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _owners(meta: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [o for o in meta.get("ownerReferences") or [] if isinstance(o, Mapping)]
