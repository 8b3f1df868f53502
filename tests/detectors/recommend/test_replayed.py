"""Recommendations carry the replay's deltas (detectors/recommend/replayed.py): each kind whose
change the replay expresses, on a small simulated cluster's jobs, against the shared baseline."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from collector.sim.runner import SimConfig, simulate_records
from detectors.recommend.recommendation import ClusterFacts, Recommendation
from detectors.recommend.replayed import MAX_PROPOSALS, with_replayed_deltas
from detectors.replay.engine import Workload
from detectors.replay.workload import load_workload
from warehouse.connection import connect
from warehouse.lake import Lake

START = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    root: Path = tmp_path_factory.mktemp("replayed") / "lake"
    simulate_records(SimConfig(gpus=64, days=3, seed=3, load=1.5), Lake.at(root))  # queues form
    c = connect(root, require=("jobs",))
    yield c
    c.close()


def facts(target: str = "slurm") -> ClusterFacts:
    end = START + dt.timedelta(days=3)
    return ClusterFacts("sim", target, 64, START, end, START.timestamp(), end.timestamp())


def rec(kind: str, scope: str, evidence: dict, gain: float | None = 1.0) -> Recommendation:
    return Recommendation(
        cluster="sim",
        kind=kind,
        scope=scope,
        target="slurm",
        evidence=evidence,
        expected_gain_gpu_h=gain,
        gain_kind="saved" if gain is not None else None,
        risk="r",
        config="c",
    )


def fair_share_change() -> Recommendation:
    evidence = {
        "accounts": [
            {"account": "llm-pretrain", "new_share": 0.05},
            {"account": "nlp-research", "new_share": 0.6},
            {"account": "speech", "new_share": 0.35},
        ],
        "flagged": ["llm-pretrain", "nlp-research"],
    }
    return rec("fairshare_weight", "cluster", evidence, gain=None)


class Singles(NamedTuple):
    """Each test's recommendation below, with its replay; the workload, its largest job."""

    replays: dict[str, tuple[Recommendation, dict]]
    w: Workload
    big: int


@pytest.fixture(scope="module")
def singles(con) -> Singles:
    """The recommendations of the tests below, one of each kind, replayed by one call, as one
    `detect` round passes a cluster's recommendations: they share its one load of the workload
    and its baseline replay (one per assumption set), where a call each replayed it again."""
    w = load_workload(con, "sim")
    big = max(range(w.size), key=lambda j: (w.gpus[j], -w.submit_e[j]))  # the largest, first
    user, account = w.user[big], w.account[big]
    recs = {
        "time_limit": rec("time_limit", "partition=gpu", {"max_time_s": 7200.0}),
        "account_cap": rec("gpu_cap", "account=llm-pretrain", {"cap_gpus": 8}),
        "user_cap": rec("gpu_cap", f"user={user},account={account}", {"cap_gpus": 1}),
        "fair_share": fair_share_change(),
        "drain": rec("drain_node", f"node={w.nodes[0]}", {"hw_events": 3}),
    }
    assert len(recs) <= MAX_PROPOSALS  # every one replayed
    out = with_replayed_deltas(con, facts(), list(recs.values()))
    replays = {}
    for (name, r), done in zip(recs.items(), out, strict=True):
        assert done.evidence.items() >= r.evidence.items()  # the recommender's figures stay
        replays[name] = (r, dict(done.evidence["replay"]))
    return Singles(replays, w, big)


def replayed(singles: Singles, name: str) -> dict:
    return singles.replays[name][1]


def assert_calibrated(rp: dict) -> None:
    cal = rp["calibration"]
    assert cal["jobs"] > 100 and cal["median_abs_start_s"] >= 0
    assert -1 <= cal["rank_correlation"] <= 1
    assert rp["jobs_started"]["baseline"] > 100


def test_a_partition_time_limit_is_replayed_as_its_max_time(singles):
    rp = replayed(singles, "time_limit")
    assert rp["settings"] == ["partition.gpu.MaxTime=02:00:00"] and rp["assumed"] == []
    # Slurm keeps a job asking for more than MaxTime pending: the replay counts them
    assert rp["jobs_held"] > 0
    assert rp["jobs_started"]["proposal"] < rp["jobs_started"]["baseline"]
    assert rp["occupancy"]["proposal"] < rp["occupancy"]["baseline"]
    assert_calibrated(rp)


def test_an_account_gpu_cap_is_replayed_as_its_grptres(singles):
    rp = replayed(singles, "account_cap")
    assert rp["settings"] == ["assoc.llm-pretrain.GrpTRES=gres/gpu=8"]
    assert rp["wait_p95_s"]["proposal"] != rp["wait_p95_s"]["baseline"]
    # the cap keeps some jobs the recorded policy started queued to the end of the data
    started = rp["jobs_started"]
    assert rp["jobs_held"] >= started["baseline"] - started["proposal"] > 0
    assert rp["jobs_cut"] == 0
    assert_calibrated(rp)


def test_a_user_gpu_cap_is_replayed_on_that_users_association(singles):
    w, big = singles.w, singles.big  # a cap of 1 GPU on the user of the largest job
    user, account = w.user[big], w.account[big]
    rp = replayed(singles, "user_cap")
    assert rp["settings"] == [f"assoc.{account}.{user}.GrpTRES=gres/gpu=1"]
    # a 1-GPU cap keeps that user's larger jobs pending for good (others may then start more)
    assert (
        rp["jobs_started"]
        != {"baseline": rp["jobs_started"]["baseline"]}
        | {"proposal": rp["jobs_started"]["baseline"]}
        or rp["wait_p50_s"]["proposal"] != rp["wait_p50_s"]["baseline"]
    )
    from detectors.replay.engine import replay
    from detectors.replay.policy import Policy, apply_settings

    capped = replay(w, apply_settings(Policy(), rp["settings"]))
    assert np.isnan(capped.start_e[big]), (user, w.gpus[big])


def test_a_fair_share_change_is_replayed_under_multifactor_priority(singles):
    rp = replayed(singles, "fair_share")
    assert rp["assumed"][0] == "priority.PriorityType=priority/multifactor"
    assert {s.split("=")[0] for s in rp["settings"]} == {
        "assoc.llm-pretrain.Shares",
        "assoc.nlp-research.Shares",
    }
    assert (rp["wait_p50_s"], rp["wait_p95_s"]) != (
        {"baseline": rp["wait_p50_s"]["baseline"], "proposal": rp["wait_p50_s"]["baseline"]},
        {"baseline": rp["wait_p95_s"]["baseline"], "proposal": rp["wait_p95_s"]["baseline"]},
    )
    assert_calibrated(rp)


def test_draining_a_node_is_replayed_without_it(singles):
    node = singles.w.nodes[0]
    rp = replayed(singles, "drain")
    assert rp["settings"] == [f"node.{node}.State=DRAIN"]
    assert rp["wait_p95_s"]["proposal"] > rp["wait_p95_s"]["baseline"]
    assert_calibrated(rp)


def test_kinds_the_replay_cannot_express_and_kueue_clusters_carry_no_replay(con):
    idle = rec("idle_cancel_policy", "cluster", {"jobs": 3})
    hint = rec("time_limit", "user=alice", {"time_hint_s": 3600})
    out = with_replayed_deltas(con, facts(), [idle, hint])
    # no deltas: only why, and the recommender's figures as they were
    assert [set(r.evidence["replay"]) for r in out] == [{"not_replayed"}] * 2
    assert [{k: v for k, v in r.evidence.items() if k != "replay"} for r in out] == [
        idle.evidence,
        hint.evidence,
    ]
    assert "--time hint" in out[1].evidence["replay"]["not_replayed"]
    capped = rec("gpu_cap", "account=speech", {"cap_gpus": 8})
    assert with_replayed_deltas(con, facts("kueue"), [capped]) == [capped]


def test_one_baseline_per_cluster_and_a_bounded_number_of_replays(con):
    recs = [
        rec("gpu_cap", "account=speech", {"cap_gpus": 8 + i}, gain=float(i))
        for i in range(MAX_PROPOSALS + 2)
    ]
    out = with_replayed_deltas(con, facts(), recs)
    replays = [r.evidence["replay"] for r in out]
    skipped = [rp for rp in replays if "skipped" in rp]
    # the two smallest expected gains are the ones left out, and say so
    assert len(skipped) == 2 and [r.expected_gain_gpu_h for r in out[:2]] == [0.0, 1.0]
    assert all("skipped" in out[i].evidence["replay"] for i in (0, 1))
    done = [rp for rp in replays if "skipped" not in rp]
    assert len({repr(rp["calibration"]) for rp in done}) == 1  # one shared baseline


def test_a_lake_without_gpu_nodes_leaves_the_recommendations_as_they_were(tmp_path):
    # a Slurm-only lake (no telemetry, so no `gpus` table): nothing to replay on, no error
    from tests.marts import rows as r

    r.land(tmp_path, "jobs", [r.job("1", 0, 3600, gpus=2)])
    c = connect(tmp_path, require=("jobs",))
    capped = rec("gpu_cap", "account=physics", {"cap_gpus": 8})
    at = dict(zip(("cluster", "target"), (r.CLUSTER, "slurm"), strict=True))
    lake_facts = ClusterFacts(
        **at,
        gpus_total=8,
        window_start=r.at(-60),
        window_end=r.at(7200),
        data_start_e=r.at(0).timestamp(),
        data_end_e=r.at(3600).timestamp(),
    )
    assert with_replayed_deltas(c, lake_facts, [capped]) == [capped]
