"""§5's failure causes agree with `gpuledger job`: a NODE_FAIL is the node's fault, not the
application's; a hardware event on the job's GPUs before it ended makes it 'hardware'; the runs
before a requeue are lost to 'requeue'; a hung job that hit its time limit is lost to 'hang', not
to the 'scheduler'."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from app.report.week import IsoWeek
from tests.marts import rows as r
from warehouse import layout, queries
from warehouse.connection import connect

H = 3600.0
WEEK = IsoWeek(2024, 9)


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("lake")
    r.land(
        root,
        "findings",
        [
            {
                "cluster": r.CLUSTER,
                "finding_id": "f-hung",
                "detector": "hung_job",
                "severity": "critical",
                "subject_kind": "job",
                "subject_id": "hung",
                "job_id": "hung",
                "detected_ts": r.at(H),
                "message": "hung: GPU_UTIL 100% but SM activity ~0",
            }
        ],
    )
    con = r.build_lake(
        root,
        jobs=[
            r.job("nf", 0, H, state="NODE_FAIL"),  # node failed, no GPU event seen
            r.job("nfx", 0, H, state="NODE_FAIL", user="bob"),  # an XID 79 came first
            r.job("app", 0, H, state="FAILED", user="carol"),
            # requeued after 600 s, then completed: its first run is lost to the requeue
            r.job("rq", 1200, H, requeues=1),
            # requeued after 600 s, then failed: both runs lost, for different causes
            r.job("rqf", 600, H, state="FAILED", requeues=1, user="carol"),
            # hung until its time limit: the hang's doing, not the scheduler's
            r.job("hung", 0, H, state="TIMEOUT", time_limit_s=int(H), user="dave"),
            # an ordinary time limit reached
            r.job("slow", 0, H, state="TIMEOUT", time_limit_s=int(H), user="erin"),
        ],
        job_gpus=[
            r.job_gpu("nf", 0, H, node="g002"),
            r.job_gpu("nfx", 0, H, gpu_index=1),
            r.job_gpu("app", 0, H, node="g003"),
            r.job_gpu("rq", 0, 600, node="g004"),
            r.job_gpu("rq", 1200, H, node="g004"),
            r.job_gpu("rqf", 0, 600, node="g005"),
            r.job_gpu("rqf", 600, H, node="g005"),
            r.job_gpu("hung", 0, H, node="g006"),
            r.job_gpu("slow", 0, H, node="g007"),
        ],
        events=[r.event(600, "xid", 79, gpu_index=1)],
        gpus=[r.gpu(), r.gpu(gpu_index=1), r.gpu("g002"), r.gpu("g003")],
    )
    con.close()
    return root


def by_cause(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    with connect(root) as con:
        frame = queries.run(
            con,
            "report/failures_by_cause",
            cluster=r.CLUSTER,
            week_start_e=WEEK.start.timestamp(),
            week_end_e=WEEK.end.timestamp(),
        )
    return {(row["outcome"], row["cause"]): row for row in frame.to_dicts()}


@pytest.fixture(scope="module")
def causes(lake):
    return by_cause(lake)


def test_a_node_failure_is_not_an_application_fault(causes):
    assert {key: row["jobs"] for key, row in causes.items()} == {
        ("node_fail", "node"): 1,
        ("node_fail", "hardware"): 1,
        ("failed", "application"): 2,
        ("failed", "requeue"): 1,
        ("completed", "requeue"): 1,
        ("timeout", "hang"): 1,
        ("timeout", "scheduler"): 1,
    }


def test_runs_before_a_requeue_are_lost_to_the_requeue_whatever_the_last_run_did(causes):
    assert causes[("completed", "requeue")]["gpu_h_lost"] == pytest.approx(600 / H)
    assert causes[("failed", "requeue")]["gpu_h_lost"] == pytest.approx(600 / H)
    # app's whole hour and rqf's last run (H - 600 s)
    assert causes[("failed", "application")]["gpu_h_lost"] == pytest.approx(2 - 600 / H)


def test_a_job_outcomes_mart_built_before_the_requeue_column_still_counts_failures(
    lake, causes, tmp_path
):
    """Marts an earlier version built (no gpu_h_lost_requeue) until `attribute` rebuilds them:
    the failures of the week still count, with nothing lost to requeues."""
    old = tmp_path / "old"
    shutil.copytree(lake, old)
    for path in layout.table_files(old, "job_outcomes"):
        table = pq.read_table(path)
        pq.write_table(table.drop_columns(["gpu_h_lost_requeue"]), path)

    before = by_cause(old)

    assert (
        before[("node_fail", "node")]["gpu_h_lost"] == causes[("node_fail", "node")]["gpu_h_lost"]
    )
    assert before[("timeout", "hang")]["gpu_h_lost"] == pytest.approx(1.0)
    assert ("completed", "requeue") not in before  # not known: none counted
