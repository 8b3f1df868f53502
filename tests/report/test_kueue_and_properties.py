"""Kueue ClusterQueue shares on a Kubernetes cluster, and properties of the fairness_weekly mart
over random jobs (conservation of GPU-hours across week boundaries)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.report.data import ReportSettings, assemble_report
from app.report.week import IsoWeek
from collector.sources.kubernetes.queues import KUEUE_CLUSTER_QUEUE
from tests.infra.examples import examples
from tests.marts.rows import CLUSTER, T0, at, build_lake, fetch, job, land

HOUR = 3600.0


def queue(name, quota, *, flavor="h100", updated=T0, deleted=False):
    return {
        "cluster": CLUSTER,
        "kind": KUEUE_CLUSTER_QUEUE,  # what the collector lands
        "name": name,
        "flavor": flavor,
        "resource": "nvidia.com/gpu",
        "gpu_quota": quota,
        "weight": 1.0,
        "deleted": deleted,
        "updated_ts": updated,
    }


def test_kueue_queue_usage_against_nominal_quota_share(tmp_path):
    earlier = T0 - dt.timedelta(days=1)
    land(
        tmp_path,
        "queues",
        [
            queue("cq-a", 6),
            queue("cq-a", 2, flavor="a100"),  # a second flavor: cq-a's quota is 8 GPUs
            queue("cq-b", 2, updated=earlier),  # superseded by the version below
            queue("cq-b", 8),
            queue("cq-c", 16, deleted=True),  # gone: no entitlement
        ],
    )
    con = build_lake(
        tmp_path,
        jobs=[
            job("ns/k1", 0, 3 * HOUR, gpus=2, partition="cq-a"),
            job("ns/k2", 0, 2 * HOUR, gpus=1, partition="cq-b"),
        ],
    )
    report = assemble_report(con, CLUSTER, IsoWeek.of(T0.date()), ReportSettings(), T0)
    got = {r["queue"]: r for r in report.tables["kueue_queues"].to_dicts()}
    assert set(got) == {"cq-a", "cq-b"}
    assert got["cq-a"]["gpu_quota"] == 8 and got["cq-b"]["gpu_quota"] == 8
    assert got["cq-a"]["quota_share"] == pytest.approx(0.5)
    assert got["cq-a"]["alloc_gpu_h"] == pytest.approx(6.0)
    assert got["cq-a"]["usage_share"] == pytest.approx(0.75)
    assert got["cq-a"]["usage_ratio"] == pytest.approx(1.5)
    assert got["cq-b"]["usage_ratio"] == pytest.approx(0.5)


WEEK_S = 7 * 86400.0
jobs_strategy = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),  # account
        st.floats(-10 * 86400, 10 * 86400),  # start, seconds after T0 (a Friday)
        st.floats(60, 9 * 86400),  # duration: up to more than a week
        st.integers(1, 8),  # GPUs
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=examples(8, check=2),  # each example builds a lake (~0.3 s)
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(jobs=jobs_strategy)
def test_weeks_conserve_every_allocated_gpu_hour_and_shares_sum_to_one(tmp_path_factory, jobs):
    root = tmp_path_factory.mktemp("lake")
    rows = [
        job(
            f"j{i}", start, start + duration, account=account, gpus=gpus, submit_ts=at(start - 60)
        )  # fmt: skip
        for i, (account, start, duration, gpus) in enumerate(jobs)
    ]
    con = build_lake(root, jobs=rows)
    expected = sum(gpus * duration for _, _, duration, gpus in jobs) / HOUR
    weekly = fetch(con, "SELECT * FROM fairness_weekly WHERE level = 'account'")
    assert sum(r["alloc_gpu_h"] for r in weekly) == pytest.approx(expected, rel=1e-6)
    users = fetch(con, "SELECT * FROM fairness_weekly WHERE level = 'user'")
    assert sum(r["alloc_gpu_h"] for r in users) == pytest.approx(expected, rel=1e-6)
    by_week: dict[dt.date, float] = {}
    for r in weekly:
        assert r["week"].weekday() == 0  # Mondays
        by_week[r["week"]] = by_week.get(r["week"], 0.0) + (r["usage_share"] or 0.0)
        assert r["alloc_gpu_h"] <= WEEK_S / HOUR * 8 * len(jobs) + 1e-6
    assert all(total == pytest.approx(1.0) for total in by_week.values() if total)
    # Every job that started is counted once, in the week it started, with its wait (60 s).
    started = sum(r["jobs_started"] for r in weekly)
    assert started == len(jobs)
    assert all(r["wait_p50_s"] in (None, pytest.approx(60.0)) for r in weekly)
