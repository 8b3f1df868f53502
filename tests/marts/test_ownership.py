"""Which job owns a sample (DESIGN §4): half-open allocations, merged steps, late records, MIG."""

from __future__ import annotations

import pytest

from tests.marts import rows as r
from warehouse.attribution import AttributionConfig, build_marts
from warehouse.connection import connect

H = 3600.0


def owners(con) -> list[tuple[float, int | None, str | None]]:
    """(seconds after T0, gpu_index, owner) of every sample, in time order."""
    view = "owned_samples"  # the samples with their owners, as the marts read them
    return [
        (row["t"], row["gpu_index"], row["job_id"])
        for row in r.fetch(
            con,
            f"SELECT epoch(ts) - {r.T0_E} AS t, gpu_index, job_id FROM {view} "
            "ORDER BY ts, gpu_index",
        )
    ]


def test_a_sample_at_a_jobs_end_belongs_to_the_next_job_and_one_at_its_start_to_it(tmp_path):
    # Samples every 30 s at 0..270 land before the scheduler's records (job_id null).
    r.land(tmp_path, "gpu_samples", r.samples(range(0, 300, 30), engine_active=0.5))
    assert {job for _, _, job in owners(connect(tmp_path))} == {None}

    # j1 holds the GPU over [60, 180), j2 right after over [180, 240).
    r.land(tmp_path, "job_gpus", [r.job_gpu("j1", 60, 180), r.job_gpu("j2", 180, 240)])
    con = connect(tmp_path)
    assert owners(con) == [
        (0.0, 0, None),
        (30.0, 0, None),
        (60.0, 0, "j1"),  # at start_ts: inside [start, end)
        (90.0, 0, "j1"),
        (120.0, 0, "j1"),
        (150.0, 0, "j1"),
        (180.0, 0, "j2"),  # at j1's end_ts: not j1's, it is j2's start
        (210.0, 0, "j2"),
        (240.0, 0, None),  # at j2's end_ts: nobody's
        (270.0, 0, None),
    ]

    build_marts(con, tmp_path, AttributionConfig())
    usage = r.by_job(con)
    # j1: 4 samples × 30 s = 120 s; allocated 180 - 60 = 120 s.
    assert usage["j1"]["samples"] == 4
    assert usage["j1"]["observed_gpu_h"] == pytest.approx(120 / H)
    assert usage["j1"]["alloc_gpu_h"] == pytest.approx(120 / H)
    # j2: 2 samples × 30 s = 60 s; allocated 240 - 180 = 60 s.
    assert usage["j2"]["samples"] == 2
    assert usage["j2"]["observed_gpu_h"] == pytest.approx(60 / H)
    assert usage["j2"]["alloc_gpu_h"] == pytest.approx(60 / H)


def test_overlapping_steps_of_one_job_on_one_gpu_count_their_union_once(tmp_path):
    con = r.build_lake(
        tmp_path,
        # GPU 0 sampled every 30 s over [0, 600); GPU 1 over [0, 120).
        samples=r.samples(range(0, 600, 30), engine_active=0.5)
        + r.samples(range(0, 120, 30), gpu_index=1, engine_active=0.5),
        jobs=[r.job("j1", 0, 500, gpus=2)],
        job_gpus=[
            r.job_gpu("j1", 0, 200),  # step 0
            r.job_gpu("j1", 100, 300),  # step 1 overlaps step 0 by 100 s
            r.job_gpu("j1", 400, 500),  # step 2, later on the same GPU
            r.job_gpu("j1", 0, 100, gpu_index=1),
        ],
    )
    job = r.by_job(con)["j1"]

    # GPU 0: [0, 200) ∪ [100, 300) ∪ [400, 500) = 300 + 100 = 400 s; GPU 1: 100 s.
    assert job["alloc_gpu_h"] == pytest.approx(500 / H)
    # GPU 0 samples in the union: 0..270 (10) and 420, 450, 480 (3); GPU 1: 0, 30, 60, 90 (4).
    # Each sample once, though two steps cover 120..180; each stands for 30 s, but never past
    # its step's end: 480 stops at 500 and GPU 1's 90 at 100, so 17 × 30 − 10 − 20 = 480 s,
    # never more than the 500 s held.
    assert job["samples"] == 17
    assert job["observed_gpu_h"] == pytest.approx(480 / H)


def test_an_allocation_known_only_by_uuid_covers_only_that_gpu(tmp_path):
    con = r.build_lake(
        tmp_path,
        samples=r.samples([0, 30], gpu_index=0, engine_active=0.5)
        + r.samples([0, 30], gpu_index=1, engine_active=0.5),
        # An exporter-label mapping: the GPU's UUID is known, its index is not.
        job_gpus=[r.job_gpu("j1", 0, 60, gpu_index=1) | {"gpu_index": None}],
    )

    assert owners(con) == [(0.0, 0, None), (0.0, 1, "j1"), (30.0, 0, None), (30.0, 1, "j1")]


def test_a_whole_node_allocation_covers_every_gpu_of_its_node(tmp_path):
    con = r.build_lake(
        tmp_path,
        samples=r.samples([0], gpu_index=0)
        + r.samples([0], gpu_index=1)
        + r.samples([0], node="g002", gpu_index=0),
        job_gpus=[
            r.job_gpu("j1", 0, 60, with_uuid=False, mapping="whole-node") | {"gpu_index": None}
        ],
    )

    view = "owned_samples"  # the samples with their owners, as the marts read them
    got = r.fetch(con, f"SELECT node, gpu_index, job_id FROM {view} ORDER BY node, gpu_index")
    assert got == [
        {"node": "g001", "gpu_index": 0, "job_id": "j1"},
        {"node": "g001", "gpu_index": 1, "job_id": "j1"},
        {"node": "g002", "gpu_index": 0, "job_id": None},
    ]


def test_an_allocation_without_uuid_matches_by_node_and_index(tmp_path):
    con = r.build_lake(
        tmp_path,
        samples=r.samples([0], gpu_index=0) + r.samples([0], gpu_index=1),
        job_gpus=[r.job_gpu("j1", 0, 60, gpu_index=1, with_uuid=False)],
    )

    assert owners(con) == [(0.0, 0, None), (0.0, 1, "j1")]


def test_a_lake_with_samples_but_no_jobs_builds_every_mart(tmp_path):
    r.land(tmp_path, "gpu_samples", r.samples(range(0, 300, 30), engine_active=0.5))
    con = connect(tmp_path)

    counts = build_marts(con, tmp_path, AttributionConfig())

    assert counts["job_usage"] == 0
    assert counts["job_outcomes"] == 0
    assert counts["usage_daily"] == 0
    assert counts["job_gpu_daily"] == 0
    assert r.fetch(con, "SELECT count(*) AS n FROM gpu_job_buckets WHERE job_id IS NULL") == [
        {"n": 1}
    ]
    # One bucket [0, 300): 10 samples × 30 s = 300 s of one GPU, all unallocated.
    assert r.fetch(
        con,
        "SELECT gpus_total, gpus_allocated, gpus_unallocated, gpus_unobserved "
        "FROM cluster_occupancy",
    ) == [
        {"gpus_total": 1.0, "gpus_allocated": 0.0, "gpus_unallocated": 1.0, "gpus_unobserved": 0.0}
    ]


def test_a_lake_with_jobs_but_no_samples_builds_every_mart(tmp_path):
    con = r.build_lake(tmp_path, jobs=[r.job("j1", 0, 3600)], job_gpus=[r.job_gpu("j1", 0, 3600)])

    job = r.by_job(con)["j1"]
    assert job["alloc_gpu_h"] == pytest.approx(1.0)
    assert job["observed_gpu_h"] == 0.0
    assert job["samples"] == 0
    assert r.fetch(con, "SELECT count(*) AS n FROM cluster_occupancy") == [{"n": 0}]
