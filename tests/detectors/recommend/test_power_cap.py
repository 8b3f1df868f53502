"""Power caps on a hand-made lake: low-activity share and kWh saved by hand."""

from __future__ import annotations

import pytest

from detectors.recommend import RecommendConfig
from detectors.recommend.config import PowerCapConfig
from detectors.recommend.run import recommend
from tests.detectors.recommend.lake import NOW, recs_of
from tests.detectors.recommend.shared_lakes import shared_lake
from tests.marts import rows as r

H = 3600.0


def lake(root):
    """H100s (700 W limit). Partition infer: job i1 on 2 GPUs of g001 for 10 h at SM 0.2 and
    500 W; job i2 on g002 for 2 h at SM 0.8 and 650 W. Partition gpu: job t1 at SM 0.9, 690 W."""
    times = range(0, int(10 * H), 30)
    samples = r.samples(times, gpu_index=0, sm_active=0.2, power_w=500.0)
    samples += r.samples(times, gpu_index=1, sm_active=0.2, power_w=500.0)
    samples += r.samples(range(0, int(2 * H), 30), node="g002", sm_active=0.8, power_w=650.0)
    samples += r.samples(range(0, int(2 * H), 30), node="g003", sm_active=0.9, power_w=690.0)
    jobs = [
        r.job("i1", 0, 10 * H, gpus=2, partition="infer"),
        r.job("i2", 0, 2 * H, partition="infer"),
        r.job("t1", 0, 2 * H),
    ]
    job_gpus = [
        r.job_gpu("i1", 0, 10 * H, gpu_index=0),
        r.job_gpu("i1", 0, 10 * H, gpu_index=1),
        r.job_gpu("i2", 0, 2 * H, node="g002"),
        r.job_gpu("t1", 0, 2 * H, node="g003"),
    ]
    return r.build_lake(root, samples=samples, jobs=jobs, job_gpus=job_gpus)


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    """`lake`, built once per run (test_replayed_kinds.py reads it too): this file's copy."""
    return shared_lake(tmp_path_factory, "power-cap", lake)


def run(con, **power):
    config = RecommendConfig(power_cap=PowerCapConfig(**power))
    return recs_of(recommend(con, config, NOW, kinds=("power_cap",)), "power_cap")


def test_the_low_activity_partition_gets_a_cap_by_hand(con):
    [rec] = run(con)
    ev = rec["evidence"]

    assert rec["scope"] == "partition=infer"
    # cap = 60 % of 700 W = 420 W; i1: 20 of the partition's 22 GPU-h at SM 0.2
    assert ev["cap_w"] == 420
    assert ev["low_activity_share"] == pytest.approx(20 / 22, abs=1e-6)
    # (500 - 420) W × 20 GPU-h = 1.6 kWh
    assert ev["kwh_saved"] == pytest.approx(1.6, rel=1e-6)
    assert ev["nodes"] == ["g001", "g002"]
    assert "pdsh -w g001,g002 nvidia-smi -pl 420" in rec["config"]
    assert rec["risk"].startswith("1 job with SM activity >= 0.3 (2.0 GPU-h)")
    assert rec["expected_gain_gpu_h"] is None


def test_a_lower_cap_saves_more(con):
    [rec] = run(con, cap_frac=0.5)  # 350 W: 150 W × 20 GPU-h = 3 kWh

    assert rec["evidence"]["kwh_saved"] == pytest.approx(3.0, rel=1e-6)


def test_a_busy_partition_is_left_alone(con):
    assert [rec["scope"] for rec in run(con, min_low_share=0.95)] == []
