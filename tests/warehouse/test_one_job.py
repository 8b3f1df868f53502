"""warehouse.one_job: the views of one job's report read its cluster and days only, and give
the same report as the whole lake."""

from __future__ import annotations

from pathlib import Path

import pytest

from detectors.job_report import load_job_report
from tests.marts import rows as r
from warehouse.connection import connect
from warehouse.errors import EmptyWarehouse
from warehouse.one_job import connect_job

D = 86_400.0


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    """GPU 0 of g001 sampled every 10 min for 10 days. `early` ran on days 0-1, `late` on day
    8; `requeued` ran on day 2 and again on day 6 (two allocations, one record); `running` has
    held GPU 1 since day 7. Another cluster has samples on every day too."""
    root = tmp_path_factory.mktemp("lake")
    times = range(0, int(10 * D), 600)
    samples = r.samples(times, gpu_index=0, engine_active=0.5, sm_active=0.5) + r.samples(
        range(int(7 * D), int(10 * D), 600), gpu_index=1, engine_active=0.9, sm_active=0.9
    )
    jobs = [
        r.job("early", 0, 1.5 * D),
        r.job("late", 8 * D, 8.5 * D),
        r.job("requeued", 6 * D, 6.5 * D),
        r.job("running", 7 * D, None),
    ]
    job_gpus = [
        r.job_gpu("early", 0, 1.5 * D),
        r.job_gpu("late", 8 * D, 8.5 * D),
        r.job_gpu("requeued", 2 * D, 2.5 * D),
        r.job_gpu("requeued", 6 * D, 6.5 * D),
        r.job_gpu("running", 7 * D, None, gpu_index=1),
    ]
    r.build_lake(root, samples=samples, jobs=jobs, job_gpus=job_gpus)
    other = [row | {"cluster": "other", "job_id": None} for row in r.samples(times)]
    r.land(root, "gpu_samples", other, batch_id="other")
    return root


def days_read(con) -> set[int]:
    rows = con.sql("SELECT DISTINCT cluster, CAST(ts AS DATE) AS d FROM gpu_samples").fetchall()
    assert {c for c, _ in rows} == {r.CLUSTER}, "another cluster's samples were read"
    return {(d - r.T0.date()).days for _, d in rows}


@pytest.mark.parametrize(
    ("job", "days"),
    [
        ("early", {0, 1, 2}),  # days 0-1 and a day's margin after
        ("late", {7, 8, 9}),
        ("requeued", {1, 2, 3, 4, 5, 6, 7}),  # from its first run: not the latest record's
        ("running", {6, 7, 8, 9}),  # no end yet: up to the end of the data
    ],
)
def test_only_the_jobs_cluster_and_days_are_read(lake, job, days):
    con = connect_job(lake, job, r.CLUSTER)

    assert days_read(con) == days


@pytest.mark.parametrize("job", ["early", "late", "requeued", "running"])
def test_the_report_is_the_whole_lakes(lake, job):
    pruned = load_job_report(connect_job(lake, job, None), job)
    whole = load_job_report(connect(lake), job)

    assert pruned.to_dict() == whole.to_dict()
    assert pruned.job["samples"]


def test_an_unknown_job_reads_no_samples(lake):
    con = connect_job(lake, "nope")

    assert con.sql("SELECT count(*) FROM gpu_samples").fetchall() == [(0,)]


def test_a_lake_without_jobs_is_empty(tmp_path):
    with pytest.raises(EmptyWarehouse):
        connect_job(tmp_path / "missing", "j")
    with pytest.raises(EmptyWarehouse):
        connect_job(tmp_path, "j")
