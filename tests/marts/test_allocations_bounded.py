"""Allocated GPU time bounded by what the scheduler's records and the inventory allow, on
hand-made rows: a whole-node allocation holds each GPU of its node (so a job holding one of them
by index at once shares it, and the node never has more GPUs allocated than it has); a job
without `job_gpus` rows holds its `gpus` over its run in every mart alike (job_usage,
usage_daily, fairness_weekly, decayed_usage), never more than its cluster's inventory lists; a
negative GPU count is unknown."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.marts import rows as r
from warehouse import queries

H = 3600.0


def totals(con) -> dict[str, float]:
    """The cluster's allocated GPU-seconds as each mart and the fair-share report count them."""
    weekly = r.fetch(con, "SELECT alloc_gpu_h FROM fairness_weekly WHERE level = 'account'")
    decayed = queries.run_arrow(
        con, "report/decayed_usage", cluster=r.CLUSTER, as_of_e=r.T0_E + 10 * H, half_life_s=1e12
    ).to_pylist()
    return {
        "job_usage": sum(row["alloc_gpu_h"] for row in r.by_job(con).values()) * H,
        "usage_daily": sum(
            row["alloc_gpu_h"] for row in r.fetch(con, "SELECT alloc_gpu_h FROM usage_daily")
        )
        * H,
        "fairness_weekly": sum(row["alloc_gpu_h"] for row in weekly) * H,
        "decayed_usage": sum(row["alloc_gpu_h"] for row in decayed if row["level"] == "account")
        * H,
    }


def test_a_whole_node_allocation_shares_the_gpus_other_jobs_hold_by_index(tmp_path):
    # a 2-GPU node: "w" holds it whole over [0, 3600) while "a" holds GPU 0 over [0, 3000) and
    # "b" GPU 1 over [600, 3600): 2 GPU-hours at most were allocated there
    whole = r.job_gpu("w", 0, 3600, with_uuid=False) | {"gpu_index": None, "mapping": "whole-node"}
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 3600, 30), gpu_index=0, engine_active=0.5)
        + r.samples(range(0, 3600, 30), gpu_index=1, engine_active=0.5),
        jobs=[r.job("a", 0, 3000), r.job("b", 600, 3600), r.job("w", 0, 3600, gpus=2)],
        job_gpus=[r.job_gpu("a", 0, 3000), r.job_gpu("b", 600, 3600, gpu_index=1), whole],
        gpus=[r.gpu(), r.gpu(gpu_index=1)],
    )
    alloc = {job: row["alloc_gpu_h"] * H for job, row in r.by_job(con).items()}
    # GPU 0: [0, 3000) a and w half each, [3000, 3600) w; GPU 1: [0, 600) w, then b and w
    assert alloc == pytest.approx({"a": 1500.0, "b": 1500.0, "w": 1500.0 + 600 + 600 + 1500})
    assert all(row["shared"] for row in r.by_job(con).values())  # estimates, and said so
    assert totals(con) == pytest.approx(dict.fromkeys(totals(con), 2 * H))


def test_an_event_on_any_gpu_of_a_node_held_whole_hits_its_job(tmp_path):
    # an XID naming no GPU index, and a double-bit ECC error on an index the inventory lacks
    whole = r.job_gpu("w", 0, 3600, with_uuid=False) | {"gpu_index": None, "mapping": "whole-node"}
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 3600, 30)) + r.samples(range(0, 3600, 30), gpu_index=1),
        jobs=[r.job("w", 0, 3600, gpus=2, state="FAILED")],
        job_gpus=[whole],
        events=[
            r.event(1000, "xid", 79) | {"gpu_index": None},
            r.event(2000, "ecc_dbe", None, gpu_index=5),
        ],
        gpus=[r.gpu(), r.gpu(gpu_index=1)],
    )
    health = queries.run_arrow(con, "detectors/gpu_health_events", since=r.T0).to_pylist()
    assert sorted((row["kind"], row["job_ids"]) for row in health) == [
        ("ecc_dbe", "w"),
        ("xid", "w"),
    ]
    [outcome] = r.fetch(con, "SELECT hw_event_before_end, hw_event_kinds FROM job_outcomes")
    assert outcome == {"hw_event_before_end": True, "hw_event_kinds": "ecc_dbe, xid 79"}


def test_a_whole_node_allocation_on_a_node_the_inventory_does_not_list_is_one_gpu(tmp_path):
    whole = r.job_gpu("w", 0, 3600, with_uuid=False) | {"gpu_index": None, "mapping": "whole-node"}
    con = r.build_lake(tmp_path, jobs=[r.job("w", 0, 3600, gpus=4)], job_gpus=[whole])
    assert r.by_job(con)["w"]["alloc_gpu_h"] == pytest.approx(1.0)


def test_a_job_without_job_gpus_rows_holds_its_gpus_over_its_run_in_every_mart(tmp_path):
    # "a" has its allocation; "x" (2 GPUs, [600, 2400)) and the running "y" (1 GPU, from 1800
    # to the data's end at 3600) have none
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 3600, 30), gpu_index=0, engine_active=0.5),
        jobs=[r.job("a", 0, 3600), r.job("x", 600, 2400, gpus=2), r.job("y", 1800, None)],
        job_gpus=[r.job_gpu("a", 0, 3600)],
        gpus=[r.gpu(), r.gpu(gpu_index=1), r.gpu(gpu_index=2)],
    )
    alloc = {job: row["alloc_gpu_h"] * H for job, row in r.by_job(con).items()}
    assert alloc == pytest.approx({"a": H, "x": 2 * 1800.0, "y": 1800.0})
    assert totals(con) == pytest.approx(dict.fromkeys(totals(con), H + 3600.0 + 1800.0))
    [day] = r.fetch(con, "SELECT jobs FROM usage_daily")
    assert day["jobs"] == 3


def test_a_job_gpus_row_without_a_start_holds_nothing_and_leaves_the_job_its_gpus(tmp_path):
    # another tool's job_gpus row without its start: no interval, so the job holds its gpus
    # over its run as if it had none; an inventory row naming no GPU counts no GPU
    folder = tmp_path / "job_gpus" / f"cluster={r.CLUSTER}" / f"date={r.T0.date()}"
    folder.mkdir(parents=True)
    startless = r.table("job_gpus", [r.job_gpu("x", 0, 3600) | {"start_ts": None}])
    pq.write_table(startless, folder / "other-tool.parquet")
    nameless = r.gpu() | {"gpu_index": None, "gpu_uuid": None}
    con = r.build_lake(tmp_path, jobs=[r.job("x", 0, 3600, gpus=2)], gpus=[nameless])
    assert r.by_job(con)["x"]["alloc_gpu_h"] == pytest.approx(2.0)
    assert totals(con) == pytest.approx(dict.fromkeys(totals(con), 2 * H))


def test_a_job_never_holds_more_gpus_than_its_cluster_has_or_fewer_than_none(tmp_path):
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 3600, 30), gpu_index=0, engine_active=0.5),
        jobs=[r.job("huge", 0, 3600, gpus=100000), r.job("minus", 0, 3600, gpus=-4)],
        gpus=[r.gpu(), r.gpu(gpu_index=1)],
    )
    jobs = r.by_job(con)
    assert jobs["huge"]["alloc_gpu_h"] == pytest.approx(2.0)  # the cluster's 2 GPUs, an hour
    assert jobs["minus"]["gpus"] is None  # unknown, not -4
    assert jobs["minus"]["alloc_gpu_h"] == 0.0
    assert totals(con) == pytest.approx(dict.fromkeys(totals(con), 2 * H))
