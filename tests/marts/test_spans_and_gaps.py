"""What span of time a sample stands for (DESIGN §4), and how gaps show up in occupancy."""

from __future__ import annotations

import pytest

from tests.marts import rows as r
from warehouse.connection import define_span_views

H = 3600.0


def spans(con) -> list[tuple[float, float, float]]:
    """(seconds after T0, span_s, gap_s) of every sample, in time order."""
    define_span_views(con)
    return [
        (row["t"], row["span_s"], row["gap_s"])
        for row in r.fetch(
            con,
            f"SELECT epoch(ts) - {r.T0_E} AS t, span_s, gap_s FROM sample_spans "
            "ORDER BY ts, span_s",
        )
    ]


def occupancy(con) -> list[tuple[float, float, float, float, float]]:
    """(bucket start after T0, total, allocated, unallocated, unobserved) per bucket."""
    return [
        (
            row["t"],
            row["gpus_total"],
            row["gpus_allocated"],
            row["gpus_unallocated"],
            row["gpus_unobserved"],
        )
        for row in r.fetch(
            con,
            f"SELECT epoch(bucket) - {r.T0_E} AS t, gpus_total, gpus_allocated, "
            "gpus_unallocated, gpus_unobserved FROM cluster_occupancy ORDER BY bucket",
        )
    ]


def test_a_gap_longer_than_twice_the_interval_is_unobserved(tmp_path):
    # interval 30 s; after the sample at 60 nothing comes for 540 s (> 2 × 30 s).
    con = r.build_lake(
        tmp_path,
        samples=r.samples([0, 30, 60, 600, 630], engine_active=0.5),
        jobs=[r.job("j1", 0, 660)],
        job_gpus=[r.job_gpu("j1", 0, 660)],
    )

    assert spans(con) == [
        (0.0, 30.0, 0.0),
        (30.0, 30.0, 0.0),
        (60.0, 30.0, 510.0),  # stands for its interval; 600 - 60 - 30 = 510 s unobserved
        (600.0, 30.0, 0.0),
        (630.0, 30.0, 0.0),  # the last sample stands for its interval
    ]
    job = r.by_job(con)["j1"]
    assert job["observed_gpu_h"] == pytest.approx(150 / H)  # 5 × 30 s
    assert job["alloc_gpu_h"] == pytest.approx(660 / H)  # allocated all along
    # Data spans [0, 660): buckets [0, 300), [300, 600), [600, 660) (clipped to the data).
    assert occupancy(con) == r.approx_rows(
        [
            (0.0, 1.0, 90 / 300, 0.0, 210 / 300),  # 0..90 observed, 90..300 not
            (300.0, 1.0, 0.0, 0.0, 1.0),  # no sample at all: wholly unobserved
            (600.0, 1.0, 60 / 60, 0.0, 0.0),
        ]
    )


def test_a_gap_of_at_most_twice_the_interval_is_observed(tmp_path):
    # Steps of 60 s (exactly 2 × 30 s) and 45 s: each sample stands for until the next one.
    con = r.build_lake(tmp_path, samples=r.samples([0, 60, 105], engine_active=0.5))

    assert spans(con) == [(0.0, 60.0, 0.0), (60.0, 45.0, 0.0), (105.0, 30.0, 0.0)]
    # [0, 135) fully observed and unallocated.
    assert occupancy(con) == [(0.0, 1.0, 0.0, 1.0, 0.0)]


def test_a_gap_just_over_twice_the_interval_is_unobserved(tmp_path):
    con = r.build_lake(tmp_path, samples=r.samples([0, 60.001], engine_active=0.5))

    # 60.001 s > 60 s: the first sample stands for 30 s, 30.001 s are unobserved.
    assert spans(con) == r.approx_rows([(0.0, 30.0, 30.001), (60.001, 30.0, 0.0)])


def test_a_duplicated_sample_stands_for_no_time(tmp_path):
    con = r.build_lake(
        tmp_path,
        samples=r.samples([0, 30, 30, 60], engine_active=0.5),
        job_gpus=[r.job_gpu("j1", 0, 90)],
    )

    # One of the two rows at 30 s stands for 0 s, the other for 30 s.
    assert spans(con) == [
        (0.0, 30.0, 0.0),
        (30.0, 0.0, 0.0),
        (30.0, 30.0, 0.0),
        (60.0, 30.0, 0.0),
    ]
    job = r.by_job(con)["j1"]
    assert job["samples"] == 4
    assert job["observed_gpu_h"] == pytest.approx(90 / H)  # 0..90, not 120 s


@pytest.mark.parametrize("energy", [(130.0, 100.0, 200.0), (100.0, 130.0, 200.0)])
def test_two_readings_of_one_instant_count_its_energy_once_whichever_comes_first(tmp_path, energy):
    # Two rows of one job at 30 s disagree on the counter (100 and 130 J); the 130-J row stands
    # for no time. The sample at 0 s ran to whichever of them the window put first: 0 → 130
    # then 100 → 200 counted 230 J for a counter that rose 200, in one build, and 200 in the
    # next (`attribute --force` on a 1-s lake moved a job's kWh).
    con = r.build_lake(
        tmp_path,
        samples=r.samples([0, 30, 30, 60], engine_active=0.5, energy_j=[0.0, *energy]),
        job_gpus=[r.job_gpu("j1", 0, 90)],
    )

    # (the last sample's step has no next reading and no power: it adds nothing)
    assert r.by_job(con)["j1"]["energy_kwh"] * 3_600_000 == pytest.approx(200.0)


def test_a_span_longer_than_a_bucket_fills_every_bucket_it_covers(tmp_path):
    # Prometheus at a 300 s step with one scrape missed: the sample at 10 s stands for
    # [10, 610), which covers the rest of bucket 0, all of bucket 300 and 10 s of bucket 600.
    con = r.build_lake(
        tmp_path, samples=r.samples([10, 610, 910], interval_s=300.0, engine_active=0.5)
    )

    # Data spans [10, 1210): every bucket fully observed, never more than the one GPU.
    assert occupancy(con) == r.approx_rows(
        [
            (0.0, 1.0, 0.0, 1.0, 0.0),
            (300.0, 1.0, 0.0, 1.0, 0.0),
            (600.0, 1.0, 0.0, 1.0, 0.0),
            (900.0, 1.0, 0.0, 1.0, 0.0),
            (1200.0, 1.0, 0.0, 1.0, 0.0),
        ]
    )


def test_occupancy_counts_gpus_of_the_inventory_that_never_report_as_unobserved(tmp_path):
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 300, 30), engine_active=0.5),
        job_gpus=[r.job_gpu("j1", 0, 150)],
        gpus=[r.gpu(gpu_index=0), r.gpu(gpu_index=1)],
    )

    # GPU 0: 150 s allocated + 150 s unallocated of 300 s; GPU 1 never reports.
    assert occupancy(con) == [(0.0, 2.0, 0.5, 0.5, 1.0)]


def test_a_sample_stands_for_no_time_past_its_owners_allocation(tmp_path):
    # a job's last sample stood for its whole step past the job's end: a 3-minute 8-GPU job
    # showed 0.47 idle GPU-hours of 0.42 allocated (359 of 1,315 demo jobs observed more than
    # they held)
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 600, 30), engine_active=0.0),
        jobs=[r.job("j1", 0, 100)],
        job_gpus=[r.job_gpu("j1", 0, 100)],
    )
    job = r.by_job(con)["j1"]

    assert job["alloc_gpu_h"] == pytest.approx(100 / H)
    # 0, 30, 60 stand for 30 s each; 90 for the 10 s to the allocation's end, not 30
    assert job["observed_gpu_h"] == job["idle_gpu_h"] == pytest.approx(100 / H)
    assert spans(con)[3] == (90.0, 10.0, 20.0)  # the rest of its step is unobserved
    assert spans(con)[4] == (120.0, 30.0, 0.0)  # the unallocated GPU's next sample
    # the GPU's time still adds up: 100 s allocated, 20 s unobserved, 480 s unallocated
    total, allocated, unallocated, unobserved = (
        sum(row[i] * 300 for row in occupancy(con)) for i in (1, 2, 3, 4)
    )
    assert (allocated, unobserved, unallocated) == pytest.approx((100.0, 20.0, 480.0))
    assert total == pytest.approx(600.0)
