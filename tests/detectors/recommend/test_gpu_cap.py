"""GPU caps on hand-made jobs: running GPUs, hours above the cap and waiting jobs by hand."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from detectors.recommend import RecommendConfig
from detectors.recommend.config import GpuCapConfig
from detectors.recommend.gpu_cap import running_gpus
from detectors.recommend.run import recommend
from tests.detectors.recommend.lake import NOW, reading, recs_of
from tests.marts import rows as r

H = 3600.0


def lake(root, source="slurm"):
    """8 GPUs. alice runs three 2-GPU jobs over [0, 2 h); bob's 1-GPU job, submitted at 0,
    starts at 1 h; carol runs one 2-GPU job over [0, 3 h)."""
    jobs = [r.job(f"a{i}", 0, 2 * H, gpus=2) for i in range(3)]
    jobs.append(r.job("b0", H, 2 * H, user="bob", account="chem", submit_ts=r.at(0)))
    jobs.append(r.job("c0", 0, 3 * H, user="carol", account="chem", gpus=2))
    jobs = [j | {"source": source} for j in jobs]
    gpus = [r.gpu(gpu_index=i) for i in range(8)]
    return r.build_lake(root, jobs=jobs, gpus=gpus)


@pytest.fixture(scope="module")
def slurm_lake(tmp_path_factory):
    """`lake` built once per module: the tests only read it (recommend), each through a
    cursor of its own (`reading`)."""
    root = tmp_path_factory.mktemp("lake")
    lake(root)
    return root


def run(con, **cap):
    config = RecommendConfig(gpu_cap=GpuCapConfig(**cap))
    return recs_of(recommend(con, config, NOW, kinds=("gpu_cap",)), "gpu_cap")


def test_the_heavy_user_gets_a_cap_with_figures_by_hand(slurm_lake):
    [rec] = [r for r in run(reading(slurm_lake)) if r["scope"].startswith("user=")]
    ev = rec["evidence"]

    assert rec["scope"] == "user=alice,account=physics"
    # cap = 25 % of 8 GPUs = 2 (her largest job is 2 too); she held 6 for 2 h
    assert ev["cap_gpus"] == 2 and ev["peak_gpus"] == 6
    assert ev["hours_above_cap"] == pytest.approx(2.0)
    assert rec["expected_gain_gpu_h"] == pytest.approx((6 - 2) * 2.0)
    # bob's 1-GPU job waited [0, 1 h) while she was above her cap
    assert ev["other_jobs_waiting_meanwhile"] == 1
    assert ev["other_waiting_gpu_h_meanwhile"] == pytest.approx(1.0)
    # her share: 12 of 12 + 1 + 6 = 19 GPU-h
    assert ev["share_of_cluster_gpu_h"] == pytest.approx(12 / 19, abs=1e-6)
    assert (
        "sacctmgr -i modify user where name=alice account=physics cluster=della "
        "set GrpTRES=gres/gpu=2" in rec["config"]
    )


def test_the_heavy_account_gets_a_cap_with_figures_by_hand(slurm_lake):
    [rec] = [r for r in run(reading(slurm_lake)) if r["scope"].startswith("account=")]
    ev = rec["evidence"]

    # physics (alice alone): 50 % of 8 GPUs = 4; it held 6 for 2 h: 2 × 2 = 4 GPU-h above;
    # chem (bob 1 + carol 2 at most) stays under 4
    assert rec["scope"] == "account=physics"
    assert ev["cap_gpus"] == 4
    assert rec["expected_gain_gpu_h"] == pytest.approx(4.0)
    assert ev["other_jobs_waiting_meanwhile"] == 1
    assert (
        "sacctmgr -i modify account where name=physics cluster=della set GrpTRES=gres/gpu=4"
        in (rec["config"])
    )


def test_a_cap_never_falls_below_the_largest_job(slurm_lake):
    # 10 % of 8 GPUs = 1, but alice's jobs need 2 each
    recs = run(reading(slurm_lake), cap_share=0.1, account_cap_share=0.1)

    assert [rec["evidence"]["cap_gpus"] for rec in recs] == [2, 2]


def test_without_anyone_waiting_there_is_no_cap(slurm_lake):
    assert run(reading(slurm_lake), min_waiting_jobs=2) == []


def test_kueue_gets_a_capped_cluster_queue(tmp_path):
    recs = run(lake(tmp_path, source="kubernetes"))

    assert {rec["target"] for rec in recs} == {"kueue"}
    user = next(rec for rec in recs if rec["scope"].startswith("user="))
    assert "nominalQuota: 2" in user["config"] and "kind: LocalQueue" in user["config"]


def test_kueue_local_queues_go_where_the_users_pods_ran(tmp_path):
    # The probe: alice's pods ran in team-a and team-b (her account, physics, from a label),
    # and the LocalQueue was made in a namespace "physics" that did not exist
    import yaml

    jobs = [
        r.job(f"team-{'ab'[i % 2]}/a{i}", 0, 2 * H, gpus=2, source="kubernetes") for i in range(3)
    ]
    bob = {"user": "bob", "account": "chem", "source": "kubernetes", "submit_ts": r.at(0)}
    jobs.append(r.job("team-c/b0", H, 2 * H, **bob))
    con = r.build_lake(tmp_path, jobs=jobs, gpus=[r.gpu(gpu_index=i) for i in range(8)])
    user = next(rec for rec in run(con) if rec["scope"].startswith("user=alice"))

    queues = [d for d in yaml.safe_load_all(user["config"]) if d and d["kind"] == "LocalQueue"]
    assert [q["metadata"]["namespace"] for q in queues] == ["team-a", "team-b"]


@given(
    spans=st.lists(
        st.tuples(st.integers(0, 100), st.integers(1, 50), st.integers(1, 8)),
        min_size=1,
        max_size=12,
    )
)
def test_running_gpus_integrate_to_the_jobs_gpu_hours(spans):
    jobs = pl.DataFrame(
        {
            "start_e": [float(s) for s, _, _ in spans],
            "end_e": [float(s + d) for s, d, _ in spans],
            "gpus": [g for _, _, g in spans],
        }
    )
    steps = running_gpus(jobs)

    held = ((steps["seg_end_e"] - steps["seg_start_e"]) * steps["running"]).sum()
    assert held == pytest.approx(sum(d * g for _, d, g in spans))
    assert steps["running"].min() >= 0


def test_on_kubernetes_a_node_held_whole_counts_its_gpus(tmp_path):
    # Kubernetes' whole-node job_gpus rows name no GPU, and the lake has no inventory: six
    # 8-GPU nodes counted as six GPUs (the probe's cluster_gpus 6)
    from warehouse import queries

    jobs, job_gpus = [], []
    for n in range(6):
        node = f"node-{n}"
        jobs.append(r.job(f"team-a/pod-{n}", 0, H, gpus=8, nodes=[node], source="kubernetes"))
        job_gpus.append(
            r.job_gpu(f"team-a/pod-{n}", 0, H, node=node, gpu_index=None, with_uuid=False)
            | {"mapping": "whole-node"}
        )
    con = r.build_lake(tmp_path, jobs=jobs, job_gpus=job_gpus)
    facts = queries.run(con, "recommend/cluster_facts", since=r.at(-H), until=r.at(2 * H))

    assert facts["gpus_total"].to_list() == [48]
