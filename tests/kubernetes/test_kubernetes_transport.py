"""`connect_kubernetes`: the official client against a local server answering like kube-apiserver.

Nothing is patched: the client reads a kubeconfig pointing at `api_server` (see conftest.py)
and makes real HTTP requests, so paging, 404s, 401s and refused connections take the code
paths they take against a real cluster.
"""

from __future__ import annotations

import pytest

from collector.errors import ConfigError
from collector.sources.kubernetes.api import KubernetesApiError, connect_kubernetes

from .conftest import read_list, write_kubeconfig


def names(objects):
    return [o["metadata"]["name"] for o in objects]


def test_lists_are_read_page_by_page_as_raw_api_json(kubeconfig, api_server):
    api = connect_kubernetes(kubeconfig, page_size=5)

    pods = api.list_pods()

    assert pods == read_list("t1", "pods.json")["items"]  # the same dicts, key for key
    assert [path for path, _ in api_server.requests] == ["/api/v1/pods"] * 3  # 12 pods, 5 a page
    assert {auth for _, auth in api_server.requests} == {"Bearer test-token"}


def test_a_list_whose_continue_token_expired_is_listed_again(kubeconfig, api_server):
    """etcd compacts a paged list's snapshot after ~5 minutes: the run failed and landed
    nothing where kubectl starts the list over."""
    api = connect_kubernetes(kubeconfig, page_size=5)
    api_server.expire_pages = 1

    pods = api.list_pods()

    assert pods == read_list("t1", "pods.json")["items"]  # each pod once
    assert len(api_server.requests) == 2 + 3  # two pages, the 410, then the list again


def test_a_server_repeating_a_continue_token_is_an_error_not_an_endless_list(
    kubeconfig, api_server
):
    api = connect_kubernetes(kubeconfig, page_size=5)
    api_server.stuck_token = True

    with pytest.raises(KubernetesApiError, match="sent the same continue token twice"):
        api.list_pods()
    assert len(api_server.requests) == 2  # the second page sent the first page's token


def test_namespaced_and_custom_lists(kubeconfig, api_server):
    api = connect_kubernetes(kubeconfig)

    assert names(api.list_pods("team-v")) == [
        "bert-pretrain-master-0",
        "bert-pretrain-worker-0",
        "sweep-lr-0",
    ]
    assert len(api.list_nodes()) == 4
    assert names(api.list_custom("kueue.x-k8s.io", "v1beta1", "workloads", "team-c")) == [
        "pod-gated-eval-6f0b2"
    ]
    assert len(api.list_custom("scheduling.volcano.sh", "v1beta1", "queues")) == 3
    assert (
        "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-c/workloads",
        "Bearer test-token",
    ) in api_server.requests


def test_a_resource_the_server_does_not_serve_is_none(kubeconfig, api_server):
    api = connect_kubernetes(kubeconfig)
    assert api.list_custom("kueue.x-k8s.io", "v1beta2", "clusterqueues") is None
    api_server.served = ()
    assert api.list_custom("scheduling.volcano.sh", "v1beta1", "podgroups", "team-v") is None


def test_refused_credentials_are_one_clear_error(kubeconfig, api_server):
    api = connect_kubernetes(kubeconfig)
    api_server.status = (401, "Unauthorized", "Unauthorized")

    with pytest.raises(KubernetesApiError) as raised:
        api.list_pods()

    assert raised.value.status == 401
    assert str(raised.value) == (
        f"the Kubernetes API at {api_server.url} answered 401 to the list of pods: Unauthorized; "
        "the credentials were refused (expired token or certificate?)"
    )


def test_forbidden_names_the_resource_and_rbac(kubeconfig, api_server):
    api = connect_kubernetes(kubeconfig)
    api_server.status = (
        403,
        "Forbidden",
        'workloads.kueue.x-k8s.io is forbidden: User "system:serviceaccount:gpuledger:collector" '
        'cannot list resource "workloads" in API group "kueue.x-k8s.io" at the cluster scope',
    )

    with pytest.raises(
        KubernetesApiError, match=r"answered 403 to the list of workloads\.kueue"
    ) as raised:
        api.list_custom("kueue.x-k8s.io", "v1beta1", "workloads")

    assert "cannot list resource" in str(raised.value)
    assert str(raised.value).endswith("(RBAC: grant get/list on this resource)")


def test_a_refused_connection_is_one_clear_error(kubeconfig):
    api = connect_kubernetes(kubeconfig, context="closed", timeout_s=5)

    with pytest.raises(KubernetesApiError) as raised:
        api.list_nodes()

    message = str(raised.value)
    assert message.startswith("could not reach the Kubernetes API at http://127.0.0.1:")
    assert message.endswith("to list nodes: [Errno 111] Connection refused")
    assert raised.value.status is None


def test_an_unusable_kubeconfig_is_a_config_error(tmp_path, kubeconfig):
    with pytest.raises(
        ConfigError, match=r"kubeconfig '.*missing' does not exist or is not a file"
    ):
        connect_kubernetes(tmp_path / "missing")
    with pytest.raises(ConfigError, match=r"cannot use '.*kubeconfig': .*nope"):
        connect_kubernetes(kubeconfig, context="nope")
    garbage = tmp_path / "garbage"
    for text in ("[1, 2", "[1, 2]", "just text", "{}"):
        garbage.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError, match=r"cannot use '.*garbage': "):
            connect_kubernetes(garbage)


def test_a_tls_failure_is_one_clear_error(tmp_path, api_server):
    # An https:// server address pointing at a plain-HTTP server: the TLS handshake fails.
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", api_server.url.replace("http:", "https:")
    )
    api = connect_kubernetes(kubeconfig, timeout_s=5)

    with pytest.raises(KubernetesApiError) as raised:
        api.list_pods()

    assert str(raised.value).startswith("could not ")
    assert (
        f"the Kubernetes API at https://127.0.0.1:{api_server.server_address[1]} to list pods: "
        in (str(raised.value))
    )
    assert "SSL" in str(raised.value)
