"""The alerter's action against the live Slurm: it cancels only the idle job it was told about.

Each test submits its own job (as alice, no GPU), lets a finding about it escalate through a
real alert cycle (the final notice delivered by a recording channel, then the action due), with
the real SubprocessRunner running the real squeue and scancel on the test cluster. The cluster
is `testcluster` in Slurm; the lake calls it `della` and `alerts.action_clusters` maps it.

Named to run after test_live_collect.py (the folder runs in file order on one worker): that
module's first collection expects only its own workload's jobs in sacct.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import time
from pathlib import Path

import pytest

from app.alerts.actions import SubprocessRunner
from app.alerts.deliver import Channels
from app.alerts.findings import FindingContext
from app.alerts.ledger import LEDGER_FILE, Ledger, StoredMessage
from app.alerts.runner import CycleReport, Seams, run_cycle
from app.alerts.settings import AlertsConfig
from app.config import load_config
from tests.slurm_live.cluster import CLUSTER, SlurmCluster
from warehouse.lake import Lake

pytestmark = [pytest.mark.live, pytest.mark.slow, pytest.mark.timeout(600)]

MIN = dt.timedelta(minutes=1)


class RecordingChannels(Channels):
    """Delivers every message by keeping it (no server): the final notice counts as delivered."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[StoredMessage] = []

    def send(self, msg: StoredMessage) -> None:
        self.sent.append(msg)


def config(tmp_path: Path, action_clusters: str) -> AlertsConfig:
    env = {
        "GPULEDGER_ALERTS_ACTION_ENABLED": "true",
        "GPULEDGER_ALERTS_ACTION_CLUSTERS": action_clusters,
        "GPULEDGER_ALERTS_QUIET_HOURS": "",
        "GPULEDGER_ALERTS_WORKDAYS": "mon,tue,wed,thu,fri,sat,sun",
        "GPULEDGER_ALERTS_EMAIL_DOMAIN": "example.org",
    }
    return load_config(None, environ=env).section(AlertsConfig)


def idle_finding(c: SlurmCluster, job_id: str, lake_cluster: str = "della") -> FindingContext:
    """An idle-job finding about `job_id` as the lake records it (submit time from sacct)."""
    row = c.sacct_job(job_id)
    assert row is not None and row["State"] == "RUNNING", row
    start = dt.datetime.fromtimestamp(int(row["Start"]), dt.UTC)
    return FindingContext(
        cluster=lake_cluster,
        finding_id=f"idle-{job_id}",
        detector="idle_job",
        severity="warn",
        subject_kind="job",
        subject_id=job_id,
        detected_ts=start,
        job_id=job_id,
        job_id_raw=row["JobIDRaw"],
        user=row["User"],
        account=row["Account"],
        start_ts=start,
        job_submit_ts=dt.datetime.fromtimestamp(int(row["Submit"]), dt.UTC),
        job_state="RUNNING",
        gpus=1,
    )


def escalate(tmp_path: Path, cfg: AlertsConfig, f: FindingContext) -> CycleReport:
    """Two cycles: the final notice at 125 idle minutes, then the action 31 minutes later."""
    lake = tmp_path / "lake"
    lake.mkdir()
    channels = RecordingChannels()
    assert f.start_ts is not None
    report = CycleReport()
    for minutes in (125, 156):
        now = f.start_ts + minutes * MIN
        seams = Seams(
            clock=lambda now=now: now,
            sleep=lambda s: None,
            channels=channels,
            run_action=SubprocessRunner(),
            read_findings=lambda lake, since, now: [f],
        )
        report = run_cycle(Lake.at(lake), cfg, seams)
    assert any("Final notice" in m.payload.get("subject", "") for m in channels.sent)
    return report


def ledger_actions(tmp_path: Path) -> list[dict[str, object]]:
    ledger = Ledger.snapshot(tmp_path / "lake" / "_state" / LEDGER_FILE)
    try:
        return ledger.actions()
    finally:
        ledger.close()


@pytest.fixture
def running_job(slurm_cluster: SlurmCluster) -> str:
    c = slurm_cluster
    c.jobs_dir.mkdir(mode=0o1777, exist_ok=True)
    job = c.submit("alice", "--job-name=idle-one")
    c.wait_state(job, "RUNNING")
    yield job
    c.release(job)


def test_an_idle_job_is_cancelled_on_its_own_cluster(slurm_cluster, running_job, tmp_path):
    c = slurm_cluster
    cfg = config(tmp_path, f"della={CLUSTER}")

    report = escalate(tmp_path, cfg, idle_finding(c, running_job))

    c.wait_ended(running_job, "CANCELLED")
    [(action, code, _)] = report.actions
    assert code == 0
    argv = [
        "scancel",
        f"--clusters={CLUSTER}",
        "--user=alice",
        "--state=RUNNING",
        "--",
        running_job,
    ]
    assert list(action.argv) == argv
    [audit] = ledger_actions(tmp_path)
    assert (audit["cluster"], audit["job_id"], audit["returncode"]) == ("della", running_job, 0)


def test_the_same_job_id_recorded_under_another_cluster_is_not_touched(
    slurm_cluster, running_job, tmp_path
):
    c = slurm_cluster
    # the lake has a cluster `other` whose job carries the same id (and user, and submit time);
    # only `della` is mapped to this Slurm: `other` gets its notices but never an action
    cfg = config(tmp_path, f"della={CLUSTER}")
    f = idle_finding(c, running_job, lake_cluster="other")

    report = escalate(tmp_path, cfg, f)

    assert report.actions == []
    assert any("no scheduler endpoint" in why for _, why in report.waiting)
    assert ledger_actions(tmp_path) == []
    assert c.scontrol_jobs()[running_job]["JobState"] == "RUNNING"


def test_a_cluster_mapped_to_an_unknown_slurm_cluster_cancels_nothing(
    slurm_cluster, running_job, tmp_path
):
    c = slurm_cluster
    cfg = config(tmp_path, "della=elsewhere")  # a Slurm cluster the database does not know

    report = escalate(tmp_path, cfg, idle_finding(c, running_job))

    assert report.actions == [] and ledger_actions(tmp_path) == []
    assert any("squeue could not read" in why for _, why in report.waiting)
    assert c.scontrol_jobs()[running_job]["JobState"] == "RUNNING"


def test_a_requeued_job_with_the_same_id_is_not_cancelled(slurm_cluster, running_job, tmp_path):
    c = slurm_cluster
    before = idle_finding(c, running_job)  # what the lake saw of the first run
    node = c.scontrol_jobs()[running_job]["NodeList"]
    c.run("scontrol", "requeue", running_job)
    c.wait_for(
        "the job to wait again", lambda: c.scontrol_jobs()[running_job]["JobState"] == "PENDING"
    )

    # Slurm holds a requeued job back for two minutes (BeginTime) so that its node's slurmd has
    # let the old run go first: a run started before that is killed at once ("Job credential
    # revoked", seen in a CI run). Wait for the node to finish the old run, then let the job
    # start now; the hold can still be set after that (the requeue completes on its own
    # time), so the update is repeated while the job waits for its BeginTime. Its start may
    # then wait for the main scheduler's periodic pass (sched_interval, 60 s).
    def node_done() -> bool:
        state = re.search(r"\bState=(\S+)", c.run("scontrol", "show", "node", node))
        return state is not None and "COMPLETING" not in state.group(1)

    c.wait_for(f"{node} to finish the job's first run", node_done)
    time.sleep(2)
    last_update = [0.0]

    def runs_again() -> bool:
        job = c.scontrol_jobs()[running_job]
        assert job["JobState"] in ("PENDING", "REQUEUED", "CONFIGURING", "RUNNING"), job
        pending_begin = job["JobState"] == "PENDING" and job.get("Reason") == "BeginTime"
        if pending_begin and time.monotonic() - last_update[0] > 5:
            c.run("scontrol", "update", f"jobid={running_job}", "StartTime=now")
            last_update[0] = time.monotonic()
        return job["JobState"] == "RUNNING"

    c.wait_for("the job to run again", runs_again, timeout=240)
    again = c.sacct_job(running_job)
    assert again is not None and int(again["Submit"]) != int(before.job_submit_ts.timestamp())
    cfg = config(tmp_path, f"della={CLUSTER}")

    report = escalate(tmp_path, cfg, before)

    assert report.actions == [] and ledger_actions(tmp_path) == []
    assert any("another job (requeued" in why for _, why in report.waiting)
    assert c.scontrol_jobs()[running_job]["JobState"] == "RUNNING"
    # the same finding with the new run's submit time is acted on: only the re-read stopped it
    after = dataclasses.replace(before, job_submit_ts=dt.datetime.fromtimestamp(
        int(again["Submit"]), dt.UTC))  # fmt: skip
    second = tmp_path / "second"
    second.mkdir()
    assert escalate(second, cfg, after).actions[0][1] == 0
    c.wait_ended(running_job, "CANCELLED")
