"""A real Slurm for the collector's acceptance tests: started once per session, stopped after.

`slurm_cluster` starts the test cluster from tests/infra/slurm (start_slurm.sh --fresh: an empty
accounting database, so only this session's jobs exist) and stops it at the end, also when a
test failed. Nothing is skipped: without root or the Debian packages (which `make test`
installs) every test here fails with a message saying what is missing. A lock file makes two
test sessions on one machine take turns with the cluster.

`workload` submits the jobs, as three Linux users in two accounts, and waits until each is
in the state the tests need.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator

import pytest

from tests.infra.live import live_service
from tests.slurm_live.cluster import (
    INFRA,
    LOCK_FILE,
    STATE_DIR,
    ClusterError,
    SlurmCluster,
    Workload,
    missing_programs,
)

LOCK_WAIT_S = 420  # within the module's pytest timeout, with the workload's time on top
# The collector must not depend on the host's zone (its runner runs Slurm with TZ=UTC): run the
# cluster and the collector in a zone with a half-hour offset.
HOST_TZ = "America/St_Johns"
# The time-limit job is the slowest part: slurmctld checks limits every 30 s, so a 1-minute
# limit ends the job 60 to 90 s after it started.
TIMEOUT_JOB_WAIT_S = 150


def _take_lock() -> int:
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                pytest.fail(
                    f"another test session has held the live Slurm cluster ({LOCK_FILE}) for "
                    f"{LOCK_WAIT_S} s",
                    pytrace=False,
                )
            time.sleep(1)


@pytest.fixture(scope="session")
@live_service
def slurm_cluster() -> Iterator[SlurmCluster]:
    if os.geteuid() != 0:
        pytest.fail(
            "tests/slurm_live starts a real Slurm (daemons, device nodes, users) and must run "
            "as root, as `make test` does in CI",
            pytrace=False,
        )
    missing = missing_programs()
    if missing:
        pytest.fail(
            f"tests/slurm_live needs a real Slurm; missing programs: {', '.join(missing)}. "
            "Install the Debian packages with `make system-deps` (.ci/install-deps.sh).",
            pytrace=False,
        )
    STATE_DIR.parent.mkdir(parents=True, exist_ok=True)
    lock = _take_lock()
    cluster = SlurmCluster(conf=STATE_DIR / "etc" / "slurm.conf")
    env = pytest.MonkeyPatch()
    env.setenv("TZ", HOST_TZ)
    try:
        try:
            cluster.start(fresh=True)
        except ClusterError as exc:
            pytest.fail(f"could not start the test Slurm ({INFRA}): {exc}", pytrace=False)
        # The collector's own runner (run_command) and the CLI read SLURM_CONF from here.
        env.setenv("SLURM_CONF", str(cluster.conf))
        yield cluster
    finally:
        env.undo()
        try:
            cluster.stop()
        finally:
            os.close(lock)  # closing releases the lock


@pytest.fixture(scope="session")
def workload(slurm_cluster: SlurmCluster) -> Workload:
    c = slurm_cluster
    c.jobs_dir.mkdir(mode=0o1777, exist_ok=True)
    timeout = c.submit("alice", "--job-name=over-time", "--time=1", "--gres=gpu:h100:1",
                       wrap="sleep 300")  # fmt: skip
    multi = c.submit("alice", "--job-name=multi-gpu", "--gres=gpu:h100:2")
    array = c.submit("bob", "--job-name=sweep", "--array=1-3", "--gres=gpu:1", wrap="sleep 2")
    failed = c.submit("carol", "--job-name=crash", "--account=research", "--gres=gpu:1",
                      wrap="srun true; exit 1")  # fmt: skip
    cancelled = c.submit("bob", "--job-name=to-cancel", wrap="sleep 300")
    dbd_gated = c.submit("bob", "--job-name=dbd-gated", "--gres=gpu:a100:2")
    ctld_gated = c.submit("carol", "--job-name=ctld-gated", "--gres=gpu:1", "--cpus-per-task=2")
    running = c.submit("carol", "--job-name=two-node", "--nodes=2", "--gres=gpu:1")
    requeued = c.submit("alice", "--job-name=requeue-me", "--gres=gpu:h100:1")
    for job in (multi, cancelled, dbd_gated, ctld_gated, running, requeued):
        c.wait_state(job, "RUNNING")
    c.run("scancel", cancelled, user="bob")
    # Submitted last, so the GPUs it waits for are already taken.
    pending = c.submit("bob", "--job-name=waits", "--gres=gpu:a100:4")
    tasks = tuple(f"{array}_{i}" for i in (1, 2, 3))
    for task in tasks:
        c.wait_ended(task, "COMPLETED")
    c.wait_ended(failed, "FAILED")
    c.wait_ended(cancelled, "CANCELLED")
    c.wait_state(pending, "PENDING")
    c.wait_ended(timeout, "TIMEOUT", timeout=TIMEOUT_JOB_WAIT_S)
    return Workload(
        timeout=timeout,
        multi=multi,
        array=tasks,
        failed=failed,
        cancelled=cancelled,
        dbd_gated=dbd_gated,
        ctld_gated=ctld_gated,
        running=running,
        pending=pending,
        requeued=requeued,
    )
