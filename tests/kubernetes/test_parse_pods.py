"""`parse_pod`: the rules that turn one pod into a `jobs` row, on the recorded pods of `t1`.

Variations (another phase, another owner, another node) are made on a copy of a recorded pod,
so each test names exactly what differs from a real response.
"""

from __future__ import annotations

import copy

import pytest

from collector.errors import MalformedSample
from collector.sources.kubernetes.pods import (
    AttributionKeys,
    NodeInfo,
    Scheduling,
    parse_node,
    parse_pod,
)
from collector.sources.kubernetes.queues import (
    kueue_local_queue_rows,
    parse_pod_group,
    parse_workload,
)

from .conftest import read_list


def items(name, snapshot="t1"):
    return read_list(snapshot, name)["items"]


def recorded_pod(name):
    [pod] = [p for p in items("pods.json") if p["metadata"]["name"] == name]
    return copy.deepcopy(pod)


@pytest.fixture(scope="module")
def nodes():
    return {n.name: n for n in map(parse_node, items("nodes.json"))}


@pytest.fixture(scope="module")
def scheduling():
    local_queues = [
        r for q in items("kueue.x-k8s.io/localqueues.json") for r in kueue_local_queue_rows(q)
    ]
    groups = [parse_pod_group(g) for g in items("scheduling.volcano.sh/podgroups.json")]
    return Scheduling(
        workloads=[parse_workload(w) for w in items("kueue.x-k8s.io/workloads.json")],
        local_queues={(r.namespace, r.name): r.parent for r in local_queues},
        local_queues_known=True,
        pod_groups={(g.namespace, g.name): g for g in groups},
    )


@pytest.fixture
def parse(nodes, scheduling):
    def run(pod, keys=None, sched=None, node_map=None):
        return parse_pod(pod, nodes if node_map is None else node_map, sched or scheduling, keys)

    return run


def test_pods_without_gpus_are_not_jobs(parse):
    assert parse(recorded_pod("preprocess-5d8kq")) is None
    assert parse(recorded_pod("nvidia-device-plugin-daemonset-h7x2q")) is None


def test_nodes_give_the_gpu_product_and_gpu_devices():
    nodes = {n.name: n for n in map(parse_node, items("nodes.json"))}
    assert nodes["gpu-h100-01"] == NodeInfo(
        "gpu-h100-01", "NVIDIA-H100-80GB-HBM3", {"nvidia.com/gpu": 8}, shared=False
    )
    assert nodes["gpu-a100-mig-01"].gpu_capacity == {
        "nvidia.com/mig-1g.10gb": 8,
        "nvidia.com/mig-2g.20gb": 4,
        "nvidia.com/mig-3g.40gb": 4,
    }
    assert nodes["cpu-node-01"] == NodeInfo("cpu-node-01", None, {}, shared=False)


def test_a_kueue_jobset_pod_holding_a_whole_node(parse):
    job = parse(recorded_pod("llm-sft-workers-0-0-8xk2p"))

    assert (job.job_id, job.job_name, job.partition, job.state) == (
        "team-a/llm-sft-workers-0-0-8xk2p",
        "JobSet/llm-sft",
        "cq-research",
        "RUNNING",
    )
    assert job.exclusive_node == "gpu-h100-01"
    assert job.workload == "team-a/jobset-llm-sft-4b1c7"
    assert job.submit_ts < job.start_ts  # the Workload waited 32 minutes for quota
    assert not job.finished and job.end_ts is None and job.exit_code is None


@pytest.mark.parametrize(
    ("change", "state"),
    [
        ({"phase": "Pending"}, "PENDING"),
        ({"phase": "Running"}, "RUNNING"),
        ({"phase": "Succeeded"}, "COMPLETED"),
        ({"phase": "Failed"}, "FAILED"),
        ({"phase": "Failed", "reason": "DeadlineExceeded"}, "TIMEOUT"),
        ({"phase": "Failed", "reason": "Evicted"}, "PREEMPTED"),
        ({"phase": "Unknown"}, "UNKNOWN"),
    ],
)
def test_the_phase_and_its_reason_give_the_state(parse, change, state):
    pod = recorded_pod("finetune-7tq4m")
    pod["status"].update(change)
    assert parse(pod).state == state


@pytest.mark.parametrize(
    ("reason", "state", "gone_state"),
    [
        ("PreemptionByScheduler", "PREEMPTED", "PREEMPTED"),
        ("TerminationByKubelet", "PREEMPTED", "PREEMPTED"),
        ("EvictionByEvictionAPI", "PREEMPTED", "PREEMPTED"),
        ("DeletionByPodGC", "NODE_FAIL", "NODE_FAIL"),
        ("DeletionByTaintManager", "NODE_FAIL", "NODE_FAIL"),
        ("SomethingNew", "FAILED", "CANCELLED"),
    ],
)
def test_a_disruption_target_condition_says_why_a_pod_ended(parse, reason, state, gone_state):
    pod = recorded_pod("tokenize-big-r2xkq")
    pod["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = "Error"
    pod["status"]["conditions"].insert(
        0,
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": reason,
            "lastTransitionTime": "2026-11-30T10:31:00Z",
        },
    )
    job = parse(pod)
    assert (job.state, job.gone_state) == (state, gone_state)
    pod["status"]["phase"] = "Running"
    assert parse(pod).gone_state == gone_state  # remembered in case the pod disappears


def test_oomkilled_and_evicted_pods(parse):
    oom = parse(recorded_pod("tokenize-big-r2xkq"))
    evicted = parse(recorded_pod("debug-shell"))

    assert (oom.state, oom.exit_code, oom.end_ts - oom.start_ts) == (
        "OUT_OF_MEMORY",
        "0:9",
        1_737_000,
    )
    assert (evicted.state, evicted.exit_code) == ("PREEMPTED", "0:9")
    assert evicted.gone_state == "PREEMPTED"


@pytest.mark.parametrize(
    ("app_codes", "init_codes", "phase", "expected"),
    [
        ([0], [], "Succeeded", "0:0"),
        ([3], [], "Failed", "3:0"),
        ([0, 2, 5], [], "Failed", "2:0"),  # the first app container that failed
        ([143], [], "Failed", "0:15"),  # SIGTERM
        ([255], [], "Failed", "255:0"),  # not a signal
        ([], [1], "Failed", "1:0"),  # an init container failed, the app never ran
        ([0], [1], "Succeeded", "0:0"),  # init failures that were retried do not count
        ([], [], "Failed", None),
    ],
)
def test_exit_codes_are_written_as_sacct_writes_them(parse, app_codes, init_codes, phase, expected):
    pod = recorded_pod("finetune-7tq4m")
    template = pod["status"]["containerStatuses"][0]

    def statuses(codes):
        out = []
        for i, code in enumerate(codes):
            status = copy.deepcopy(template)
            status["name"] = f"c{i}"
            status["state"]["terminated"]["exitCode"] = code
            out.append(status)
        return out

    pod["status"].update(
        phase=phase,
        containerStatuses=statuses(app_codes),
        initContainerStatuses=statuses(init_codes),
    )
    assert parse(pod).exit_code == expected


def test_effective_requests_of_a_pod_with_a_sidecar_and_a_gpu_init_container(parse):
    job = parse(recorded_pod("finetune-7tq4m"))

    assert (job.gpus, job.gpus_requested, job.cpus, job.mem_req_mib) == (4, 4, 9, 65_664)
    assert job.exclusive_node is None  # 4 of the node's 8 GPUs
    assert job.end_ts == 1_796_024_637_000  # the sidecar's finishedAt, the latest of all
    assert job.time_limit_s == 14_400  # the Workload's maximumExecutionTimeSeconds


def test_mig_slices_are_counted_as_devices_and_typed_by_profile(parse):
    notebook = parse(recorded_pod("bob-0"))
    infer = parse(recorded_pod("infer-7f9c8d6b5-x2x9z"))

    assert (notebook.gpus, notebook.gpu_type) == (1, "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb")
    assert notebook.interactive is True
    assert (infer.gpus, infer.gpu_type, infer.mem_req_mib) == (
        2,
        "NVIDIA-A100-SXM4-80GB-MIG-2g.20gb",
        16_384,  # the memory limit, as no request was given
    )
    assert infer.job_name == "Deployment/infer"


def test_without_node_labels_the_type_comes_from_the_kueue_flavor_or_the_profile(parse):
    bare = {"gpu-h100-02": NodeInfo("gpu-h100-02", None, {"nvidia.com/gpu": 8}, False)}
    assert parse(recorded_pod("finetune-7tq4m"), node_map=bare).gpu_type == "h100"
    assert parse(recorded_pod("bob-0"), node_map={}).gpu_type == "MIG-1g.10gb"
    assert parse(recorded_pod("tokenize-big-r2xkq"), node_map={}).gpu_type is None


def test_a_pod_holds_a_whole_node_only_when_it_has_every_gpu_device_unshared(parse):
    pod = recorded_pod("llm-sft-workers-0-0-8xk2p")
    node = NodeInfo("gpu-h100-01", "NVIDIA-H100-80GB-HBM3", {"nvidia.com/gpu": 8}, False)
    assert parse(pod, node_map={"gpu-h100-01": node}).exclusive_node == "gpu-h100-01"
    shared = NodeInfo("gpu-h100-01", "NVIDIA-H100-80GB-HBM3", {"nvidia.com/gpu": 8}, True)
    assert parse(pod, node_map={"gpu-h100-01": shared}).exclusive_node is None
    bigger = NodeInfo("gpu-h100-01", "x", {"nvidia.com/gpu": 8, "nvidia.com/mig-1g.10gb": 2}, False)
    assert parse(pod, node_map={"gpu-h100-01": bigger}).exclusive_node is None
    assert parse(pod, node_map={}).exclusive_node is None  # node unknown: cannot tell
    pending = recorded_pod("llm-sft-workers-0-0-8xk2p")
    del pending["status"]["startTime"]
    pending["status"]["containerStatuses"][0]["state"] = {
        "waiting": {"reason": "ContainerCreating"}
    }
    assert parse(pending).exclusive_node is None  # not started: no interval to open


def test_time_slicing_labels_mark_a_node_shared():
    [node] = [n for n in items("nodes.json") if n["metadata"]["name"] == "gpu-h100-01"]
    node = copy.deepcopy(node)
    node["metadata"]["labels"]["nvidia.com/gpu.replicas"] = "4"
    assert parse_node(node).shared
    node["metadata"]["labels"]["nvidia.com/gpu.replicas"] = "1"
    node["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] = "mps"
    assert parse_node(node).shared


def test_partition_is_the_clusterqueue_else_the_volcano_queue(parse, scheduling):
    assert parse(recorded_pod("gated-eval")).partition == "cq-eval"  # via its LocalQueue
    assert parse(recorded_pod("bert-pretrain-worker-0")).partition == "vc-research"  # PodGroup
    assert parse(recorded_pod("sweep-lr-0")).partition == "vc-inference"
    assert parse(recorded_pod("tokenize-big-r2xkq")).partition is None

    # LocalQueues not readable (Kueue absent or not listed): the LocalQueue name stands in.
    no_kueue = Scheduling()
    assert parse(recorded_pod("gated-eval"), sched=no_kueue).partition == "team-c-queue"
    # A Volcano pod without a PodGroup or queue annotation is in Volcano's default queue.
    pod = recorded_pod("sweep-lr-0")
    pod["metadata"]["annotations"] = {}
    assert parse(pod, sched=no_kueue).partition == "default"


def test_owners_become_job_names(parse):
    assert parse(recorded_pod("bert-pretrain-master-0")).job_name == "PyTorchJob/bert-pretrain"
    assert parse(recorded_pod("bob-0")).job_name == "StatefulSet/bob"
    assert parse(recorded_pod("debug-shell")).job_name == "Pod/debug-shell"
    ray = recorded_pod("debug-shell")
    ray["metadata"]["labels"].update(
        {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "tune-7"}
    )
    assert parse(ray).job_name == "RayJob/tune-7"


def test_user_and_account_come_from_configured_keys_then_fall_back(parse):
    finetune = recorded_pod("finetune-7tq4m")  # user annotation, account label
    assert (parse(finetune).user, parse(finetune).account) == ("carol", "nlp")

    keys = AttributionKeys(user=("example.com/owner", "gpuledger.io/user"), account=("team",))
    finetune["metadata"]["labels"]["example.com/owner"] = "carol.w"
    job = parse(finetune, keys=keys)
    assert (job.user, job.account) == ("carol.w", "team-a")  # no `team` key: the namespace

    notebook = parse(recorded_pod("bob-0"))
    assert notebook.user == "system:serviceaccount:team-b:default-editor"


def test_requeues_add_container_restarts_and_kueue_requeues(parse, scheduling):
    assert parse(recorded_pod("bert-pretrain-worker-0")).requeues == 2
    requeued = [parse_workload(w) for w in items("kueue.x-k8s.io/workloads.json", "t3")]
    sched = Scheduling(workloads=requeued, local_queues=scheduling.local_queues)
    assert parse(recorded_pod("llm-sft-workers-0-0-8xk2p"), sched=sched).requeues == 1


def test_a_malformed_pod_names_itself(parse):
    pod = recorded_pod("tokenize-big-r2xkq")
    pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "one"
    with pytest.raises(
        MalformedSample, match=r"pod team-c/tokenize-big-r2xkq: invalid quantity 'one'"
    ):
        parse(pod)
    nameless = recorded_pod("tokenize-big-r2xkq")
    del nameless["metadata"]["namespace"]
    with pytest.raises(MalformedSample, match="pod without metadata.name/namespace"):
        parse(nameless)
    bad_time = recorded_pod("tokenize-big-r2xkq")
    bad_time["status"]["startTime"] = "noon"
    with pytest.raises(
        MalformedSample, match=r"tokenize-big-r2xkq: invalid status.startTime 'noon'"
    ):
        parse(bad_time)


# ---------------------------------------------------------------- owners from untrusted labels


@pytest.mark.parametrize(
    "claimed",
    [
        "eve@evil.example.com",
        "carol, eve@evil.example.com",
        "carol\nBcc: eve@evil.example.com",
        "carol eve",
        "<carol>",
        "x" * 65,
    ],
)
def test_a_user_annotation_that_is_no_plain_name_is_dropped(parse, claimed):
    finetune = recorded_pod("finetune-7tq4m")
    finetune["metadata"]["annotations"]["gpuledger.io/user"] = claimed
    job = parse(finetune)
    assert job.user is None  # not the claim, and not the service account either
    assert job.rejected == ("user",)
    assert job.account == "nlp"  # the account label is fine
    assert "rejected" not in job.landed()


def test_an_account_label_that_is_no_plain_name_falls_back_to_the_namespace(parse):
    finetune = recorded_pod("finetune-7tq4m")
    finetune["metadata"]["labels"]["gpuledger.io/account"] = "nlp,physics"
    job = parse(finetune)
    assert (job.user, job.account, job.rejected) == ("carol", "team-a", ("account",))


def test_the_configured_namespace_account_wins_over_the_pods_label(parse):
    finetune = recorded_pod("finetune-7tq4m")  # namespace team-a, label account nlp
    keys = AttributionKeys(namespace_accounts={"team-a": "physics"})
    assert parse(finetune, keys=keys).account == "physics"
    finetune["metadata"]["labels"]["gpuledger.io/account"] = "bad account"
    job = parse(finetune, keys=keys)
    assert (job.account, job.rejected) == ("physics", ())  # the label is not even read
    other = AttributionKeys(namespace_accounts={"team-b": "bio"})
    assert parse(recorded_pod("finetune-7tq4m"), keys=other).account == "nlp"
