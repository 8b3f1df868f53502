"""DESIGN §4's definitions, each checked on a few hand-made samples: busy, idle, unknown fields.

The other mart tests cover spans and gaps, energy across resets, MIG and shared GPUs; these are
the definitions that had no test of their own.
"""

from __future__ import annotations

import pytest

from tests.marts import rows as r
from warehouse.attribution import AttributionConfig, build_marts

H = 3600.0
TIMES = [0, 30, 60]  # three 30 s samples; the job holds the GPU over [0, 90)


def one_job(tmp_path, **fields):
    """job_usage of one job on one GPU whose three samples carry `fields`."""
    con = r.build_lake(
        tmp_path,
        samples=r.samples(TIMES, **fields),
        jobs=[r.job("j1", 0, 90)],
        job_gpus=[r.job_gpu("j1", 0, 90)],
    )
    return con, r.by_job(con)["j1"]


# (fields of the three samples, busy, idle)
BUSY_CASES = [
    # engine_active first, whatever the others say
    ({"engine_active": 0.0, "sm_active": 0.9, "gpu_util_pct": 100.0}, 0.0, True),
    # no engine_active: sm_active before GPU_UTIL ("a kernel was running" overstates use)
    ({"sm_active": 0.005, "gpu_util_pct": 100.0}, 0.005, True),
    ({"sm_active": 0.5, "gpu_util_pct": 0.0}, 0.5, False),
    # only GPU_UTIL: busy = pct / 100; 1 % is on the 0.01 line, so not idle
    ({"gpu_util_pct": 0.5}, 0.005, True),
    ({"gpu_util_pct": 1.0}, 0.01, False),
]


@pytest.fixture(scope="module")
def busy_cases(tmp_path_factory):
    """job_usage by job of one lake, built once: case i is job `j<i>` alone on GPU i, its
    three samples carrying that case's fields (the other fields null)."""
    samples, jobs, job_gpus = [], [], []
    for i, (fields, _, _) in enumerate(BUSY_CASES):
        samples += r.samples(TIMES, gpu_index=i, **fields)
        jobs.append(r.job(f"j{i}", 0, 90))
        job_gpus.append(r.job_gpu(f"j{i}", 0, 90, gpu_index=i))
    con = r.build_lake(
        tmp_path_factory.mktemp("busy"), samples=samples, jobs=jobs, job_gpus=job_gpus
    )
    return r.by_job(con)


@pytest.mark.parametrize("case", range(len(BUSY_CASES)))
def test_busy_is_the_first_non_null_of_engine_sm_and_util(busy_cases, case):
    _, busy, idle = BUSY_CASES[case]
    job = busy_cases[f"j{case}"]

    assert job["busy_mean"] == pytest.approx(busy, rel=1e-6)
    assert job["effective_gpu_h"] == pytest.approx(busy * 90 / H, rel=1e-6)
    assert job["idle_gpu_h"] == pytest.approx(90 / H if idle else 0.0)
    assert job["active_gpu_h"] == pytest.approx(0.0 if idle else 90 / H)


def test_the_idle_threshold_is_configurable(tmp_path):
    con, job = one_job(tmp_path, engine_active=0.03)
    assert (job["active_gpu_h"], job["idle_gpu_h"]) == pytest.approx((90 / H, 0.0))

    build_marts(con, tmp_path, AttributionConfig(idle_below=0.05), force=True)
    job = r.by_job(con)["j1"]

    assert (job["active_gpu_h"], job["idle_gpu_h"]) == pytest.approx((0.0, 90 / H))
    assert job["gpus_never_active"] == 1


def test_nvlink_and_pcie_are_null_not_zero_when_the_gpu_reports_neither(tmp_path):
    _, job = one_job(tmp_path, engine_active=0.5)

    assert job["nvlink_gb"] is None
    assert job["pcie_gb"] is None


def test_nvlink_and_pcie_count_the_direction_that_is_reported(tmp_path):
    # 1 GB/s sent over NVLink (received unknown), 0.5 + 0.5 GB/s over PCIe, for 90 s
    _, job = one_job(
        tmp_path, engine_active=0.5, nvlink_tx_bps=1e9, pcie_tx_bps=5e8, pcie_rx_bps=5e8
    )

    assert job["nvlink_gb"] == pytest.approx(90.0)
    assert job["pcie_gb"] == pytest.approx(90.0)
