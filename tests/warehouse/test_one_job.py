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


@pytest.fixture(scope="module")
def whole_lake(lake):
    """One connection over the whole lake, which the tests only read."""
    con = connect(lake)
    yield con
    con.close()


@pytest.mark.parametrize("job", ["early", "late", "requeued", "running"])
def test_the_report_is_the_whole_lakes(lake, whole_lake, job):
    pruned = load_job_report(connect_job(lake, job, None), job)
    whole = load_job_report(whole_lake, job)

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


@pytest.fixture(scope="module")
def nodes_lake(tmp_path_factory) -> Path:
    """GPU 0 of g001, g002 and g003 sampled every 10 min for 3 days, busy in bursts. `wide`
    held g001 and g003 from 0.5 to 1.5 days; `sharer` shared g001 from day 1 to 2 (its label on
    the samples); `node` held the whole of g002 on day 0 and `running` its GPU 0 from day 2;
    `before` ran on g001 before `wide`; `bare` has a record and no allocation."""
    root = tmp_path_factory.mktemp("nodes")
    times = range(0, int(3 * D), 600)
    bursts = [0.9 if i % 4 == 0 else 0.02 for i, _ in enumerate(times)]
    labels = ["sharer" if D <= t < 2 * D and i % 2 else None for i, t in enumerate(times)]
    samples = [
        *r.samples(times, node="g001", engine_active=bursts, sm_active=0.3, job_id=labels),
        *r.samples(times, node="g002", engine_active=0.6, sm_active=0.7),
        *r.samples(times, node="g003", engine_active=bursts[::-1], sm_active=0.2),
    ]
    jobs = [
        r.job("wide", 0.5 * D, 1.5 * D, gpus=2),
        r.job("sharer", D, 2 * D),
        r.job("node", 0, D, gpus=8),
        r.job("running", 2 * D, None),
        r.job("before", 0, 0.5 * D),
        r.job("bare", D, 1.2 * D),
    ]
    job_gpus = [
        r.job_gpu("wide", 0.5 * D, 1.5 * D, node="g001"),
        r.job_gpu("wide", 0.5 * D, 1.5 * D, node="g003"),
        r.job_gpu("sharer", D, 2 * D, node="g001"),
        r.job_gpu("node", 0, D, node="g002", gpu_index=None, with_uuid=False),
        r.job_gpu("running", 2 * D, None, node="g002"),
        r.job_gpu("before", 0, 0.5 * D, node="g001"),
    ]
    r.build_lake(root, samples=samples, jobs=jobs, job_gpus=job_gpus)
    return root


def samples_read(con) -> tuple[set[str], float, float]:
    """The nodes and the first and last instant (seconds after T0) of the samples whose owners
    the report decides."""
    [(nodes, first, last)] = con.sql(
        "SELECT list(DISTINCT node ORDER BY node), min(ts), max(ts) FROM unowned_samples"
    ).fetchall()
    return set(nodes), (first - r.T0).total_seconds(), (last - r.T0).total_seconds()


@pytest.mark.parametrize(
    ("job", "nodes", "first", "last"),
    [
        ("wide", {"g001", "g003"}, 0.5 * D, 1.5 * D),  # its nodes, within its allocations
        ("sharer", {"g001"}, D, 2 * D),
        ("node", {"g002"}, 0, D),  # a whole node's allocation
        ("running", {"g002"}, 2 * D, 3 * D - 600),  # no end yet: to the end of the data
    ],
)
def test_only_the_samples_on_the_jobs_nodes_in_its_span_are_owned(
    nodes_lake, job, nodes, first, last
):
    con = connect_job(nodes_lake, job)

    assert samples_read(con) == (nodes, first, last)


def test_a_job_without_allocations_owns_no_sample(nodes_lake):
    con = connect_job(nodes_lake, "bare")

    assert con.sql("SELECT count(*) FROM unowned_samples").fetchall() == [(0,)]
    assert load_job_report(con, "bare").diagnosis["diagnosis"] == "unobserved"


@pytest.fixture(scope="module")
def whole_nodes_lake(nodes_lake):
    """One connection over the whole of `nodes_lake`, which the tests only read."""
    con = connect(nodes_lake)
    yield con
    con.close()


@pytest.mark.parametrize("job", ["wide", "sharer", "node", "running", "before", "bare"])
def test_the_bottleneck_on_the_jobs_samples_is_the_whole_lakes(nodes_lake, whole_nodes_lake, job):
    pruned = load_job_report(connect_job(nodes_lake, job), job)
    whole = load_job_report(whole_nodes_lake, job)

    assert pruned.to_dict() == whole.to_dict()
    if job != "bare":
        assert pruned.diagnosis["samples"] > 0
