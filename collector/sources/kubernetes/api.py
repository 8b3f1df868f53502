"""The seam between the Kubernetes collector and an API server: a small protocol, and its client.

`KubernetesApi` is what `collect_kubernetes` asks: every pod, every node and every object of a
custom resource, as plain dicts shaped exactly like the API's JSON (camelCase keys, RFC 3339
times). Tests pass a fake that returns recorded responses; `connect_kubernetes` builds the real
one over the official `kubernetes` client (the `k8s` extra), imported only when it is called, so
importing the collector never needs it.

The real transport reads the raw JSON of each list (`_preload_content=False`) instead of letting
the client build model objects and turning them back into dicts with
`ApiClient.sanitize_for_serialization`: the dicts are the same, but raw JSON is several times
faster on large pod lists and does not fail on values the generated models reject. Lists are
read in pages (`limit`/`continue`), so a cluster with 100k pods is never one response.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from collector.errors import CollectorError, ConfigError

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_TIMEOUT_S",
    "KubernetesApi",
    "KubernetesApiError",
    "connect_kubernetes",
]

DEFAULT_PAGE_SIZE = 500
DEFAULT_TIMEOUT_S = 60.0
# times a list whose continue token expired (410 Gone) is started over
LIST_RESTARTS = 2

logger = logging.getLogger(__name__)
Object = dict[str, Any]


class KubernetesApiError(CollectorError):
    """The API server could not be reached, refused the credentials or answered an error."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class KubernetesApi(Protocol):
    """What the collector needs from a Kubernetes API server; every method returns plain dicts.

    `namespace=None` lists across all namespaces. `list_custom` returns None when the server
    does not serve that group/version/plural (e.g. Kueue is not installed), so an optional
    integration is skipped rather than failing the run. Methods raise KubernetesApiError for
    anything else that goes wrong.
    """

    def list_pods(self, namespace: str | None = None) -> list[Object]: ...

    def list_nodes(self) -> list[Object]: ...

    def list_custom(
        self, group: str, version: str, plural: str, namespace: str | None = None
    ) -> list[Object] | None: ...


def connect_kubernetes(
    kubeconfig: Path | None = None,
    context: str | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> KubernetesApi:
    """Return the API of the cluster named by `kubeconfig`/`context` (the official client).

    With neither given, the service account of the pod this runs in is used when there is one
    (in-cluster), else the default kubeconfig (`$KUBECONFIG`, else `~/.kube/config`), as kubectl
    does. Raises ConfigError when the `kubernetes` package is missing or the kubeconfig cannot
    be used (missing file, unknown context).
    """
    try:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException
        from yaml import YAMLError
    except ImportError:
        raise ConfigError(
            "the Kubernetes collector needs the `kubernetes` package: pip install 'gpuledger[k8s]'"
        ) from None
    if kubeconfig is not None and not kubeconfig.is_file():
        raise ConfigError(f"kubeconfig {str(kubeconfig)!r} does not exist or is not a file")
    try:
        if kubeconfig is None and context is None:
            try:
                configuration = client.Configuration()
                config.load_incluster_config(client_configuration=configuration)
                api_client = client.ApiClient(configuration)
            except ConfigException:
                api_client = config.new_client_from_config()
        else:
            api_client = config.new_client_from_config(
                config_file=None if kubeconfig is None else str(kubeconfig), context=context
            )
    except (ConfigException, YAMLError, TypeError, AttributeError, KeyError, ValueError) as exc:
        # The client raises the last four on a kubeconfig that is YAML but not shaped like one
        # (`'str' object does not support item assignment`), and UnicodeDecodeError (a
        # ValueError) on one that is not text: each said as what it means, its words in brackets
        where = "the default kubeconfig" if kubeconfig is None else repr(str(kubeconfig))
        detail = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, UnicodeDecodeError):
            detail = f"not a valid kubeconfig: not UTF-8 text ({detail})"
        elif isinstance(exc, YAMLError):
            detail = f"not a valid kubeconfig: not YAML ({detail})"
        elif not isinstance(exc, ConfigException):
            detail = f"not a valid kubeconfig ({type(exc).__name__}: {detail})"
        raise ConfigError(f"cannot use {where}: {detail}") from None
    except OSError as exc:  # e.g. an unreadable certificate file named by the kubeconfig
        raise ConfigError(f"cannot use the kubeconfig: {exc}") from None
    return _ClientApi(api_client, timeout_s=timeout_s, page_size=page_size)


@dataclass
class _ClientApi:
    """`KubernetesApi` over the official client; `api_client` is a `kubernetes.client.ApiClient`."""

    api_client: Any
    timeout_s: float
    page_size: int

    @property
    def host(self) -> str:
        return str(getattr(self.api_client.configuration, "host", "?"))

    def list_pods(self, namespace: str | None = None) -> list[Object]:
        from kubernetes import client

        core = client.CoreV1Api(self.api_client)
        if namespace is None:
            return self._pages("pods", core.list_pod_for_all_namespaces)
        return self._pages(f"pods in {namespace!r}", core.list_namespaced_pod, namespace)

    def list_nodes(self) -> list[Object]:
        from kubernetes import client

        return self._pages("nodes", client.CoreV1Api(self.api_client).list_node)

    def list_custom(
        self, group: str, version: str, plural: str, namespace: str | None = None
    ) -> list[Object] | None:
        from kubernetes import client

        custom = client.CustomObjectsApi(self.api_client)
        what = f"{plural}.{group}/{version}"
        try:
            if namespace is None:
                return self._pages(what, custom.list_cluster_custom_object, group, version, plural)
            return self._pages(
                f"{what} in {namespace!r}",
                custom.list_namespaced_custom_object,
                group,
                version,
                namespace,
                plural,
            )
        except KubernetesApiError as exc:
            if exc.status == 404:  # the resource is not served: that integration is absent
                return None
            raise

    def _pages(self, what: str, call: Callable[..., Any], *args: str) -> list[Object]:
        """Every item of a list call, page by page; errors become KubernetesApiError.

        A continue token that expired (410 Gone: etcd compacted the list's snapshot while it
        was paged) starts the list over, as kubectl does, up to LIST_RESTARTS times; a server
        that sends a token it sent before is an error, not an endless list."""
        for restart in range(LIST_RESTARTS + 1):
            items: list[Object] = []
            token: str | None = None
            seen: set[str] = set()
            try:
                while True:
                    body = self._call(what, call, *args, token=token)
                    items.extend(body.get("items") or [])
                    token = (body.get("metadata") or {}).get("continue") or None
                    if token is None:
                        return items
                    if token in seen:
                        raise KubernetesApiError(
                            f"the Kubernetes API at {self.host} sent the same continue token "
                            f"twice listing {what}; the list was not read"
                        )
                    seen.add(token)
            except KubernetesApiError as exc:
                if exc.status != 410 or token is None or restart == LIST_RESTARTS:
                    raise
                logger.info("kubernetes: the list of %s expired while paged; listing again", what)
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(
        self, what: str, call: Callable[..., Any], *args: str, token: str | None
    ) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        kwargs: dict[str, Any] = {"limit": self.page_size, "_preload_content": False}
        if token is not None:
            kwargs["_continue"] = token
        kwargs["_request_timeout"] = (min(self.timeout_s, 10.0), self.timeout_s)
        try:
            response = call(*args, **kwargs)
            raw = response.data
        except ApiException as exc:
            if not exc.status:  # the client reports TLS failures as status 0
                reason = " ".join(str(exc.reason or exc).split())
                raise KubernetesApiError(
                    f"could not talk to the Kubernetes API at {self.host} to list {what}: {reason}"
                ) from None
            raise _api_error(what, self.host, exc.status, exc.reason, exc.body) from None
        except HTTPError as exc:
            raise KubernetesApiError(
                f"could not reach the Kubernetes API at {self.host} to list {what}: "
                f"{_root_cause(exc)}"
            ) from None
        except OSError as exc:
            raise KubernetesApiError(
                f"could not reach the Kubernetes API at {self.host} to list {what}: {exc}"
            ) from None
        try:
            body = json.loads(raw)
        except (TypeError, ValueError):
            raise KubernetesApiError(
                f"the Kubernetes API at {self.host} answered the list of {what} with something "
                f"that is not JSON: {bytes(raw or b'')[:80]!r}"
            ) from None
        if not isinstance(body, dict):
            raise KubernetesApiError(
                f"the Kubernetes API at {self.host} answered the list of {what} with a "
                f"{type(body).__name__}, not a list object"
            )
        return body


def _api_error(
    what: str, host: str, status: int | None, reason: str | None, body: Any
) -> KubernetesApiError:
    """One clear message for an HTTP error status, with the server's message when it sent one."""
    detail = reason or "error"
    if isinstance(body, bytes | str) and body:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and parsed.get("message"):
            detail = str(parsed["message"])
    hint = {
        401: "the credentials were refused (expired token or certificate?)",
        403: "the credentials may not list them (RBAC: grant get/list on this resource)",
        404: "the server does not serve them",
    }.get(status or 0)
    text = f"the Kubernetes API at {host} answered {status} to the list of {what}: {detail}"
    return KubernetesApiError(text + (f"; {hint}" if hint else ""), status)


def _root_cause(exc: BaseException) -> str:
    """The innermost reason of a urllib3 error (e.g. `[Errno 111] Connection refused`)."""
    reason: Any = exc
    for _ in range(8):
        inner = getattr(reason, "reason", None) or reason.__cause__ or reason.__context__
        if inner is None or inner is reason or not isinstance(inner, BaseException):
            break
        reason = inner
    text = str(reason)
    # urllib3 wraps the OS error as "<...Connection object at 0x…>: Failed to establish a new
    # connection: [Errno 111] Connection refused": keep what follows the object's repr.
    return text.split(">: ", 1)[-1] if ">: " in text else text
