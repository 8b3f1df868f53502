"""Property: whatever lands after a build — more days of samples, late scheduler records, an
allocation closed by rewriting its batch (as the Slurm collector does), a job moved to another
account — the marts brought up to date in place equal the marts built from scratch.

Random histories of two GPUs over two to four days (samples every 15 minutes, busy or idle by
hour), with jobs that start and end anywhere, run past the data's end, or have no GPU record.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.infra.examples import examples
from tests.marts import rows as r
from tests.marts.test_incremental import (
    DAY_S,
    assert_same_marts,
    build,
    rebuilt_from_scratch,
    snapshot,
    update,
)

pytestmark = pytest.mark.slow  # many attribute passes: `make test` runs it, `make check` not

STEP_S = 900


@dataclass(frozen=True)
class Job:
    job_id: str
    gpu_index: int
    start: int
    end: int | None  # None: still running
    account: str
    late: bool  # its records land after the first build
    with_gpus: bool  # the scheduler said which GPU it held


@dataclass(frozen=True)
class History:
    days: int
    first: int  # days of samples landed before the first build
    busy: tuple[tuple[float, ...], ...]  # per day, per hour of the day mod 4
    jobs: tuple[Job, ...]
    close_at: int | None  # running early jobs end here, their batch rewritten after the build
    moved: str | None  # an early job whose late record moves it to another account


@st.composite
def histories(draw: st.DrawFn) -> History:
    days = draw(st.integers(2, 4))
    first = draw(st.integers(1, days - 1))
    busy = tuple(
        tuple(draw(st.sampled_from([0.0, 0.05, 0.5, 0.9])) for _ in range(4)) for _ in range(days)
    )
    jobs = []
    for n in range(draw(st.integers(1, 4))):
        start = draw(st.integers(0, days * DAY_S - 3600)) // 60 * 60
        length = draw(st.one_of(st.none(), st.integers(600, 2 * DAY_S)))
        jobs.append(
            Job(
                job_id=f"j{n}",
                gpu_index=draw(st.integers(0, 1)),
                start=start,
                end=None if length is None else start + length // 60 * 60,
                account=draw(st.sampled_from(["physics", "chem"])),
                late=draw(st.booleans()),
                with_gpus=draw(st.integers(0, 4)) > 0,
            )
        )
    running = [j for j in jobs if j.end is None and not j.late and j.with_gpus]
    close_at = None
    if running and draw(st.booleans()):
        close_at = max(j.start for j in running) + 1800
    early = [j.job_id for j in jobs if not j.late]
    moved = draw(st.sampled_from(early)) if early and draw(st.booleans()) else None
    return History(days, first, busy, tuple(jobs), close_at, moved)


def land_days(root: Path, h: History, days: range) -> None:
    for day in days:
        times = list(range(day * DAY_S, (day + 1) * DAY_S, STEP_S))
        active = [h.busy[day][(t // 3600) % 4] for t in times]
        rows = []
        for gpu_index in (0, 1):
            rows += r.samples(
                times,
                gpu_index=gpu_index,
                interval_s=float(STEP_S),
                engine_active=active,
                power_w=150.0,
            )
        r.land(root, "gpu_samples", rows, batch_id=f"day{day}")


def land_jobs(root: Path, jobs: list[Job], batch: str, end_at: int | None = None) -> None:
    """The jobs' records and GPU rows as one batch; `end_at` ends those still running."""

    def end(j: Job) -> int | None:
        return j.end if j.end is not None or end_at is None else max(end_at, j.start + 60)

    r.land(
        root,
        "jobs",
        [
            r.job(
                j.job_id,
                j.start,
                end(j),
                account=j.account,
                state="RUNNING" if end(j) is None else "COMPLETED",
                updated_ts=r.at(j.start if end_at is None else end_at + 60),
            )
            for j in jobs
        ],
        batch_id=batch,
    )
    r.land(
        root,
        "job_gpus",
        [r.job_gpu(j.job_id, j.start, end(j), gpu_index=j.gpu_index) for j in jobs if j.with_gpus],
        batch_id=batch,
    )


HALF = (0.5, 0.5, 0.5, 0.5)


@settings(max_examples=examples(4), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(h=histories())
# a job moved to another account: its days before the new ones change account too
@example(History(3, 2, (HALF,) * 3, (Job("j0", 0, 0, None, "physics", False, True),), None, "j0"))
# an allocation closed by rewriting its batch, after the days that landed
@example(
    History(3, 2, (HALF,) * 3, (Job("j0", 1, 3600, None, "chem", False, True),), 2 * DAY_S, None)
)
# a late record of a job the scheduler gave no GPU rows for, over the days already built
@example(History(3, 2, (HALF,) * 3, (Job("j0", 0, 600, DAY_S, "chem", True, False),), None, None))
def test_marts_updated_in_place_equal_marts_built_from_scratch(h: History) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "lake"
        r.land(root, "gpus", [r.gpu(), r.gpu(gpu_index=1)])
        land_days(root, h, range(h.first))
        early = [j for j in h.jobs if not j.late]
        land_jobs(root, early, "early")
        build(root)

        land_days(root, h, range(h.first, h.days))
        land_jobs(root, [j for j in h.jobs if j.late], "late")
        if h.close_at is not None:  # the early batch rewritten with its open rows closed
            land_jobs(root, early, "early", end_at=h.close_at)
        if h.moved is not None:
            [job] = [j for j in early if j.job_id == h.moved]
            moved = r.job(
                job.job_id,
                job.start,
                job.end,
                account="biology",
                updated_ts=r.at(h.days * DAY_S + 7200),
            )
            r.land(root, "jobs", [moved], batch_id="moved")
        done = update(root)

        assert done.mode == "incremental", done.reason
        scratch = rebuilt_from_scratch(root, Path(folder) / "scratch")
        assert_same_marts(snapshot(root), scratch, may_be_empty=True)
