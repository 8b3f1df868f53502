"""The policy lab's replay against the real Slurm 22.05: does it start the jobs when Slurm did,
and does a what-if predict what Slurm then does under the change?

A workload of 64 jobs (three users in two accounts with unequal shares, 1–8 GPUs of a type,
limits of 1–3 minutes that make backfill matter, a burst that queues, then a second wave, jobs
ending well before their limits and four cancelled) runs through the test cluster under
`priority/multifactor` (fair-share weight 10000) and `sched/backfill`. It is collected with
`collect slurm` and `collect slurm-config` and replayed; the replay must start each job near
when Slurm did (median |Δstart| ≤ 60 s, the issue's target) and start the same jobs.

The issue's other targets — start-order rank correlation ≥ 0.9 and mean wait per account within
15 % — are not met yet (measured 0.43–0.70 and 2–33 % on this machine): they are printed
(`-s`), not asserted, and docs/policy-lab.md gives the figures. The what-if run under a
`sacctmgr` GPU cap was measured by hand the same way (docs/policy-lab.md). The cluster's other
jobs (the collector tests' gated ones) are cancelled first, so the machine is the workload's
alone.
"""

from __future__ import annotations

import datetime as dt
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from collector.sources.slurm.collect import collect_slurm, run_command
from collector.sources.slurm.config import collect_slurm_config
from detectors.replay.engine import Outcome, Workload, replay
from detectors.replay.metrics import calibrate
from detectors.replay.policy import Policy, apply_settings
from detectors.replay.workload import load_workload, recorded_settings
from tests.slurm_live.cluster import CLUSTER, SlurmCluster
from warehouse.connection import connect
from warehouse.lake import Lake

pytestmark = [pytest.mark.slow, pytest.mark.live, pytest.mark.timeout(1500)]

USERS = (("alice", "research"), ("bob", "ml"), ("carol", "ml"), ("carol", "research"))


@dataclass(frozen=True)
class Spec:
    user: str
    account: str
    gres: str
    minutes: int
    sleep_s: int
    at_s: float  # when to submit, from the start of the run
    cancel_after_s: float | None  # cancel this long after submitting (pending or running)


def plan(seed: int = 7) -> list[Spec]:
    rng = random.Random(seed)
    specs = []
    for i in range(64):
        user, account = USERS[rng.randrange(len(USERS))]
        gpus = rng.choices((1, 2, 4, 8), weights=(40, 25, 25, 10))[0]
        kind = "h100" if gpus == 8 or rng.random() < 0.6 else "a100"
        minutes = rng.choice((1, 2, 3))
        sleep_s = rng.randint(4, 16)
        at_s = 0.0 if i < 48 else 45.0  # a burst that queues, then a second wave
        cancel = 20.0 if i in (5, 17, 33, 50) else None
        specs.append(Spec(user, account, f"gpu:{kind}:{gpus}", minutes, sleep_s, at_s, cancel))
    return specs


def clear(c: SlurmCluster) -> None:
    """Every job of the session gone: gated ones released, the rest cancelled."""
    for user in ("alice", "bob", "carol"):
        c.run("scancel", f"--user={user}")
    c.wait_for("the queue to empty", lambda: not c.run("squeue", "-h").strip(), timeout=120)


def run_workload(c: SlurmCluster, specs: list[Spec]) -> tuple[list[str], float]:
    """Submit `specs` on their schedule, cancel those to cancel, wait until all have ended."""
    t0 = time.time()
    ids: list[str] = [""] * len(specs)
    cancels: list[tuple[float, str]] = []
    for when in sorted({s.at_s for s in specs}):
        while time.time() - t0 < when:
            time.sleep(0.2)
        for i, s in enumerate(specs):
            if s.at_s != when:
                continue
            ids[i] = c.submit(
                s.user, f"--account={s.account}", f"--gres={s.gres}", f"--time={s.minutes}",
                "--job-name=replay", wrap=f"sleep {s.sleep_s}",
            )  # fmt: skip
            if s.cancel_after_s is not None:
                cancels.append((time.time() + s.cancel_after_s, ids[i]))
    for at, job in sorted(cancels):
        time.sleep(max(0.0, at - time.time()))
        c.run("scancel", job)
    left = [""]
    stuck: list[set[str]] = []

    def ended() -> bool:
        """Every job ended, or nothing runs and what is left waits on an account GPU cap it is
        larger than (held for good: seen so twice, 5 s apart)."""
        left[0] = c.run("squeue", "-h", "-o", "%i %T %r")
        rows = [line.split() for line in left[0].splitlines() if line.strip()]
        held = {r[0] for r in rows if r[1] == "PENDING" and r[2].startswith("AssocGrpGRES")}
        if len(held) < len(rows):
            stuck.clear()
            return False
        stuck.append(held)
        if not held or (len(stuck) >= 2 and stuck[-1] == stuck[-2]):
            for job in held:
                c.run("scancel", job)
            return True
        time.sleep(5)
        return False

    try:
        c.wait_for("the workload to end", ended, timeout=600)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; still queued:\n{left[0]}") from None
    return ids, t0


def collect(c: SlurmCluster, lake: Path) -> None:
    time.sleep(2)  # slurmctld sends the last ends to slurmdbd
    c.settled_sacct("-S", "now-1hours")
    collect_slurm(Lake.at(lake), CLUSTER)
    collect_slurm_config(Lake.at(lake), CLUSTER, run_command, dt.datetime.now(dt.UTC))


def replayed(lake: Path, since: float, changes: list[str]) -> tuple[Workload, Outcome]:
    con = connect(lake)
    w = load_workload(con, CLUSTER, dt.datetime.fromtimestamp(since - 1, dt.UTC))
    policy = apply_settings(Policy(), recorded_settings(con, CLUSTER))
    return w, replay(w, apply_settings(policy, changes))


def index_of(w: Workload, ids: list[str]) -> np.ndarray:
    at = {job: i for i, job in enumerate(w.job_id)}
    return np.array([at[j] for j in ids])


def mean_wait_by_account(accounts: list[str], waits: np.ndarray) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for a, wait in zip(accounts, waits, strict=True):
        if wait == wait:
            out.setdefault(a, []).append(float(wait))
    return {a: statistics.mean(v) for a, v in out.items()}


@pytest.fixture(scope="module")
def run(slurm_cluster: SlurmCluster, tmp_path_factory):
    c = slurm_cluster
    c.start()
    c.jobs_dir.mkdir(mode=0o1777, exist_ok=True)
    clear(c)
    lake = tmp_path_factory.mktemp("replay") / "lake"
    ids, t0 = run_workload(c, plan())
    collect(c, lake)
    return lake, ids, t0


def test_the_replay_of_the_recorded_policy_starts_jobs_when_slurm_did(run):
    lake, ids, t0 = run
    w, out = replayed(lake, t0, [])
    idx = index_of(w, ids)
    c = calibrate(w, out)  # the period holds the workload's jobs only (the queue was emptied)
    real_wait = w.real_start_e[idx] - w.submit_e[idx]
    sim_wait = out.start_e[idx] - w.submit_e[idx]
    accounts = [w.account[i] for i in idx]
    real_by, sim_by = (
        mean_wait_by_account(accounts, real_wait),
        mean_wait_by_account(accounts, sim_wait),
    )
    print(
        f"\nreplay vs Slurm: {c.jobs} jobs started in both ({c.started_only_real} only in Slurm, "
        f"{c.started_only_replay} only in the replay); median |Δstart| "
        f"{c.median_abs_start_s:.1f} s, p90 {c.p90_abs_start_s:.1f} s; rank correlation "
        f"{c.rank_correlation:.3f}; mean wait per account real {real_by} replayed {sim_by}"
    )
    assert len(w.job_id) == len(ids)
    # a job Slurm started near the end of the data may start just after it in the replay
    assert c.started_only_real + c.started_only_replay <= 0.1 * len(ids)
    assert c.median_abs_start_s <= 60
