"""A hand-built Kubernetes lake whose Kueue replay is known by hand, for the recommendations'
evidence (tests/detectors/recommend/test_replayed_kueue.py) and the Policy lab page
(tests/dashboard/test_policy_lab.py).

Cluster `k8s`: ClusterQueues cq-a (namespace team-a) and cq-b (team-b), 4 H100s of nominal
quota each, both in cohort `org` with no borrowing limit, no preemption. Recorded:

    team-a/a1  ann  cq-a  4 GPUs  submitted 00:00  ran 00:00 – 02:00
    team-a/a2  ann  cq-a  4 GPUs  submitted 00:00  ran 00:00 – 02:00  (borrows cq-b's 4)
    team-b/b1  bob  cq-b  4 GPUs  submitted 00:10  ran 02:00 – 03:00  (waited 1 h 50 min)

Capping team-a at 4 GPUs (cq-a's borrowingLimit 0) keeps a2 pending until a1 ends at 02:00,
and admits b1 when it is submitted: b1 waits 0 s instead of 6,600, a2 7,200 s instead of 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.infra.lake_cache import cached_lake
from tests.marts import rows as r

CLUSTER = "k8s"
NODES = ("k8s-g1", "k8s-g2")


def _pod(name: str, user: str, queue: str, submit: float, start: float, end: float) -> r.Row:
    namespace = "team-a" if queue == "cq-a" else "team-b"
    return r.job(
        f"{namespace}/{name}-pod",
        start,
        end,
        cluster=CLUSTER,
        source="kubernetes",
        job_name=f"Job/{name}",
        submit_ts=r.at(submit),
        user=user,
        account=namespace,
        partition=queue,
        gpus=4,
        gpu_type="h100",
    )


def _queue(name: str) -> r.Row:
    return {
        "cluster": CLUSTER,
        "kind": "kueue-clusterqueue",
        "name": name,
        "parent": "org",
        "flavor": "h100",
        "resource": "nvidia.com/gpu",
        "gpu_quota": 4.0,
        "updated_ts": r.at(0),
    }


def build_kueue_lake(root: Path) -> Path:
    """Land the lake above at `root` (jobs, ClusterQueues, the GPU inventory, and a sample
    every 5 minutes per GPU so that the dashboard's marts know the cluster); return `root`."""
    gpus = [r.gpu(node, i) | {"cluster": CLUSTER} for node in NODES for i in range(4)]
    samples = [
        row
        for node in NODES
        for i in range(4)
        for row in r.samples(
            range(0, 3 * 3600, 300), node=node, gpu_index=i, interval_s=300.0, cluster=CLUSTER
        )
    ]
    jobs = [
        _pod("a1", "ann", "cq-a", 0, 0, 7200),
        _pod("a2", "ann", "cq-a", 0, 0, 7200),
        _pod("b1", "bob", "cq-b", 600, 7200, 10800),
    ]
    con = r.build_lake(root, samples=samples, jobs=jobs, gpus=gpus)
    con.close()
    r.land(root, "queues", [_queue("cq-a"), _queue("cq-b")])
    return root


def shared_kueue_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy in a new folder of the lake `build_kueue_lake` makes, built once per test run
    (tests/infra/lake_cache.py): the caller's own, to read or write."""
    into = tmp_path_factory.mktemp("kueue") / "lake"
    return cached_lake(tmp_path_factory, "kueue", build_kueue_lake, into)
