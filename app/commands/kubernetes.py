"""`gpuledger collect kubernetes --cluster C`: land GPU pods as jobs, and Kueue/Volcano queues."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.errors import reports_errors
from app.options import ClusterName, Finite, lake_option

if TYPE_CHECKING:
    from warehouse.lake import Lake

__all__ = ["command"]

MAX_REASONS_SHOWN = 3


def _when(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_namespace_accounts(pairs: tuple[str, ...]) -> dict[str, str]:
    """`NS=ACCOUNT` pairs as a mapping; click.BadParameter names a bad one."""
    from collector.names import valid_name

    out: dict[str, str] = {}
    for pair in pairs:
        namespace, sep, account = (p.strip() for p in pair.partition("="))
        if not sep or not valid_name(namespace) or not valid_name(account):
            raise click.BadParameter(
                f"{pair!r}: expected NS=ACCOUNT, each one plain name (e.g. ml-team=physics)",
                param_hint="--namespace-account",
            )
        out[namespace] = account
    return out


@click.command(name="kubernetes")
@click.option(
    "--cluster", type=ClusterName(), required=True, help="Cluster name to land the rows under."
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Kubeconfig file [default: the pod's service account when run in a pod, else "
    "$KUBECONFIG, else ~/.kube/config].",
)
@click.option("--context", default=None, help="Kubeconfig context [default: its current one].")
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    metavar="NS",
    help="Collect pods (and LocalQueues, Workloads, PodGroups) of this namespace only; "
    "repeat for several [default: all namespaces].",
)
@click.option(
    "--user-label",
    "user_keys",
    multiple=True,
    metavar="KEY",
    help="Pod label or annotation naming the user; repeat to try several in order "
    "[default: gpuledger.io/user, else the pod's service account].",
)
@click.option(
    "--account-label",
    "account_keys",
    multiple=True,
    metavar="KEY",
    help="Pod label or annotation naming the account; repeat to try several in order "
    "[default: gpuledger.io/account, else the namespace].",
)
@click.option(
    "--namespace-account",
    "namespace_accounts",
    multiple=True,
    metavar="NS=ACCOUNT",
    help="Pods of namespace NS belong to ACCOUNT, whatever their labels say (pod labels are "
    "written by the pod's creator); repeat for several.",
)
@lake_option
@click.option(
    "--timeout",
    type=Finite(1, 3600),
    default=60,
    show_default=True,
    help="Seconds to wait for each API call.",
)
@reports_errors
def command(
    cluster: str,
    kubeconfig: Path | None,
    context: str | None,
    namespaces: tuple[str, ...],
    user_keys: tuple[str, ...],
    account_keys: tuple[str, ...],
    namespace_accounts: tuple[str, ...],
    lake: Lake,
    timeout: float,
) -> None:
    """Collect GPU pods as jobs, and Kueue/Volcano queue quotas, into the lake.

    \b
    Each pod that requests GPUs (nvidia.com/gpu, MIG nvidia.com/mig-*, init containers
    included) becomes a job <namespace>/<pod>, as dcgm-exporter's pod labels name it. Its
    partition is its Kueue ClusterQueue or Volcano queue, its submit time its Kueue
    Workload's creation. Kueue ClusterQueues/LocalQueues and Volcano Queues land in the
    `queues` table (GPU quota, borrowing limit, weight) for fairness reports. A pod or queue
    lands as a new version only when it changed, so running this every few minutes (a
    CronJob, a systemd timer) lands each change once. GPU indices are not in the API: only
    pods holding every GPU of their node get job_gpus rows (whole-node); the others are
    attributed from dcgm-exporter's pod labels. Needs get/list on pods and nodes, and on
    Kueue/Volcano objects where installed. State lives in <lake>/_state/kubernetes.sqlite.

    \b
    User and account labels are written by whoever creates the pod: a value that is not one
    plain name (letters, digits, . _ -; no spaces, commas, newlines or @) is dropped and
    counted, and --namespace-account pins a namespace's account whatever its pods claim.
    """
    from collector.sources.kubernetes.api import connect_kubernetes
    from collector.sources.kubernetes.collect import collect_kubernetes
    from collector.sources.kubernetes.pods import AttributionKeys

    defaults = AttributionKeys()
    keys = AttributionKeys(
        user=user_keys or defaults.user,
        account=account_keys or defaults.account,
        namespace_accounts=parse_namespace_accounts(namespace_accounts),
    )
    api = connect_kubernetes(kubeconfig, context, timeout_s=timeout)
    result = collect_kubernetes(lake, cluster, api, namespaces=namespaces, keys=keys)
    found = ", ".join(result.integrations) or "no Kueue or Volcano"
    click.echo(
        f"Kubernetes cluster {cluster!r} at {_when(result.collected_at)} ({found}): "
        f"{result.pods_seen} pod(s) seen, {result.gpu_pods} with GPUs; jobs landed: "
        f"{result.jobs_landed} ({result.jobs_new} new, {result.jobs_updated} updated, "
        f"{result.jobs_gone} gone); queues landed: {result.queues_landed} "
        f"(+{result.queues_deleted} deleted); whole-node GPU rows: {result.gpu_rows_opened} "
        f"opened, {result.gpu_rows_closed} closed; "
        + (
            f"{result.owners_rejected} pod(s) with an invalid user/account label dropped it; "
            if result.owners_rejected
            else ""
        )
        + f"{len(result.malformed)} malformed object(s) "
        "skipped"
        + (
            ": "
            + "; ".join(result.malformed[:MAX_REASONS_SHOWN])
            + (" …" if len(result.malformed) > MAX_REASONS_SHOWN else "")
            if result.malformed
            else "."
        )
    )
