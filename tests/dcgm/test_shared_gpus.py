"""A time-sliced GPU scraped from dcgm-exporter, landed, attributed and built into the marts.

GPU A is held by one job (an `hpc_job` label, or a pod) for ten scrapes, then shared with a
second job for ten more: dcgm-exporter copies the device's values to each sharer's series. The
scraper lands one row per sharer there, so DESIGN §4 splits the GPU's time and energy between
them and marks both `shared`; GPU B stays with one job throughout.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from collector.sources.dcgm_exporter.scrape import scrape_exporters
from tests.marts.shared_split import SCRAPES, SHARED_FROM, STEP_S, H, attributed_jobs, sharer_rows
from warehouse.lake import Lake

URL = "http://g001:9400/metrics"
GPU_A = 'gpu="0",UUID="GPU-aaaa",Hostname="g001",modelName="NVIDIA H100 80GB HBM3"'
GPU_B = 'gpu="1",UUID="GPU-bbbb",Hostname="g001",modelName="NVIDIA H100 80GB HBM3"'

# (first job's labels, second job's labels, B's labels, their job ids)
HPC = ('hpc_job="7"', 'hpc_job="8"', 'hpc_job="9"', ("7", "8", "9"))
PODS = (
    'container="main",namespace="team-a",pod="trainer-0"',
    'container="main",namespace="team-a",pod="trainer-1"',
    'container="main",namespace="team-b",pod="solo"',
    ("team-a/trainer-0", "team-a/trainer-1", "team-b/solo"),
)


def exposition(k: int, first: str, second: str, other: str) -> str:
    """Scrape k: 60 % busy, 10 W, the energy counter 300 J (300000 mJ) higher each scrape."""
    series = [(GPU_A, first), (GPU_B, other)]
    if k >= SHARED_FROM:
        series.append((GPU_A, second))
    lines = []
    for name, value in (
        ("DCGM_FI_DEV_GPU_UTIL", "60"),
        ("DCGM_FI_DEV_POWER_USAGE", "10.000000"),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", str(300_000 * k)),
    ):
        lines.append(f"# TYPE {name} gauge")
        lines += [f"{name}{{{gpu},{labels}}} {value}" for gpu, labels in series]
    return "\n".join(lines) + "\n"


def scrape(root: Path, t0: dt.datetime, k: int, labels: tuple) -> None:
    summary = scrape_exporters(
        [URL],
        "della",
        Lake.at(root),
        fetch=lambda url, timeout_s: exposition(k, *labels[:3]),
        clock=lambda: t0 + dt.timedelta(seconds=STEP_S * k),
        span_s=STEP_S,
    )
    assert not summary.failures and summary.skipped == {}


@pytest.mark.parametrize("labels", [HPC, PODS], ids=["hpc_job", "pods"])
def test_a_shared_gpu_is_split_between_its_sharers(labels, read_lake, tmp_path, t0):
    one, two, solo = labels[3]
    for k in range(SCRAPES):
        scrape(tmp_path, t0, k, labels)
    scrape(tmp_path, t0, 15, labels)  # the same scrape landed again replaces itself

    samples = read_lake(tmp_path, "gpu_samples").to_pylist()
    shared = sharer_rows(samples, t0, one, two)
    assert {r["power_w"] for r in shared} == {10.0}  # the device's values on every row
    if labels is PODS:
        assert {(r["job_id"], r["k8s_pod"]) for r in shared} == {
            (one, "trainer-0"),
            (two, "trainer-1"),
        }
    else:
        assert all(r["hpc_job"] == r["job_id"] for r in shared)

    jobs = attributed_jobs(tmp_path, one, two, solo)
    assert jobs[one]["effective_gpu_h"] == pytest.approx(0.6 * 450 / H, rel=1e-6)
    assert jobs[two]["effective_gpu_h"] == pytest.approx(0.6 * 150 / H, rel=1e-6)
    # the device's 10 W while it shared it (its energy is split, as its time)
    assert jobs[two]["power_w_mean"] == pytest.approx(10.0)
    assert (jobs[one]["samples"], jobs[two]["samples"]) == (SCRAPES, SCRAPES - SHARED_FROM)
