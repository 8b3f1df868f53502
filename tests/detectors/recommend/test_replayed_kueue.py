"""A Kubernetes cluster's recommendations carry the Kueue replay's deltas
(detectors/recommend/replayed_kueue.py), on the hand-built lake of tests/replay/kueue_lake.py
whose replay is known by hand: capping team-a at 4 GPUs admits bob's b1 at once (it waited
6,600 s while ann's a2 borrowed cq-b's quota) and keeps a2 pending 7,200 s."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from detectors.recommend.recommendation import Recommendation
from detectors.recommend.replayed_kueue import kueue_proposal_settings, with_kueue_replayed_deltas
from detectors.recommend.run import recommend
from detectors.replay.kueue.policy import KueuePolicy, apply_kueue_settings
from tests.replay.kueue_lake import CLUSTER, shared_kueue_lake
from warehouse.connection import connect

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kubernetes"
CAP = "clusterqueue.cq-a.borrowingLimit.nvidia.com/gpu@h100=0"


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    return shared_kueue_lake(tmp_path_factory)


@pytest.fixture(scope="module")
def recs(lake) -> dict[tuple[str, str], dict]:
    with connect(lake) as con:
        table = recommend(con)
    return {
        (row["kind"], row["scope"]): json.loads(row["evidence"]) | {"target": row["target"]}
        for row in table.to_pylist()
    }


def test_the_account_cap_detect_writes_carries_its_kueue_replayed_deltas(recs):
    evidence = recs[("gpu_cap", "account=team-a")]
    assert evidence["target"] == "kueue" and evidence["cap_gpus"] == 4
    rp = evidence["replay"]
    assert rp["scheduler"] == "kueue" and rp["settings"] == [CAP] and rp["assumed"] == []
    # waits (a1, a2, b1): baseline (0, 0, 6600), with the cap (0, 7200, 0); p95 of three
    # values interpolates 90 % of the way from the second to the largest
    assert rp["wait_p50_s"] == {"baseline": 0.0, "proposal": 0.0}
    assert rp["wait_p95_s"] == {"baseline": 0.9 * 6600, "proposal": 0.9 * 7200}
    assert rp["jobs_started"] == {"baseline": 3, "proposal": 3}
    assert rp["jobs_preempted"] == {"baseline": 0, "proposal": 0}
    # GPU-hours held to the end of the data (03:00) of 8 GPUs × 3 h of nominal quota:
    # 8 + 8 + 4 recorded; a1 8, a2 4 (02:00 – 03:00 of its run), b1 4 with the cap
    assert rp["occupancy"] == {"baseline": round(20 / 24, 6), "proposal": round(16 / 24, 6)}
    # the recorded ClusterQueues replay what happened exactly
    assert rp["calibration"] == {
        "jobs": 3,
        "median_abs_start_s": 0.0,
        "p90_abs_start_s": 0.0,
        "rank_correlation": 1.0,
    }
    assert rp["apply"] == [
        "kubectl get clusterqueue cq-a -o json | jq '(.spec.resourceGroups[].flavors[] | "
        'select(.name == "h100") | .resources[] | select(.name == "nvidia.com/gpu"))'
        '.borrowingLimit = "0"\' | kubectl replace -f -'
    ]


def test_a_user_cap_maps_onto_the_queue_only_that_user_used(recs):
    rp = recs[("gpu_cap", "user=ann,account=team-a")]["replay"]
    assert rp["settings"] == [CAP]


def rec(scope: str, cap: int, gain: float = 1.0) -> Recommendation:
    return Recommendation(
        cluster=CLUSTER,
        kind="gpu_cap",
        scope=scope,
        target="kueue",
        evidence={"cap_gpus": cap},
        expected_gain_gpu_h=gain,
        gain_kind="shifted",
        risk="r",
        config="c",
    )


@pytest.fixture(scope="module")
def workload(lake):
    from detectors.replay.kueue.workload import load_kueue_workload

    with connect(lake) as con:
        return load_kueue_workload(con, CLUSTER).jobs


RECORDED = apply_kueue_settings(
    KueuePolicy(),
    [
        f"clusterqueue.{q}.{key}"
        for q in ("cq-a", "cq-b")
        for key in ("cohort=org", "nominalQuota.nvidia.com/gpu@h100=4")
    ],
)
RESOURCES = {("cq-a", "h100"): "nvidia.com/gpu"}


def test_a_cap_below_the_nominal_quota_lowers_it_and_stops_borrowing(workload):
    change, why = kueue_proposal_settings(rec("account=team-a", 2), RECORDED, workload, RESOURCES)
    assert why is None
    assert change == [
        "clusterqueue.cq-a.nominalQuota.nvidia.com/gpu@h100=2",
        "clusterqueue.cq-a.borrowingLimit.nvidia.com/gpu@h100=0",
    ]


def test_a_cap_below_the_nominal_quota_keeps_what_kueue_accepts(workload):
    # out of a cohort Kueue refuses a borrowingLimit; a lendingLimit must not pass the quota
    alone = apply_kueue_settings(RECORDED, ["clusterqueue.cq-a.cohort=none"])
    change, _ = kueue_proposal_settings(rec("account=team-a", 2), alone, workload, RESOURCES)
    assert change == ["clusterqueue.cq-a.nominalQuota.nvidia.com/gpu@h100=2"]
    lending = apply_kueue_settings(RECORDED, ["clusterqueue.cq-a.lendingLimit=3"])
    change, _ = kueue_proposal_settings(rec("account=team-a", 2), lending, workload, RESOURCES)
    assert change[-1] == "clusterqueue.cq-a.lendingLimit.nvidia.com/gpu@h100=2"


@pytest.mark.parametrize(
    ("scope", "cap", "policy", "why"),
    [
        ("account=team-a", 8, RECORDED, None),  # 4 nominal + 4 to borrow: a real limit
        ("account=team-c", 4, RECORDED, "none of account team-c's GPU workloads"),
        (
            "account=team-a",
            4,
            apply_kueue_settings(RECORDED, ["clusterqueue.cq-a.cohort=none"]),
            "already holds it to 4 GPUs",
        ),
    ],
)
def test_a_cap_the_queues_cannot_express_says_why(workload, scope, cap, policy, why):
    change, reason = kueue_proposal_settings(rec(scope, cap), policy, workload, RESOURCES)
    if why is None:
        assert change == ["clusterqueue.cq-a.borrowingLimit.nvidia.com/gpu@h100=4"]
    else:
        assert change == [] and why in str(reason)


def test_a_queue_shared_with_others_is_no_cap_of_one_user(lake, workload):
    shared = dataclasses.replace(workload, partition=["cq-a"] * workload.size)
    _, why = kueue_proposal_settings(rec("user=ann,account=team-a", 4), RECORDED, shared, {})
    assert "also queued others' workloads" in str(why)
    # through the recommendations: a kind the replay cannot express is left as it was
    idle = dataclasses.replace(rec("cluster", 4), kind="time_limit")
    from detectors.recommend.run import cluster_facts

    with connect(lake) as con:
        [facts] = [f for f in cluster_facts(con, *_window()) if f.cluster == CLUSTER]
        assert with_kueue_replayed_deltas(con, facts, [idle]) == [idle]
        [skipped] = with_kueue_replayed_deltas(con, facts, [rec("account=team-c", 4)])
    assert skipped.evidence["replay"]["scheduler"] == "kueue"
    assert "team-c" in skipped.evidence["replay"]["skipped"]


def _window():
    from tests.marts import rows as r

    return r.at(-60), r.at(4 * 3600)


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_the_apply_line_edits_a_recorded_clusterqueue_as_replayed(recs):
    # the jq part of the line, run on a ClusterQueue as `kubectl get -o json` gives it
    [line] = recs[("gpu_cap", "account=team-a")]["replay"]["apply"]
    program = line.split("| jq '", 1)[1].split("' |", 1)[0]
    queues = json.loads((FIXTURES / "t1" / "kueue.x-k8s.io" / "clusterqueues.json").read_text())
    cq = next(q for q in queues["items"] if q["metadata"]["name"] == "cq-research")
    edited = json.loads(
        subprocess.run(
            ["jq", program],
            input=json.dumps(cq),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    [h100] = [
        f for g in edited["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == "h100"
    ]
    gpu = next(x for x in h100["resources"] if x["name"] == "nvidia.com/gpu")
    assert gpu["borrowingLimit"] == "0"
    # nothing else of the queue changed
    gpu.pop("borrowingLimit")
    original = next(
        x
        for g in cq["spec"]["resourceGroups"]
        for f in g["flavors"]
        if f["name"] == "h100"
        for x in f["resources"]
        if x["name"] == "nvidia.com/gpu"
    )
    assert gpu == {k: v for k, v in original.items() if k != "borrowingLimit"}
