"""MIG packing on a hand-made lake: profiles, GPU-hours freed and GPUs to convert by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from detectors.recommend import RecommendConfig
from detectors.recommend.config import MigPackingConfig
from detectors.recommend.mig_packing import profile_for, profile_name
from detectors.recommend.run import recommend
from tests.detectors.recommend.lake import NOW, busy_samples, recs_of
from tests.detectors.recommend.shared_lakes import shared_lake
from tests.marts import rows as r

H = 3600.0
H100_MIB = 81559  # gpu_models: NVIDIA H100 80GB HBM3


def lake(root):
    """Over [0, 10 h), on H100s: s1 busy 0.1 with 4000 MiB; s2 busy 0.15 with 9000 MiB;
    big busy 0.9 (not small); pair: 2 GPUs at 0.05 (not a one-GPU job)."""
    samples = (
        busy_samples([(0, 10 * H, 0.1)], gpu_index=0, fb_used_mib=4000.0)
        + busy_samples([(0, 10 * H, 0.15)], gpu_index=1, fb_used_mib=9000.0)
        + busy_samples([(0, 10 * H, 0.9)], gpu_index=2, fb_used_mib=2000.0)
        + busy_samples([(0, 10 * H, 0.05)], gpu_index=3, fb_used_mib=1000.0)
        + busy_samples([(0, 10 * H, 0.05)], gpu_index=4, fb_used_mib=1000.0)
    )
    jobs = [r.job(j, 0, 10 * H) for j in ("s1", "s2", "big")] + [r.job("pair", 0, 10 * H, gpus=2)]
    job_gpus = [r.job_gpu(j, 0, 10 * H, gpu_index=i) for i, j in enumerate(("s1", "s2", "big"))]
    job_gpus += [r.job_gpu("pair", 0, 10 * H, gpu_index=i) for i in (3, 4)]
    return r.build_lake(root, samples=samples, jobs=jobs, job_gpus=job_gpus)


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    """`lake`, built once per run (test_replayed_kinds.py reads it too): this file's copy."""
    return shared_lake(tmp_path_factory, "mig-packing", lake)


def run(con, **mig):
    config = RecommendConfig(mig_packing=MigPackingConfig(**mig))
    return recs_of(recommend(con, config, NOW, kinds=("mig_packing",)), "mig_packing")


def test_profiles_and_freed_gpu_hours_by_hand(con):
    [rec] = run(con, min_gpu_h=20)
    ev = rec["evidence"]

    # s1: 0.1 <= 1/7 and 4000 × 1.2 <= 81559/8 -> 1g.10gb; s2: 0.15 > 1/7 -> 2g.20gb
    assert ev["candidate_jobs"] == 2
    assert [(p["profile"], p["jobs"]) for p in ev["per_profile"]] == [
        ("1g.10gb", 1),
        ("2g.20gb", 1),
    ]
    # freed: 10 h × 6/7 + 10 h × 5/7
    assert rec["expected_gain_gpu_h"] == pytest.approx(10 * 6 / 7 + 10 * 5 / 7, abs=1e-6)
    # slices held: (10 × 1 + 10 × 2) over 10 h = 3 of 7 at once -> 1 GPU
    assert ev["slice_gpu_h"] == pytest.approx(30.0)
    assert ev["gpus_to_convert"] == 1
    assert (
        "nvidia-smi mig -i 0 -cgi 1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb -C"
        in (rec["config"])
    )
    # the node's existing line is edited (a second NodeName=<node> line is a duplicate)
    assert "Gres=gpu:<model>:<whole GPUs left>,gpu:1g.10gb:7 " in rec["config"]
    assert not [line for line in rec["config"].splitlines() if line.startswith("NodeName=")]
    # a script an operator can paste (docs/recommendations.md): every line that is not a comment
    # is a sacctmgr/scontrol command; the node-side steps are comments (`<node` would be a
    # redirection in bash)
    commands = [line for line in rec["config"].splitlines() if line and not line.startswith("#")]
    assert [c for c in commands if c.split()[0] not in ("sacctmgr", "scontrol")] == []


def test_below_the_gpu_hour_floor_nothing_is_proposed(con):
    assert run(con) == []  # 20 GPU-h of candidates < 24


@pytest.mark.parametrize(
    ("busy", "fb", "total", "g"),
    [
        (0.1, 4000, H100_MIB, 1),
        (0.1, 9000, H100_MIB, 2),  # 10 800 MiB needs two memory slices
        (0.3, 1000, H100_MIB, 3),
        (0.5, 1000, H100_MIB, 4),
        (0.9, 1000, H100_MIB, 7),
        (0.1, 30000, 143771, 3),  # H200: 36 000 MiB fits 3g (4/8 of 140 GiB)
    ],
)
def test_profile_for(busy, fb, total, g):
    assert profile_for(busy, fb, total, 1.2) == g


def test_profile_names_follow_nvidia():
    assert profile_name(1, 1, H100_MIB) == "1g.10gb"
    assert profile_name(3, 4, H100_MIB) == "3g.40gb"
    assert profile_name(1, 1, 143771) == "1g.18gb"
    assert profile_name(1, 1, 40960) == "1g.5gb"


@given(busy=st.floats(0, 1), fb=st.floats(0, 80000), extra=st.floats(0, 1))
def test_a_busier_job_never_needs_a_smaller_slice(busy, fb, extra):
    assert profile_for(min(busy + extra, 1), fb, H100_MIB, 1.2) >= profile_for(
        busy, fb, H100_MIB, 1.2
    )
