"""Drain-node recommendations on hand-made events and job outcomes, figures by hand."""

from __future__ import annotations

import shlex

import pytest

from detectors.recommend import RecommendConfig, drain_node
from detectors.recommend.config import DrainConfig
from detectors.recommend.recommendation import ClusterFacts
from detectors.recommend.run import recommend
from tests.detectors.recommend.lake import NOW, reading, recs_of
from tests.marts import rows as r

H = 3600.0


def lake(root):
    """g001: XID 79 (fatal) and XID 13 (application) on GPU 0; job f1 (2 GPUs, 1 h) failed.
    g002: 4 of 4 one-GPU jobs of 30 min failed (a lemon). g003..g010: 1 good job each.
    Cluster: 5 failed of 13 jobs."""
    jobs = [r.job("f1", 0, H, gpus=2, state="FAILED")]
    job_gpus = [r.job_gpu("f1", 0, H, gpu_index=i) for i in (0, 1)]
    for i in range(4):
        jobs.append(r.job(f"l{i}", i * H, i * H + 0.5 * H, state="FAILED"))
        job_gpus.append(r.job_gpu(f"l{i}", i * H, i * H + 0.5 * H, node="g002"))
    for n in range(3, 11):
        jobs.append(r.job(f"ok{n}", 0, H))
        job_gpus.append(r.job_gpu(f"ok{n}", 0, H, node=f"g{n:03d}"))
    events = [r.event(600, "xid", 79), r.event(700, "xid", 13)]
    return r.build_lake(root, jobs=jobs, job_gpus=job_gpus, events=events)


@pytest.fixture(scope="module")
def drain_lake(tmp_path_factory):
    """`lake` built once for the tests that only read it (recommend)."""
    root = tmp_path_factory.mktemp("drain")
    lake(root)
    return root


def test_the_node_with_a_fatal_xid_and_the_lemon_are_drained(drain_lake):
    con = reading(drain_lake)
    recs = recs_of(recommend(con, RecommendConfig(), NOW, kinds=("drain_node",)), "drain_node")

    assert [rec["scope"] for rec in recs] == ["node=g001", "node=g002"]
    g001, g002 = recs
    # only XID 79 is hardware (NVIDIA: FATAL); XID 13 is the application's
    assert g001["evidence"]["hw_events"] == 1
    assert g001["evidence"]["hw_event_kinds"] == "xid 79"
    # f1 lost 2 GPUs × 1 h; the cluster loses 4 of its 12 held GPU-h to failures, so 1/3 of
    # g001's 2 held GPU-h would have failed on any node: 2 - 2/3 avoidable
    assert g001["evidence"]["cluster_failed_gpu_h_share"] == pytest.approx(4 / 12)
    assert g001["expected_gain_gpu_h"] == pytest.approx(2.0 - 2 / 3)
    # the shell hands scontrol the whole reason as one argument
    argv = shlex.split(g001["config"])
    assert argv[:6] == ["scontrol", "-M", "della", "update", "NodeName=g001", "State=DRAIN"]
    assert argv[6].startswith("Reason=gpuledger: 1 hardware event: xid 79;")
    assert len(argv) == 7
    # g002: 4 of 4 failed, above 2 × the cluster rate of 5/13; 4 × 0.5 GPU-h lost
    assert g002["evidence"]["node_failure_rate"] == 1.0
    assert g002["evidence"]["cluster_failure_rate"] == pytest.approx(5 / 13, abs=1e-6)
    assert g002["expected_gain_gpu_h"] == pytest.approx(2.0 - 2 / 3)  # 4 × 0.5 h, less 1/3
    assert g002["risk"].startswith("1 GPU out of service")


def test_a_failure_rate_under_the_lemon_ratio_is_not_drained(drain_lake):
    con = reading(drain_lake)
    strict = RecommendConfig(drain=DrainConfig(lemon_ratio=3.0))  # 4 < 3 × 5/13 × 4 = 4.6
    recs = recs_of(recommend(con, strict, NOW, kinds=("drain_node",)), "drain_node")

    assert [rec["scope"] for rec in recs] == ["node=g001"]


def test_a_healthy_cluster_drains_nothing(tmp_path):
    jobs = [r.job(f"ok{n}", 0, H) for n in range(3)]
    con = r.build_lake(
        tmp_path, jobs=jobs, job_gpus=[r.job_gpu(f"ok{n}", 0, H, gpu_index=n) for n in range(3)]
    )

    assert recommend(con, RecommendConfig(), NOW, kinds=("drain_node",)).num_rows == 0


def _critical_ecc_on_g009(root, **times) -> None:
    """Land a critical ECC finding on GPU 0 of node g009, with `times` (detected_ts, span)."""
    ecc = {
        "cluster": r.CLUSTER,
        "finding_id": "f-ecc",
        "detector": "ecc_dbe",
        "severity": "critical",
        "subject_kind": "gpu",
        "subject_id": r.uuid_of("g009", 0),
        "node": "g009",
    }
    r.land(root, "findings", [ecc | times])


def test_a_critical_hardware_finding_drains_its_node_and_kueue_cordons_it(tmp_path):
    root = tmp_path / "lake"
    _critical_ecc_on_g009(root, detected_ts=r.at(H))
    jobs = [r.job("ok", 0, H, source="kubernetes")]
    con = r.build_lake(root, jobs=jobs, job_gpus=[r.job_gpu("ok", 0, H, node="g009")])
    [rec] = recs_of(recommend(con, RecommendConfig(), NOW, kinds=("drain_node",)), "drain_node")

    assert rec["scope"] == "node=g009"
    assert rec["evidence"]["critical_findings"] == 1
    assert rec["expected_gain_gpu_h"] == 0.0  # no job failed there yet
    assert rec["config"].startswith("kubectl cordon g009\n")


@pytest.mark.parametrize("target", ["slurm", "kueue"])
def test_a_reason_with_quotes_and_dollars_stays_one_inert_argument(target):
    """The reason comes from data (event kinds, detector names): the shell must not expand it."""
    reason = 'it\'s "odd"; $(touch /tmp/pwned) `id` 50%'
    facts = ClusterFacts("della", target, 8, r.T0, NOW, r.T0_E, r.T0_E + H)
    lines = drain_node._config(facts, "g001", reason).splitlines()

    argv = shlex.split(lines[-1])
    kept = reason.replace('"', "'")  # scontrol would strip a double quote at the end
    assert argv[-1] in (f"Reason=gpuledger: {kept}", f"gpuledger.io/drain-reason={kept}")


def test_a_node_back_in_service_after_its_hardware_event_is_not_drained(tmp_path):
    """g001: XID 79 at 10 min during job f1 (failed); repaired, it then ran ok1 and ok2 to
    the end. g005: the same XID, and nothing has run there since. (M7)"""
    jobs = [
        r.job("f1", 0, H, state="FAILED"),
        r.job("ok1", 2 * H, 3 * H),
        r.job("ok2", 3 * H, 4 * H),
        r.job("f5", 0, H, state="FAILED"),
    ]
    job_gpus = [
        r.job_gpu("f1", 0, H),
        r.job_gpu("ok1", 2 * H, 3 * H),
        r.job_gpu("ok2", 3 * H, 4 * H),
        r.job_gpu("f5", 0, H, node="g005"),
    ]
    events = [r.event(600, "xid", 79), r.event(600, "xid", 79, node="g005")]
    con = r.build_lake(tmp_path, jobs=jobs, job_gpus=job_gpus, events=events)
    recs = recs_of(recommend(con, RecommendConfig(), NOW, kinds=("drain_node",)), "drain_node")

    assert [rec["scope"] for rec in recs] == ["node=g005"]
    assert recs[0]["evidence"]["healthy_jobs_since_trouble"] == 0


def test_only_a_completed_job_shows_a_node_back_in_service(tmp_path):
    """g001: XID 79 during f1; the jobs since hit their time limit or were cancelled — a hung
    GPU looks like that — so it is still drained."""
    jobs = [
        r.job("f1", 0, H, state="FAILED"),
        r.job("t1", 2 * H, 3 * H, state="TIMEOUT"),
        r.job("c1", 3 * H, 4 * H, state="CANCELLED"),
    ]
    job_gpus = [r.job_gpu("f1", 0, H), r.job_gpu("t1", 2 * H, 3 * H), r.job_gpu("c1", 3 * H, 4 * H)]
    con = r.build_lake(tmp_path, jobs=jobs, job_gpus=job_gpus, events=[r.event(600, "xid", 79)])
    recs = recs_of(recommend(con, RecommendConfig(), NOW, kinds=("drain_node",)), "drain_node")

    assert [rec["scope"] for rec in recs] == ["node=g001"]
    assert recs[0]["evidence"]["healthy_jobs_since_trouble"] == 0


def test_failures_at_the_cluster_rate_are_not_counted_as_avoidable(tmp_path):
    """Ten nodes with 1 h one-GPU jobs, 3 of 8 failed on each: the cluster's rate. g001 also
    had a fatal XID (no healthy job after it): it is drained, but none of its failures would
    have been avoided on another node. (M7)"""
    jobs, job_gpus = [], []
    for n in range(1, 11):
        for i in range(8):
            job_id = f"n{n}j{i}"
            failed = {"state": "FAILED"} if i >= 5 else {}
            jobs.append(r.job(job_id, i * H, (i + 1) * H, **failed))
            job_gpus.append(r.job_gpu(job_id, i * H, (i + 1) * H, node=f"g{n:03d}"))
    events = [r.event(7.5 * H, "xid", 79)]
    con = r.build_lake(tmp_path, jobs=jobs, job_gpus=job_gpus, events=events)
    [rec] = recs_of(recommend(con, RecommendConfig(), NOW, kinds=("drain_node",)), "drain_node")

    assert rec["scope"] == "node=g001"
    assert rec["expected_gain_gpu_h"] == pytest.approx(0.0)
    assert rec["evidence"]["failed_gpu_h"] == pytest.approx(3.0)
    assert rec["evidence"]["failed_gpu_h_at_cluster_rate"] == pytest.approx(3.0)


def test_a_critical_finding_counts_from_what_it_saw_not_from_when_detect_ran(tmp_path):
    """g009: a critical ECC finding covering [0, 10 min), stored by a `detect` run a day
    later; the node has run a job to its end since the fault. (M7)"""
    root = tmp_path / "lake"
    _critical_ecc_on_g009(root, start_ts=r.at(0), end_ts=r.at(600), detected_ts=r.at(24 * H))
    jobs = [r.job("ok", H, 2 * H)]
    con = r.build_lake(root, jobs=jobs, job_gpus=[r.job_gpu("ok", H, 2 * H, node="g009")])

    assert recommend(con, RecommendConfig(), NOW, kinds=("drain_node",)).num_rows == 0


def test_a_critical_finding_stored_by_this_detect_run_counts(tmp_path):
    """The findings a `detect` run stores are stamped with its time, which ends the window its
    recommendations read: the finding counts by the span it covers (it was left out, and a
    node whose only trouble it was not drained)."""
    root = tmp_path / "lake"
    _critical_ecc_on_g009(root, start_ts=r.at(H), end_ts=r.at(H + 600), detected_ts=NOW)
    jobs = [r.job("ok", 0, H)]
    con = r.build_lake(root, jobs=jobs, job_gpus=[r.job_gpu("ok", 0, H, node="g009")])
    [rec] = recs_of(recommend(con, RecommendConfig(), NOW, kinds=("drain_node",)), "drain_node")

    assert rec["scope"] == "node=g009"
    assert rec["evidence"]["critical_findings"] == 1
