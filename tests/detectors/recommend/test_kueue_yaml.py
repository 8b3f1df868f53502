"""The Kueue recommendations' YAML, checked against Kueue's API (no API server here).

Every Kueue object a recommender writes must parse, name a real kind of a real API group and
use only fields that kind has. The field lists below are transcribed from Kueue's Go types
(apis/kueue/v1beta1: clusterqueue_types.go, localqueue_types.go, resourceflavor_types.go,
workload_types.go; apis/config/v1beta1: configuration_types.go) and its validation rules
(a flavor must exist as a ResourceFlavor; borrowingLimit only within a cohort; each flavor
lists the group's coveredResources in order; object names are RFC 1123 labels).
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from detectors.recommend import (
    billing,
    drain_node,
    fairshare,
    gpu_cap,
    idle_cancel,
    mig_packing,
    power_cap,
    time_limit,
)
from detectors.recommend.recommendation import ClusterFacts
from tests.marts import rows as r

FACTS = ClusterFacts("k8s", "kueue", 64, r.T0, r.T0, r.T0_E, r.T0_E + 3600)
KUEUE = "kueue.x-k8s.io/v1beta1"
CONFIG = "config.kueue.x-k8s.io/v1beta1"
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# a Kubernetes resource.Quantity written as a string (apimachinery's quantity grammar)
QUANTITY = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+|[kMGTPE]i?|m|)$")

# kind -> the fields of its spec (Kueue v1beta1), and of the pieces inside
SPEC_FIELDS = {
    "ClusterQueue": {
        "cohort", "namespaceSelector", "resourceGroups", "queueingStrategy",
        "flavorFungibility", "preemption", "admissionChecks", "admissionChecksStrategy",
        "stopPolicy", "fairSharing", "admissionScope",
    },
    "LocalQueue": {"clusterQueue", "stopPolicy", "fairSharing"},
    "ResourceFlavor": {"nodeLabels", "nodeTaints", "tolerations", "topologyName"},
    "Workload": {"podSets", "queueName", "priorityClassName", "priority",
                 "priorityClassSource", "active", "maximumExecutionTimeSeconds"},
}  # fmt: skip
RESOURCE_GROUP = {"coveredResources", "flavors"}
FLAVOR_QUOTAS = {"name", "resources"}
RESOURCE_QUOTA = {"name", "nominalQuota", "borrowingLimit", "lendingLimit"}
CONFIGURATION = {
    "apiVersion", "kind", "namespace", "manageJobsWithoutQueueName",
    "managedJobsNamespaceSelector", "internalCertManagement", "waitForPodsReady",
    "clientConnection", "integrations", "queueVisibility", "multiKueue", "fairSharing",
    "admissionFairSharing", "resources", "featureGates", "objectRetentionPolicies",
    "health", "metrics", "webhook", "leaderElection", "controller",
}  # fmt: skip
ADMISSION_FAIR_SHARING = {"usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"}


def documents(config: str) -> list[dict[str, Any]]:
    """The Kubernetes objects in a config: YAML documents (between `---`) with an apiVersion."""
    docs = []
    for part in re.split(r"^---$", config, flags=re.M):
        body = "\n".join(
            line for line in part.splitlines() if not line.startswith(("kubectl ", "nvidia-smi "))
        )
        if "apiVersion:" in body:
            docs.append(yaml.safe_load(body))
    return docs


def check_object(doc: dict[str, Any], flavors: set[str]) -> None:
    if doc["apiVersion"] == CONFIG:
        assert doc["kind"] == "Configuration"
        assert set(doc) <= CONFIGURATION
        afs = doc.get("admissionFairSharing", {})
        assert set(afs) <= ADMISSION_FAIR_SHARING
        assert all(isinstance(w, int | float) for w in afs.get("resourceWeights", {}).values())
        return
    assert doc["apiVersion"] == KUEUE
    kind = doc["kind"]
    assert kind in SPEC_FIELDS, kind
    assert set(doc) <= {"apiVersion", "kind", "metadata", "spec"}
    assert NAME.match(doc["metadata"]["name"]), doc["metadata"]
    if "namespace" in doc["metadata"]:
        assert NAME.match(doc["metadata"]["namespace"])
    spec = doc.get("spec") or {}
    assert set(spec) <= SPEC_FIELDS[kind], set(spec) - SPEC_FIELDS[kind]
    if kind == "LocalQueue":
        assert NAME.match(spec["clusterQueue"])
    if kind != "ClusterQueue":
        return
    assert spec["namespaceSelector"] == {}  # every namespace
    covered = [r for group in spec["resourceGroups"] for r in group["coveredResources"]]
    assert len(covered) == len(set(covered)), "a resource may be in one resource group only"
    # Kueue admits no workload requesting a resource the queue does not cover: pods request
    # cpu and memory besides their GPUs, so a GPU-only queue would admit nothing
    assert {"cpu", "memory"} <= set(covered), covered
    for group in spec["resourceGroups"]:
        assert set(group) <= RESOURCE_GROUP
        for flavor in group["flavors"]:
            assert set(flavor) <= FLAVOR_QUOTAS
            assert flavor["name"] in flavors, "a ClusterQueue's flavor must exist"
            assert [q["name"] for q in flavor["resources"]] == group["coveredResources"]
            for quota in flavor["resources"]:
                assert set(quota) <= RESOURCE_QUOTA
                nominal = quota["nominalQuota"]
                if isinstance(nominal, str):
                    assert QUANTITY.match(nominal), nominal
                else:
                    assert isinstance(nominal, int) and nominal >= 0
                if "borrowingLimit" in quota:
                    assert spec.get("cohort"), "borrowingLimit needs a cohort"


def check_config(config: str) -> list[dict[str, Any]]:
    docs = documents(config)
    flavors = {d["metadata"]["name"] for d in docs if d.get("kind") == "ResourceFlavor"}
    for doc in docs:
        check_object(doc, flavors)
    for line in config.splitlines():
        if line.startswith("kubectl "):
            argv = shlex.split(line)  # one command line the shell reads as intended
            if "-p" in argv:
                patch = json.loads(argv[argv.index("-p") + 1])
                kind = argv[argv.index("patch") + 1]
                fields = SPEC_FIELDS["LocalQueue" if kind == "localqueue" else "Workload"]
                assert set(patch["spec"]) <= fields
    return docs


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return [d["kind"] for d in docs]


def test_gpu_caps_are_a_clusterqueue_with_its_flavor_and_a_localqueue():
    user = check_config(gpu_cap._user_config(FACTS, "Alice.Smith", "ml_team", 4))
    account = check_config(gpu_cap._account_config(FACTS, "ml_team", 16))

    assert kinds(user) == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    queue, local = user[1], user[2]
    assert queue["metadata"]["name"] == "ml-team-alice-smith"
    assert local["spec"]["clusterQueue"] == queue["metadata"]["name"]
    assert local["metadata"] == {"namespace": "ml-team", "name": "alice-smith"}
    assert quotas(queue) == {
        "cpu": {"name": "cpu", "nominalQuota": 1_000_000},
        "memory": {"name": "memory", "nominalQuota": "1Pi"},
        # only the GPUs are capped, and may not be borrowed from the account's cohort
        "nvidia.com/gpu": {"name": "nvidia.com/gpu", "nominalQuota": 4, "borrowingLimit": 0},
    }
    assert kinds(account) == ["ResourceFlavor", "ClusterQueue"]
    assert quotas(account[1])["nvidia.com/gpu"]["nominalQuota"] == 16
    assert quotas(account[1])["memory"]["nominalQuota"] == "1Pi"


def quotas(queue: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A single-flavor ClusterQueue's quotas by resource name."""
    [group] = queue["spec"]["resourceGroups"]
    [flavor] = group["flavors"]
    return {q["name"]: q for q in flavor["resources"]}


@pytest.mark.parametrize(
    "config",
    [
        gpu_cap._user_config(FACTS, "alice", "ml", 4),
        gpu_cap._account_config(FACTS, "ml", 16),
        mig_packing._config(FACTS, 2, 3, 81920.0, dict(mig_packing.PROFILES)),
    ],
    ids=["user_cap", "account_cap", "mig_packing"],
)
def test_cpu_and_memory_quotas_do_not_constrain_and_say_how_to_set_them(config):
    [queue] = [d for d in check_config(config) if d["kind"] == "ClusterQueue"]
    q = quotas(queue)
    # far above any node fleet: 1,000,000 cores and 1 PiB (2**50 bytes) of memory
    assert q["cpu"]["nominalQuota"] >= 100_000
    assert q["memory"]["nominalQuota"] == "1Pi"
    assert "borrowingLimit" not in q["cpu"] and "borrowingLimit" not in q["memory"]
    assert "allocatable.cpu" in config and "excludeResourcePrefixes" in config


def test_mig_packing_queue_covers_every_slice_it_quotes():
    mem = dict(mig_packing.PROFILES)
    docs = check_config(mig_packing._config(FACTS, 2, 3, 81920.0, mem))

    queue = docs[-1]
    [group] = queue["spec"]["resourceGroups"]
    # 2g layout: three 2g.20gb and one 1g.10gb per GPU, 3 GPUs
    assert group["coveredResources"] == [
        "cpu",
        "memory",
        "nvidia.com/mig-2g.20gb",
        "nvidia.com/mig-1g.10gb",
    ]
    assert [q["nominalQuota"] for q in group["flavors"][0]["resources"]][2:] == [9, 3]


def test_billing_is_a_kueue_configuration_with_resource_weights():
    [doc] = check_config(billing._config(FACTS, ["gpu"], 8.0))

    assert doc["admissionFairSharing"]["resourceWeights"] == {"cpu": 1, "nvidia.com/gpu": 8}


def test_the_other_kueue_configs_are_valid_commands_and_fragments():
    changes = [{"account": "ml", "new_share": 0.6}]
    check_config(fairshare._config(FACTS, changes, 200.0, 2))
    check_config(idle_cancel._config(FACTS, {"warn_minutes": 60, "cancel_minutes": 120}, []))
    check_config(drain_node._config(FACTS, "gpu-001", "xid 79"))
    check_config(power_cap._config(FACTS, "gpu", ["gpu-001"], 420))
    # the max-exec-time label: a Job metadata fragment with the label's value a string of seconds
    fragment = yaml.safe_load(time_limit._user_config(FACTS, "alice", 7200))
    assert fragment["metadata"]["labels"] == {"kueue.x-k8s.io/max-exec-time-seconds": "7200"}


@given(
    user=st.text(st.characters(codec="ascii", exclude_categories=("Cc",)), min_size=1),
    account=st.text(st.characters(codec="ascii", exclude_categories=("Cc",)), min_size=1),
)
def test_any_user_and_account_make_valid_object_names(user, account):
    """Names come from the lake (Linux users, namespaces, labels): whatever they hold, the
    objects stay valid."""
    check_config(gpu_cap._user_config(FACTS, user, account, 2))


@pytest.mark.parametrize("bad", ["Alice", "a_b", "-a", "a" * 64])
def test_the_name_check_itself_rejects_invalid_names(bad):
    assert not NAME.match(bad) or len(bad) > 63
