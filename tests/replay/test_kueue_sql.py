"""The Kueue replay's SQL on hand-made rows: sql/replay/kueue_workloads.sql,
sql/replay/kueue_cluster_queues.sql and sql/replay/cluster_scheduler.sql."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.marts import rows as r
from warehouse import queries
from warehouse.connection import connect

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LATER = dt.datetime(2100, 1, 1, tzinfo=dt.UTC)


def pod(job_id: str, start: float | None, end: float | None, **fields: object) -> r.Row:
    row = r.job(job_id, start if start is not None else 0.0, end, source="kubernetes", **fields)
    if start is None:
        row["start_ts"] = None
    return row


def queue(name: str, updated: float, **fields: object) -> r.Row:
    row: r.Row = {
        "cluster": r.CLUSTER,
        "kind": "kueue-clusterqueue",
        "name": name,
        "updated_ts": r.at(updated),
    }
    row.update(fields)
    return row


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    root = tmp_path_factory.mktemp("kueue-sql")
    submitted = r.at(0)
    r.land(
        root,
        "jobs",
        [
            # a PyTorchJob of two pods (4 GPUs each), both carrying the Workload's creation
            pod(
                "ns/train-master",
                100,
                400,
                job_name="PyTorchJob/train",
                gpus=4,
                submit_ts=submitted,
                partition="cq-a",
                qos="high",
            ),
            pod(
                "ns/train-worker",
                110,
                500,
                job_name="PyTorchJob/train",
                gpus=4,
                submit_ts=submitted,
                partition="cq-a",
                qos="high",
            ),
            # the same Job name submitted again later: a second workload
            pod(
                "ns/train-master-2",
                1000,
                None,
                job_name="PyTorchJob/train",
                gpus=4,
                submit_ts=r.at(900),
                partition="cq-a",
            ),
            # a Job that never started and was cancelled
            pod(
                "ns/eval-x",
                None,
                700,
                job_name="Job/eval",
                gpus_requested=2,
                gpus=None,
                state="CANCELLED",
                submit_ts=r.at(50),
                partition="cq-b",
            ),
            # a Job whose pod failed and was replaced: two generations of 4 GPUs, never 8
            pod(
                "ns/retry-a",
                100,
                300,
                job_name="Job/retry",
                gpus=4,
                state="FAILED",
                submit_ts=r.at(60),
                partition="cq-a",
            ),
            pod(
                "ns/retry-b",
                320,
                600,
                job_name="Job/retry",
                gpus=4,
                submit_ts=r.at(60),
                partition="cq-a",
            ),
            # a pod deleted while pending: its record says CANCELLED, no start, no end
            pod(
                "ns/stuck",
                None,
                None,
                job_name="Job/stuck",
                gpus_requested=4,
                gpus=None,
                state="CANCELLED",
                submit_ts=r.at(30),
                updated_ts=r.at(630),
                partition="cq-a",
            ),
            # a gang admitted together: its worker still unscheduled holds quota beside the
            # master (4 + 4 GPUs, not the master's 4)
            pod(
                "ns/gang-master",
                200,
                None,
                job_name="PyTorchJob/gang",
                gpus=4,
                state="RUNNING",
                submit_ts=r.at(150),
                partition="cq-a",
            ),
            pod(
                "ns/gang-worker",
                None,
                None,
                job_name="PyTorchJob/gang",
                gpus_requested=4,
                gpus=None,
                state="PENDING",
                submit_ts=r.at(150),
                partition="cq-a",
            ),
            # a CPU pod is no GPU workload
            pod("ns/cpu", 0, 10, job_name="Job/cpu", gpus=0),
            # a Slurm job of the same cluster is not a pod
            r.job("12345", 0, 10, gpus=1),
        ],
    )
    r.land(
        root,
        "queues",
        [
            queue(
                "cq-a",
                0,
                parent="org",
                flavor="h100",
                resource="nvidia.com/gpu",
                gpu_quota=8.0,
                gpu_borrowing_limit=2.0,
            ),
            queue(
                "cq-a",
                600,
                parent="org",
                flavor="h100",
                resource="nvidia.com/gpu",
                gpu_quota=12.0,
                gpu_borrowing_limit=2.0,
            ),
            queue("cq-gone", 0, flavor="h100", resource="nvidia.com/gpu", gpu_quota=4.0),
            queue("cq-gone", 600, flavor="h100", resource="nvidia.com/gpu", deleted=True),
            queue("cq-cpu", 0),
            {
                "cluster": r.CLUSTER,
                "kind": "kueue-localqueue",
                "name": "lq",
                "namespace": "ns",
                "parent": "cq-a",
                "updated_ts": r.at(0),
            },
        ],
    )
    with connect(root) as c:
        yield c


def test_pods_of_one_workload_are_one_row(con):
    got = queries.run(con, "replay/kueue_workloads", cluster=r.CLUSTER, since=EPOCH, until=LATER)
    rows = {row["job_id"]: row for row in got.iter_rows(named=True)}
    assert sorted(rows) == [
        "ns/Job/eval",
        "ns/Job/retry",
        "ns/Job/stuck",
        "ns/PyTorchJob/gang",
        "ns/PyTorchJob/train#1",
        "ns/PyTorchJob/train#2",
    ]
    first = rows["ns/PyTorchJob/train#1"]
    # started with its first pod, ended with its last, asks for both pods' GPUs
    assert (first["start_e"], first["end_e"]) == (r.T0_E + 100, r.T0_E + 500)
    assert (first["gpus"], first["pods"], first["partition"], first["qos"]) == (
        8,
        2,
        "cq-a",
        "high",
    )
    second = rows["ns/PyTorchJob/train#2"]
    assert second["end_e"] is None and second["state"] == "RUNNING"
    evaluation = rows["ns/Job/eval"]
    assert evaluation["start_e"] is None and evaluation["gpus"] == 2
    assert evaluation["state"] == "CANCELLED" and evaluation["end_e"] == r.T0_E + 700
    # a failed pod's replacement asks for the same GPUs again, not more (it asked for 8)
    retry = rows["ns/Job/retry"]
    assert (retry["gpus"], retry["pods"], retry["start_e"], retry["end_e"]) == (
        4,
        2,
        r.T0_E + 100,
        r.T0_E + 600,
    )
    # deleted while pending: it left the queue when its record last changed (it waited for
    # good, and held its ClusterQueue's quota for the rest of a replay that admitted it)
    stuck = rows["ns/Job/stuck"]
    assert (stuck["start_e"], stuck["end_e"], stuck["gpus"]) == (None, r.T0_E + 630, 4)
    # admitted together, its pods hold quota together, scheduled or not
    assert (rows["ns/PyTorchJob/gang"]["gpus"], rows["ns/PyTorchJob/gang"]["pods"]) == (8, 2)


def test_a_period_keeps_what_was_running_at_its_start(con):
    got = queries.run(
        con, "replay/kueue_workloads", cluster=r.CLUSTER, since=r.at(450), until=LATER
    )
    rows = {row["job_id"]: row["pinned"] for row in got.iter_rows(named=True)}
    # train#1 ran until 500: pinned; eval was pending until 700; train#2 submitted after
    assert rows == {
        "ns/PyTorchJob/train#1": True,
        "ns/Job/eval": False,
        "ns/PyTorchJob/train#2": False,
        "ns/Job/retry": True,
        "ns/Job/stuck": False,
        "ns/PyTorchJob/gang": True,
    }


def test_the_latest_clusterqueue_rows_and_no_deleted_queue(con):
    got = queries.run(con, "replay/kueue_cluster_queues", cluster=r.CLUSTER)
    rows = got.select("name", "cohort", "flavor", "nominal_quota", "borrowing_limit").rows()
    assert rows == [("cq-a", "org", "h100", 12.0, 2.0), ("cq-cpu", None, None, None, None)]


def test_a_cluster_of_pods_is_a_kueue_cluster(con):
    got = queries.run(con, "replay/cluster_scheduler", cluster=r.CLUSTER).row(0, named=True)
    # ten pods against one Slurm job
    assert (got["jobs"], got["kubernetes_jobs"], got["scheduler"]) == (11, 10, "kueue")
    other = queries.run(con, "replay/cluster_scheduler", cluster="nowhere").row(0, named=True)
    assert other["scheduler"] == "slurm"
