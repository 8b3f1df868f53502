"""Allocated GPU time on a GPU held by several jobs at once (MPS, time-slicing, shards), on
hand-made rows: `job_gpu_shares` cuts the overlapping intervals at the sharers' starts and ends,
each piece goes to its k jobs in equal parts, and every allocated-time figure (job_usage,
usage_daily, fairness_weekly, decayed_usage) reads it, so the jobs' allocated GPU-hours never
exceed the GPU's own time. A GPU nobody shares keeps its intervals whole."""

from __future__ import annotations

import pytest

from tests.marts import rows as r
from warehouse import queries

H = 3600.0


def shares(con) -> list[tuple]:
    """The rows of job_gpu_shares as (job, start, end, sharers, share), times after T0."""
    return [
        (
            row["job_id"],
            row["start_e"] - r.T0_E,
            row["end_e"] - r.T0_E,
            row["sharers"],
            row["share"],
        )
        for row in r.fetch(
            con, "SELECT * FROM job_gpu_shares ORDER BY device, start_e, job_id, end_e"
        )
    ]


def alloc_s(con) -> dict[str, float]:
    return {job_id: row["alloc_gpu_h"] * H for job_id, row in r.by_job(con).items()}


def test_two_jobs_sharing_part_of_their_time_split_it(tmp_path):
    # a holds GPU 0 over [0, 600), b over [300, 900): [300, 600) is theirs half each
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 900, 30), gpu_index=1, engine_active=0.5),
        jobs=[r.job("a", 0, 600), r.job("b", 300, 900)],
        job_gpus=[r.job_gpu("a", 0, 600), r.job_gpu("b", 300, 900)],
    )
    assert shares(con) == [
        ("a", 0, 300, 1, 1.0),
        ("a", 300, 600, 2, 0.5),
        ("b", 300, 600, 2, 0.5),
        ("b", 600, 900, 1, 1.0),
    ]
    assert alloc_s(con) == pytest.approx({"a": 450.0, "b": 450.0})
    jobs = r.by_job(con)
    assert jobs["a"]["shared"] and jobs["b"]["shared"]  # their allocated time is an estimate
    [day] = r.fetch(con, "SELECT * FROM usage_daily")
    assert day["alloc_gpu_h"] * H == pytest.approx(900.0)  # the GPU's time, once
    assert day["shared"]
    weekly = r.fetch(con, "SELECT alloc_gpu_h FROM fairness_weekly WHERE level = 'account'")
    assert sum(row["alloc_gpu_h"] for row in weekly) * H == pytest.approx(900.0)
    decayed = queries.run_arrow(
        con,
        "report/decayed_usage",
        cluster=r.CLUSTER,
        as_of_e=r.T0_E + 900,
        half_life_s=1e12,
    ).to_pylist()
    by_user = {row["user"]: row["alloc_gpu_h"] * H for row in decayed if row["level"] == "user"}
    assert by_user == pytest.approx({"alice": 900.0})


def test_three_sharers_split_each_piece_by_the_jobs_holding_it(tmp_path):
    con = r.build_lake(
        tmp_path,
        job_gpus=[r.job_gpu("a", 0, 300), r.job_gpu("b", 100, 400), r.job_gpu("c", 200, 300)],
    )
    # pieces: [0, 100) a; [100, 200) a b; [200, 300) a b c; [300, 400) b
    assert alloc_s(con) == pytest.approx(
        {"a": 100 + 50 + 100 / 3, "b": 50 + 100 / 3 + 100, "c": 100 / 3}
    )
    assert sum(alloc_s(con).values()) == pytest.approx(400.0)
    assert [row[3] for row in shares(con) if row[1] == 200] == [3, 3, 3]


def test_one_jobs_overlapping_steps_count_once_beside_a_sharer(tmp_path):
    # a's two steps overlap on GPU 0 ([0, 200) and [100, 300): a holds it over [0, 300));
    # b shares [200, 300) with it
    con = r.build_lake(
        tmp_path,
        job_gpus=[r.job_gpu("a", 0, 200), r.job_gpu("a", 100, 300), r.job_gpu("b", 200, 400)],
    )
    assert alloc_s(con) == pytest.approx({"a": 200 + 50, "b": 50 + 100})
    assert shares(con) == [
        ("a", 0, 200, 1, 1.0),
        ("a", 200, 300, 2, 0.5),
        ("b", 200, 300, 2, 0.5),
        ("b", 300, 400, 1, 1.0),
    ]


def test_mig_instances_of_one_gpu_are_not_sharers(tmp_path):
    con = r.build_lake(
        tmp_path,
        job_gpus=[
            r.job_gpu("a", 0, 300, node="g002", mig_instance=1),
            r.job_gpu("b", 0, 300, node="g002", mig_instance=2),
            r.job_gpu("c", 100, 200, node="g002", mig_instance=2),  # shares instance 2 with b
        ],
    )
    assert alloc_s(con) == pytest.approx({"a": 300.0, "b": 250.0, "c": 50.0})
    jobs = r.by_job(con)
    assert not jobs["a"]["shared"] and jobs["b"]["shared"] and jobs["c"]["shared"]


def test_an_open_allocation_runs_to_the_data_end_and_splits_with_a_closed_sharer(tmp_path):
    # a is still running (end null): it holds GPU 0 up to the end of the data (600, the last
    # sample's span end); b holds it over [100, 1000)
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 600, 30), gpu_index=1, engine_active=0.5),
        jobs=[r.job("a", 0, None, state="RUNNING"), r.job("b", 100, 1000)],
        job_gpus=[r.job_gpu("a", 0, None), r.job_gpu("b", 100, 1000)],
    )
    assert alloc_s(con) == pytest.approx({"a": 100 + 250, "b": 250 + 400})


def test_a_gpu_nobody_shares_keeps_its_intervals_whole(tmp_path):
    # back to back is not sharing; the same GPU with and without its UUID is still one GPU
    con = r.build_lake(
        tmp_path,
        job_gpus=[
            r.job_gpu("a", 0, 300),
            r.job_gpu("b", 300, 600, with_uuid=False),
            r.job_gpu("c", 0, 600, gpu_index=1),
        ],
    )
    assert shares(con) == [
        ("a", 0, 300, 1, 1.0),
        ("b", 300, 600, 1, 1.0),
        ("c", 0, 600, 1, 1.0),
    ]
    jobs = r.by_job(con)
    assert not any(row["shared"] for row in jobs.values())
    intervals = r.fetch(con, "SELECT count(*) AS n FROM job_gpu_intervals")
    assert intervals == [{"n": 3}]


def test_sharers_are_found_whether_or_not_their_rows_carry_the_uuid(tmp_path):
    con = r.build_lake(
        tmp_path,
        job_gpus=[r.job_gpu("a", 0, 300), r.job_gpu("b", 0, 300, with_uuid=False)],
    )
    assert alloc_s(con) == pytest.approx({"a": 150.0, "b": 150.0})


def test_a_shared_gpu_across_midnight_splits_each_day(tmp_path):
    day = 86400
    con = r.build_lake(
        tmp_path,
        jobs=[r.job("a", day - 600, day + 600), r.job("b", day - 300, day + 300, user="bob")],
        job_gpus=[r.job_gpu("a", day - 600, day + 600), r.job_gpu("b", day - 300, day + 300)],
    )
    days = {
        (str(row["date"]), row["user"]): (round(row["alloc_gpu_h"] * H, 6), row["shared"])
        for row in r.fetch(con, "SELECT * FROM usage_daily")
    }
    assert days == {
        ("2024-03-01", "alice"): (300 + 150, True),
        ("2024-03-01", "bob"): (150, True),
        ("2024-03-02", "alice"): (150 + 300, True),
        ("2024-03-02", "bob"): (150, True),
    }


def test_a_nodes_failed_gpu_hours_count_a_shared_gpu_once(tmp_path):
    # two failed jobs time-slice GPU 0 of g001 over [0, 600): the node lost 600 GPU-seconds
    con = r.build_lake(
        tmp_path,
        jobs=[r.job(j, 0, 600, state="FAILED") for j in ("a", "b")],
        job_gpus=[r.job_gpu("a", 0, 600), r.job_gpu("b", 0, 600)],
    )
    [node] = queries.run_arrow(
        con, "recommend/node_health", since=r.at(-3600), until=r.at(3600)
    ).to_pylist()
    assert (node["failed_jobs"], node["failed_gpu_h"] * H) == (2, pytest.approx(600.0))
