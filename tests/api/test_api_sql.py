"""The API's own queries on hand-made rows: usage cut at the window's midnights, last jobs."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.marts import rows as r
from warehouse import queries

H = 3600.0


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    """x1: 2 GPUs from 22:00 on day 1 to 02:00 on day 2 (4 h, 8 GPU-h, busy 0.5 throughout);
    y1: 1 GPU on day 2 from 04:00 to 05:00, user bob, partition debug."""
    root = tmp_path_factory.mktemp("lake")
    span = range(int(22 * H), int(26 * H), 60)
    samples = r.samples(span, gpu_index=0, engine_active=0.5, interval_s=60.0) + r.samples(
        span, gpu_index=1, engine_active=0.5, interval_s=60.0
    )
    samples += r.samples(range(int(28 * H), int(29 * H), 60), gpu_index=2, interval_s=60.0)
    jobs = [
        r.job("x1", 22 * H, 26 * H, gpus=2),
        r.job("y1", 28 * H, 29 * H, user="bob", partition="debug"),
    ]
    job_gpus = [
        r.job_gpu("x1", 22 * H, 26 * H, gpu_index=0),
        r.job_gpu("x1", 22 * H, 26 * H, gpu_index=1),
        r.job_gpu("y1", 28 * H, 29 * H, gpu_index=2),
    ]
    return r.build_lake(root, samples=samples, jobs=jobs, job_gpus=job_gpus)


DAY1 = r.T0.date()
DAY2 = DAY1 + dt.timedelta(days=1)
DAY3 = DAY2 + dt.timedelta(days=1)


def usage(con, group_by: str, start: dt.date, end: dt.date, user: str | None = None) -> dict:
    frame = queries.run(
        con, "api/usage_grouped", group_by=group_by, cluster=None, user=user, start=start, end=end
    )
    return {row["group_value"]: row for row in frame.to_dicts()}


def test_usage_is_cut_at_the_windows_midnights(con):
    day1 = usage(con, "user", DAY1, DAY2)
    day2 = usage(con, "user", DAY2, DAY3)
    both = usage(con, "user", DAY1, DAY3)

    # x1: 2 GPUs × 2 h before midnight, 2 GPUs × 2 h after; effective = busy 0.5 of it
    assert day1["alice"]["alloc_gpu_h"] == pytest.approx(4.0)
    assert day1["alice"]["effective_gpu_h"] == pytest.approx(2.0)
    assert day2["alice"]["alloc_gpu_h"] == pytest.approx(4.0)
    assert both["alice"]["alloc_gpu_h"] == pytest.approx(8.0)
    assert both["alice"]["jobs"] == 1
    assert "bob" not in day1 and day2["bob"]["alloc_gpu_h"] == pytest.approx(1.0)


def test_usage_matches_the_daily_mart(con):
    both = usage(con, "account", DAY1, DAY3)
    daily = r.fetch(con, "SELECT account, sum(alloc_gpu_h) AS h FROM usage_daily GROUP BY 1")

    assert {a: row["alloc_gpu_h"] for a, row in both.items()} == {
        row["account"]: pytest.approx(row["h"]) for row in daily
    }


def test_usage_by_partition_and_for_one_user(con):
    by_partition = usage(con, "partition", DAY1, DAY3)
    bob = usage(con, "partition", DAY1, DAY3, user="bob")

    assert {p: row["alloc_gpu_h"] for p, row in by_partition.items()} == {
        "gpu": pytest.approx(8.0),
        "debug": pytest.approx(1.0),
    }
    assert list(bob) == ["debug"]


def test_jobs_recent_newest_first_within_the_window(con):
    def ids(**params: object) -> list[str]:
        base: dict[str, object] = {
            "cluster": None,
            "user": None,
            "start": r.at(0),
            "end": r.at(48 * H),
            "limit": 10,
        }
        frame = queries.run(con, "api/jobs_recent", **(base | params))
        return frame.get_column("job_id").to_list()

    assert ids() == ["y1", "x1"]
    assert ids(user="alice") == ["x1"]
    assert ids(limit=1) == ["y1"]
    assert ids(start=r.at(27 * H)) == ["y1"]  # x1 ended at 26 h
    assert ids(start=r.at(26 * H)) == ["y1"]  # x1 ended as the window began: none of it
    assert ids(end=r.at(28 * H)) == ["x1"]  # y1 started at 28 h
    assert ids(cluster="other") == []


def test_a_running_jobs_runtime_is_the_job_reports(tmp_path):
    # run: 2 GPUs from 0, its record collected at 2 h, the samples to 1 h; requeued: ran
    # [0, 0.5 h) on GPU 2, then again from 0.75 h. `gpuledger job` says 2 h, and 15 min since
    # the latest start; the list said GPU-hours ÷ GPUs: 1 h, and 0.5 h + 0.25 h
    span = range(0, int(H), 30)
    con = r.build_lake(
        tmp_path,
        samples=r.samples(span, gpu_index=0)
        + r.samples(span, gpu_index=1)
        + r.samples(span, gpu_index=2),
        jobs=[
            r.job("run", 0, None, gpus=2, state="RUNNING", updated_ts=r.at(2 * H)),
            r.job("requeued", 0.75 * H, None, state="RUNNING", updated_ts=r.at(0.5 * H)),
        ],
        job_gpus=[
            r.job_gpu("run", 0, None, gpu_index=0),
            r.job_gpu("run", 0, None, gpu_index=1),
            r.job_gpu("requeued", 0, 0.5 * H, gpu_index=2),
            r.job_gpu("requeued", 0.75 * H, None, gpu_index=2),
        ],
    )
    frame = queries.run(
        con, "api/jobs_recent", cluster=None, user=None, start=r.at(0), end=r.at(48 * H), limit=10
    )
    runtime = dict(frame.select("job_id", "runtime_s").rows())

    assert runtime == {"run": pytest.approx(2 * H), "requeued": pytest.approx(0.25 * H)}


@pytest.fixture(scope="module")
def crossing(tmp_path_factory):
    """z1: 2 GPUs from 22:00 on day 1 to 02:00 on day 2, sampled every 70 s from 22:00: the
    sample at 23:59:00 stands for the 70 s to 00:00:10, 10 s of them on day 2."""
    root = tmp_path_factory.mktemp("crossing")
    span = range(int(22 * H), int(26 * H), 70)
    samples = [
        row
        for gpu in (0, 1)
        for row in r.samples(span, gpu_index=gpu, engine_active=0.5, interval_s=70.0)
    ]
    job_gpus = [r.job_gpu("z1", 22 * H, 26 * H, gpu_index=gpu) for gpu in (0, 1)]
    return r.build_lake(
        root, samples=samples, jobs=[r.job("z1", 22 * H, 26 * H, gpus=2)], job_gpus=job_gpus
    )


def test_a_sample_past_midnight_counts_on_each_day_for_its_part(crossing):
    """Each day holds 2 GPUs × 2 h, observed throughout: neither day's observed time exceeds
    what the job held (counted on the sample's day, day 1 was 4.0056 GPU-h observed of 4)."""
    for start, end in ((DAY1, DAY2), (DAY2, DAY3)):
        [row] = usage(crossing, "user", start, end).values()
        assert row["alloc_gpu_h"] == pytest.approx(4.0)
        assert row["observed_gpu_h"] == pytest.approx(4.0)
        assert row["active_gpu_h"] == pytest.approx(4.0)
        assert row["effective_gpu_h"] == pytest.approx(2.0)
    daily = r.fetch(
        crossing,
        "SELECT date, alloc_gpu_h, observed_gpu_h, active_gpu_h, idle_gpu_h, effective_gpu_h "
        "FROM usage_daily ORDER BY date",
    )
    assert [row["date"] for row in daily] == [DAY1, DAY2]
    for row in daily:
        assert row["observed_gpu_h"] == pytest.approx(row["alloc_gpu_h"]), row
        assert row["active_gpu_h"] == pytest.approx(4.0), row
        assert row["idle_gpu_h"] == pytest.approx(0.0, abs=1e-12), row
        assert row["effective_gpu_h"] == pytest.approx(2.0), row
    [both] = usage(crossing, "user", DAY1, DAY3).values()
    assert both["observed_gpu_h"] == pytest.approx(8.0)
