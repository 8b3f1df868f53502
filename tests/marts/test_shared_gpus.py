"""Shared GPUs (DESIGN §4) on hand-made rows: the exporter reports one row per sharer with the
same device values; the GPU's time and device-level fields are split among the sharers, the
physical GPU counts once, and the jobs are marked `shared` (their figures are estimates)."""

from __future__ import annotations

import pytest

from detectors.bottleneck import diagnose
from tests.marts import rows as r

H = 3600.0
KWH = 3_600_000.0  # J per kWh


def _sharers(times, jobs: list[str], **fields) -> list[dict]:
    """One row per sharer at every time, each carrying its job, with the same device values."""
    return [row for job_id in jobs for row in r.samples(times, job_id=job_id, **fields)]


def test_two_sharers_split_the_gpu_and_are_marked_shared(tmp_path):
    # j1 holds the GPU over [0, 600); j2 shares it over [300, 600) (time-slicing). The exporter
    # reports j1's row alone before 300, then one row per sharer. The counter climbs 300 J per
    # 30 s. The samples at 600 are nobody's.
    alone = r.samples(
        range(0, 300, 30),
        job_id="j1",
        engine_active=0.6,
        energy_j=[300.0 * i for i in range(10)],
        power_w=10.0,
    )
    shared = _sharers(
        range(300, 630, 30),
        ["j1", "j2"],
        engine_active=0.6,
        energy_j=[3000.0 + 300.0 * i for i in range(11)],
        power_w=10.0,
    )
    con = r.build_lake(
        tmp_path,
        samples=alone + shared,
        jobs=[r.job("j1", 0, 600), r.job("j2", 300, 600)],
        job_gpus=[r.job_gpu("j1", 0, 600), r.job_gpu("j2", 300, 600)],
        gpus=[r.gpu()],
    )
    jobs = r.by_job(con)

    j1, j2 = jobs["j1"], jobs["j2"]
    assert j1["observed_gpu_h"] == pytest.approx((300 + 300 / 2) / H)
    assert j2["observed_gpu_h"] == pytest.approx((300 / 2) / H)
    assert j1["effective_gpu_h"] == pytest.approx(0.6 * 450 / H, rel=1e-6)
    assert j2["effective_gpu_h"] == pytest.approx(0.6 * 150 / H, rel=1e-6)
    # means are unchanged by the split (busy, the GPU's power draw); the device's energy is
    # split, so a sharer's energy over its GPU-hours is the GPU's power (it read half of it)
    assert j2["busy_mean"] == pytest.approx(0.6, rel=1e-6)
    assert j1["energy_kwh"] + j2["energy_kwh"] == pytest.approx(6000 / KWH)
    assert j2["energy_kwh"] == pytest.approx(1500 / KWH)
    assert j2["power_w_mean"] == pytest.approx(10.0)
    assert j1["power_w_mean"] == pytest.approx(10.0)
    assert j2["energy_kwh"] * KWH / (j2["observed_gpu_h"] * H) == pytest.approx(10.0)
    assert j1["samples"] == 20 and j2["samples"] == 10  # each sharer's own rows
    assert j1["shared"] and j2["shared"]
    # the GPU counts once: over the shared half it is one GPU allocated, not two
    occupancy = r.fetch(
        con,
        "SELECT epoch(bucket) - epoch(TIMESTAMPTZ '2026-01-01 00:00:00+00') AS t, "
        "gpus_allocated FROM cluster_occupancy ORDER BY bucket",
    )
    assert [round(row["gpus_allocated"], 9) for row in occupancy] == [1.0, 1.0, 0.0][
        : len(occupancy)
    ]
    [day] = r.fetch(con, "SELECT * FROM usage_daily")
    assert day["observed_gpu_h"] == pytest.approx(600 / H)  # the GPU's time, once
    assert day["shared"]


def test_a_job_that_never_shared_is_not_marked(tmp_path):
    con = r.build_lake(
        tmp_path,
        samples=_sharers(range(0, 120, 30), ["j1", "j2"], engine_active=0.5)
        + r.samples(range(0, 120, 30), gpu_index=1, engine_active=0.5),
        jobs=[r.job("j1", 0, 90), r.job("j2", 0, 90), r.job("j3", 0, 90)],
        job_gpus=[
            r.job_gpu("j1", 0, 90),
            r.job_gpu("j2", 0, 90),
            r.job_gpu("j3", 0, 90, gpu_index=1),
        ],
    )
    jobs = r.by_job(con)
    assert jobs["j1"]["shared"] and jobs["j2"]["shared"]
    assert not jobs["j3"]["shared"]
    assert jobs["j3"]["observed_gpu_h"] == pytest.approx(90 / H)
    assert jobs["j1"]["observed_gpu_h"] == pytest.approx(45 / H)


def test_a_duplicated_sharer_row_still_counts_once(tmp_path):
    # j1's row at 30 landed twice (a re-landed batch): still half of each span to each sharer
    rows = _sharers([0, 30, 60, 90], ["j1", "j2"], engine_active=0.5)
    con = r.build_lake(
        tmp_path,
        samples=rows + [rows[1]],
        job_gpus=[r.job_gpu("j1", 0, 90), r.job_gpu("j2", 0, 90)],
    )
    jobs = r.by_job(con)
    assert jobs["j1"]["observed_gpu_h"] == pytest.approx(45 / H)
    assert jobs["j2"]["observed_gpu_h"] == pytest.approx(45 / H)
    assert jobs["j1"]["samples"] == 4


def test_three_sharers_and_a_gap_split_by_three(tmp_path):
    # sharers at 0 and 30, then silence until 200 (> 2 × 30 s): each row stands for 30 s, the
    # rest is unobserved; three jobs get a third of each
    con = r.build_lake(
        tmp_path,
        samples=_sharers([0, 30, 200], ["a", "b", "c"], engine_active=1.0, power_w=30.0),
        job_gpus=[r.job_gpu(j, 0, 100) for j in "abc"],
    )
    jobs = r.by_job(con)
    for job_id in "abc":
        assert jobs[job_id]["observed_gpu_h"] == pytest.approx(20 / H)
        assert jobs[job_id]["energy_kwh"] == pytest.approx(10.0 * 60 / KWH)
        assert jobs[job_id]["shared"]


def test_one_unlabelled_row_under_overlapping_allocations_is_split_among_the_jobs(tmp_path):
    # The exporter reported the GPU once (no per-sharer series): nothing says which job used
    # it, so each sample stands for both, half its time each, as the allocated time is split.
    # (It went whole to the smallest job_id: j1 was observed 90 s on a GPU it held 45 s, and
    # j2 had no telemetry.) Both jobs are marked shared.
    con = r.build_lake(
        tmp_path,
        samples=r.samples([0, 30, 60, 90], engine_active=0.5, power_w=40.0),
        job_gpus=[r.job_gpu("j2", 0, 90), r.job_gpu("j1", 0, 90)],
    )
    jobs = r.by_job(con)
    for job_id in ("j1", "j2"):
        assert jobs[job_id]["observed_gpu_h"] == pytest.approx(45 / H)
        assert jobs[job_id]["alloc_gpu_h"] == pytest.approx(45 / H)
        assert jobs[job_id]["effective_gpu_h"] == pytest.approx(0.5 * 45 / H)
        assert jobs[job_id]["energy_kwh"] == pytest.approx(40.0 * 45 / KWH)
        assert jobs[job_id]["samples"] == 3  # the one at 90 s is past both allocations
        assert jobs[job_id]["shared"]


def test_an_unlabelled_row_carrying_a_job_that_holds_no_allocation_is_split_too(tmp_path):
    # a stale label (a job that no longer holds the GPU) names none of the claimants
    con = r.build_lake(
        tmp_path,
        samples=r.samples([0, 30, 60, 90], job_id="old", engine_active=1.0),
        job_gpus=[r.job_gpu("j1", 0, 120), r.job_gpu("j2", 0, 120)],
    )
    jobs = r.by_job(con)
    assert "old" not in jobs
    assert jobs["j1"]["observed_gpu_h"] == pytest.approx(60 / H)
    assert jobs["j2"]["observed_gpu_h"] == pytest.approx(60 / H)


def test_a_sharer_row_keeps_its_job_through_reattribution_only_where_that_job_holds_the_gpu(
    tmp_path,
):
    # rows stamped j2 where j2 holds no allocation go to the job that does
    con = r.build_lake(
        tmp_path,
        samples=_sharers([0, 30], ["j1", "j2"], engine_active=0.5)
        + r.samples([60, 90], job_id="j2", engine_active=0.5),
        job_gpus=[r.job_gpu("j1", 0, 120), r.job_gpu("j2", 0, 60)],
    )
    jobs = r.by_job(con)
    assert jobs["j2"]["observed_gpu_h"] == pytest.approx(30 / H)  # half of [0, 60)
    assert jobs["j1"]["observed_gpu_h"] == pytest.approx((30 + 60) / H)


def test_an_allocation_naming_its_gpu_by_uuid_alone_holds_only_that_uuids_samples(tmp_path):
    # Two jobs each hold one GPU, their job_gpus rows naming it by UUID and not by index. A
    # row without an index was taken for a whole node: where the samples name only their
    # index, both jobs claimed both GPUs (each observed on the other's GPU, both "shared").
    uuid_only = [
        r.job_gpu("j1", 0, 300) | {"gpu_index": None},
        r.job_gpu("j2", 0, 300, gpu_index=1) | {"gpu_index": None},
    ]
    samples = r.samples(range(0, 300, 30), gpu_index=0, engine_active=0.9) + r.samples(
        range(0, 300, 30), gpu_index=1, engine_active=0.1
    )
    con = r.build_lake(tmp_path / "uuids", samples=samples, job_gpus=uuid_only)
    jobs = r.by_job(con)
    assert jobs["j1"]["observed_gpu_h"] == pytest.approx(300 / H)
    assert jobs["j1"]["effective_gpu_h"] == pytest.approx(0.9 * 300 / H)
    assert jobs["j2"]["effective_gpu_h"] == pytest.approx(0.1 * 300 / H)
    assert not jobs["j1"]["shared"] and not jobs["j2"]["shared"]

    for row in samples:  # samples naming only their index: nothing says which UUID they are
        row["gpu_uuid"] = None
    con = r.build_lake(tmp_path / "indices", samples=samples, job_gpus=uuid_only)
    jobs = r.by_job(con)
    assert jobs["j1"]["observed_gpu_h"] == 0 and jobs["j2"]["observed_gpu_h"] == 0
    assert not jobs["j1"]["shared"] and not jobs["j2"]["shared"]


@pytest.mark.parametrize("labelled", [True, False], ids=["one-row-per-sharer", "one-unlabelled"])
def test_the_bottleneck_signals_split_a_shared_gpu_as_the_marts_do(tmp_path, labelled):
    # j1 holds the GPU over [0, 600), j2 shares it over [300, 600). It is busy 0.9 over the
    # first half and idle over the second: the exporter reports either one row per sharer or
    # one row naming no job. Each job's observed time and busy mean in the bottleneck signals
    # (what the findings' GPU-hours at stake come from) are those of job_usage.
    def busy(t: int) -> float:
        return 0.9 if t < 300 else 0.0

    if labelled:
        samples = r.samples(range(0, 300, 30), job_id="j1", engine_active=0.9) + _sharers(
            range(300, 600, 30), ["j1", "j2"], engine_active=0.0
        )
    else:
        samples = r.samples(range(0, 600, 30), engine_active=[busy(t) for t in range(0, 600, 30)])
    con = r.build_lake(
        tmp_path,
        samples=samples,
        jobs=[r.job("j1", 0, 600), r.job("j2", 300, 600)],
        job_gpus=[r.job_gpu("j1", 0, 600), r.job_gpu("j2", 300, 600)],
        gpus=[r.gpu()],
    )
    jobs = r.by_job(con)
    signals = {row["job_id"]: row for row in diagnose(con, None).to_pylist()}

    assert jobs["j1"]["observed_gpu_h"] == pytest.approx(450 / H)
    for job_id in ("j1", "j2"):
        assert signals[job_id]["observed_h"] == pytest.approx(jobs[job_id]["observed_gpu_h"])
        assert signals[job_id]["busy_mean"] == pytest.approx(jobs[job_id]["busy_mean"], rel=1e-6)
    assert signals["j1"]["busy_mean"] == pytest.approx(0.9 * 300 / 450, rel=1e-6)
