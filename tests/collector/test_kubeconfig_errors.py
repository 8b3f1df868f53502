"""`connect_kubernetes` on a kubeconfig that is not one: the error names the file and says it
is not a valid kubeconfig, in words, where the client said `'str' object does not support item
assignment` or `'utf-8' codec can't decode byte …`."""

from __future__ import annotations

import json

import pytest

from collector.errors import ConfigError
from collector.sources.kubernetes.api import connect_kubernetes

pytest.importorskip("kubernetes")


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"just some text", "not a valid kubeconfig (TypeError: "),
        (b"[1, 2]\n", "not a valid kubeconfig (TypeError: "),
        (b"not: [yaml", "not a valid kubeconfig: not YAML (while parsing a flow sequence"),
        (bytes(range(128, 256)) * 8, "not a valid kubeconfig: not UTF-8 text ("),
    ],
    ids=["text", "a-list", "broken-yaml", "binary"],
)
def test_a_file_that_is_no_kubeconfig_is_named_and_said_to_be_none(tmp_path, content, said):
    path = tmp_path / "kubeconfig"
    path.write_bytes(content)

    with pytest.raises(ConfigError) as raised:
        connect_kubernetes(path)

    assert str(raised.value).startswith(f"cannot use {str(path)!r}: {said}")
    assert "\n" not in str(raised.value)


def test_a_kubeconfig_without_a_context_keeps_the_clients_words(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "Config"}), encoding="utf-8")

    with pytest.raises(ConfigError, match=r"cannot use '.*kubeconfig': Invalid kube-config"):
        connect_kubernetes(path)
