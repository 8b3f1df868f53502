"""§5's failure causes agree with `gpuledger job`: a NODE_FAIL is the node's fault, not the
application's; a hardware event on the job's GPUs before it ended makes it 'hardware'."""

from __future__ import annotations

import pytest

from app.report.week import IsoWeek
from tests.marts import rows as r
from warehouse import queries

H = 3600.0
WEEK = IsoWeek(2024, 9)


@pytest.fixture(scope="module")
def causes(tmp_path_factory):
    con = r.build_lake(
        tmp_path_factory.mktemp("lake"),
        jobs=[
            r.job("nf", 0, H, state="NODE_FAIL"),  # node failed, no GPU event seen
            r.job("nfx", 0, H, state="NODE_FAIL", user="bob"),  # an XID 79 came first
            r.job("app", 0, H, state="FAILED", user="carol"),
        ],
        job_gpus=[
            r.job_gpu("nf", 0, H, node="g002"),
            r.job_gpu("nfx", 0, H, gpu_index=1),
            r.job_gpu("app", 0, H, node="g003"),
        ],
        events=[r.event(600, "xid", 79, gpu_index=1)],
        gpus=[r.gpu(), r.gpu(gpu_index=1), r.gpu("g002"), r.gpu("g003")],
    )
    frame = queries.run(
        con,
        "report/failures_by_cause",
        cluster=r.CLUSTER,
        week_start_e=WEEK.start.timestamp(),
        week_end_e=WEEK.end.timestamp(),
    )
    return {(row["outcome"], row["cause"]): row["jobs"] for row in frame.to_dicts()}


def test_a_node_failure_is_not_an_application_fault(causes):
    assert causes == {
        ("node_fail", "node"): 1,
        ("node_fail", "hardware"): 1,
        ("failed", "application"): 1,
    }
