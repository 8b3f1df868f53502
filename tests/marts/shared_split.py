"""What both readers' shared-GPU tests check: GPU A (600 s, 6000 J) scraped every STEP_S over
SCRAPES scrapes, held by job `one` alone until scrape SHARED_FROM and shared with job `two` for
the rest, GPU B held by `solo` throughout."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from warehouse.attribution import AttributionConfig, build_marts
from warehouse.connection import connect

H = 3600.0
STEP_S = 30
SCRAPES = 20
SHARED_FROM = 10  # the second job joins GPU A at this scrape


def sharer_rows(samples: list[dict[str, Any]], t0: dt.datetime, one: str, two: str) -> list:
    """Check the landed rows: one per scrape of GPU A while alone (its owner comes from
    job_gpus), one per sharer, carrying it as job_id, while shared; return the shared rows."""
    assert len(samples) == SCRAPES + SHARED_FROM + 2 * (SCRAPES - SHARED_FROM)
    on_a = [r for r in samples if r["gpu_uuid"] == "GPU-aaaa"]
    assert sorted((r["ts"], r["job_id"] or "") for r in on_a) == sorted(
        [(t0 + dt.timedelta(seconds=STEP_S * k), "") for k in range(SHARED_FROM)]
        + [
            (t0 + dt.timedelta(seconds=STEP_S * k), job)
            for k in range(SHARED_FROM, SCRAPES)
            for job in (one, two)
        ]
    )
    return [r for r in on_a if r["job_id"] is not None]


def attributed_jobs(root: Path, one: str, two: str, solo: str) -> dict[str, dict[str, Any]]:
    """Attribute the lake, build the marts, check the split; return job_usage by job."""
    con = connect(root)
    build_marts(con, root, AttributionConfig())
    jobs = {row["job_id"]: row for row in con.sql("SELECT * FROM job_usage").pl().to_dicts()}

    # A: 600 s observed (20 spans of 30 s), 6000 J (19 counter steps of 300 J + 10 W × 30 s).
    # The first job has it alone for 300 s, then each sharer gets half of the last 300 s.
    assert jobs[one]["observed_gpu_h"] == pytest.approx((300 + 150) / H)
    assert jobs[two]["observed_gpu_h"] == pytest.approx(150 / H)
    assert jobs[one]["energy_kwh"] * 3.6e6 == pytest.approx(3000 + 1500)
    assert jobs[two]["energy_kwh"] * 3.6e6 == pytest.approx(1500)
    assert jobs[one]["shared"] and jobs[two]["shared"]
    assert jobs[solo]["observed_gpu_h"] == pytest.approx(600 / H)
    assert jobs[solo]["energy_kwh"] * 3.6e6 == pytest.approx(6000)
    assert not jobs[solo]["shared"]

    # each physical GPU counts once: two GPUs allocated in both 5-minute buckets, not three
    occupancy = con.sql(
        "SELECT gpus_allocated, gpus_active FROM cluster_occupancy ORDER BY bucket"
    ).fetchall()
    assert [tuple(round(v, 9) for v in row) for row in occupancy] == [(2.0, 2.0), (2.0, 2.0)]
    [day] = con.sql("SELECT observed_gpu_h, energy_kwh, shared FROM usage_daily").fetchall()
    assert day[0] == pytest.approx(1200 / H)
    assert day[1] * 3.6e6 == pytest.approx(12_000)
    assert day[2]
    con.close()
    return jobs
