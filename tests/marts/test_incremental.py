"""Incremental marts: a new day of samples or a late scheduler record rebuilds only the day
partitions it touches, and the marts then equal a rebuild from scratch."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests.marts import rows as r
from warehouse.attribution import AttributionConfig, attribute, build_marts
from warehouse.connection import WarehouseConfig, connect, open_engine, register_table
from warehouse.partitions import SAMPLE_MARTS, build_sample_marts
from warehouse.schema import MARTS, RAW_TABLES
from warehouse.summary import SUMMARY_MARTS, SummaryUpdate, refresh_summary_marts

DAY_S = 86400
# The longest scenarios (several attribute passes over a two-week lake) run in `make test` only;
# `make check` keeps one of each kind (new day, late record, sharing).
SLOW = pytest.mark.slow
STEP_S = 120  # a coarse sampling step keeps three days of two GPUs small


def day_samples(day: int, gpu_index: int = 0) -> list[r.Row]:
    """One GPU's samples over one day (seconds after T0), with a busy and an idle stretch."""
    times = list(range(day * DAY_S, (day + 1) * DAY_S, STEP_S))
    busy = [0.7 if (t // 3600) % 3 else 0.0 for t in times]
    return r.samples(
        times, gpu_index=gpu_index, interval_s=float(STEP_S), engine_active=busy, power_w=200.0
    )


def land_day(root: Path, day: int) -> None:
    rows = day_samples(day, 0) + day_samples(day, 1)
    r.land(root, "gpu_samples", rows, batch_id=f"day{day}")


def partition_files(root: Path) -> dict[str, tuple[int, int]]:
    """Every sample-level mart file (relative path) -> (mtime_ns, size)."""
    found = {}
    for mart, _ in SAMPLE_MARTS:
        for path in (root / mart).rglob("*.parquet"):
            stat = path.stat()
            found[str(path.relative_to(root))] = (stat.st_mtime_ns, stat.st_size)
    return found


def day_of(path: str) -> str:
    return next(part for part in Path(path).parts if part.startswith("date="))


def snapshot(root: Path) -> dict[str, pl.DataFrame]:
    """Every mart, sorted by its key; read through views of the marts alone (what `connect`
    makes of them, without the other tables' views, a third of a second a connection)."""
    con = open_engine(WarehouseConfig(root))
    for name in MARTS:
        register_table(con, root, name)
    return {
        name: con.table(name).pl().sort(list(spec.key), nulls_last=True)
        for name, spec in MARTS.items()
    }


def rebuilt_from_scratch(root: Path, scratch: Path) -> dict[str, pl.DataFrame]:
    """The marts of a copy of `root`'s raw tables, built with no earlier state."""
    for table in RAW_TABLES:
        if (root / table).is_dir():
            shutil.copytree(root / table, scratch / table)
    build(scratch)
    return snapshot(scratch)


def assert_same_marts(
    got: dict[str, pl.DataFrame], expected: dict[str, pl.DataFrame], *, may_be_empty: bool = False
) -> None:
    for name, frame in expected.items():
        assert frame.height > 0 or may_be_empty or name in ("job_outcomes", "app_throughput"), name
        assert_frame_equal(got[name], frame, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)


def build(root: Path) -> None:
    """`gpuledger attribute`: no connection over the whole lake (app.pipeline.round)."""
    attribute(None, root, AttributionConfig())


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Callable[[Path], None]], Path]:
    """`root = built(lake_of_three_days)`: the lake the builder makes, fresh for each test.

    Each builder runs once per module (per xdist worker), at a fixed folder, and a pristine
    copy of it is kept. Each test gets that folder restored from the copy: the same path, sizes
    and mtimes (`copytree` keeps them), which is what the incremental state fingerprints (a
    copy elsewhere would look changed). So the tests that start from the same lake pay its
    attribute pass once and still each start from the lake as built.
    """
    made: dict[Callable[[Path], None], tuple[Path, Path]] = {}

    def fresh(builder: Callable[[Path], None]) -> Path:
        if builder not in made:
            folder = tmp_path_factory.mktemp(builder.__name__)
            root, pristine = folder / "lake", folder / "pristine"
            builder(root)
            shutil.copytree(root, pristine)
            made[builder] = (root, pristine)
        root, pristine = made[builder]
        shutil.rmtree(root)
        shutil.copytree(pristine, root)
        return root

    return fresh


def lake_of_three_days(root: Path) -> None:
    for day in range(3):
        land_day(root, day)
    r.land(root, "jobs", [r.job("j1", 3600, 2 * DAY_S + 7200)])
    r.land(root, "job_gpus", [r.job_gpu("j1", 3600, 2 * DAY_S + 7200, gpu_index=0)])
    r.land(root, "gpus", [r.gpu(), r.gpu(gpu_index=1)])
    build(root)


def test_a_new_day_rebuilds_that_day_and_the_tail_of_the_one_before(tmp_path, built):
    root = built(lake_of_three_days)
    before = partition_files(root)

    land_day(root, 3)
    report = build_sample_marts(WarehouseConfig(root), AttributionConfig().values())

    assert [day.isoformat() for _, day in report.rebuilt] == ["2024-03-04"]
    assert [day.isoformat() for _, day in report.tails] == ["2024-03-03"]  # its last spans
    after = partition_files(root)
    untouched = {
        p: v for p, v in before.items() if day_of(p) in ("date=2024-03-01", "date=2024-03-02")
    }
    assert untouched and all(after[p] == v for p, v in untouched.items())
    assert any(day_of(p) == "date=2024-03-04" for p in after)


def test_after_a_new_day_the_marts_equal_a_rebuild_from_scratch(tmp_path, built):
    root = built(lake_of_three_days)
    land_day(root, 3)
    build(root)

    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))


def test_a_late_scheduler_record_rebuilds_only_the_days_it_covers(tmp_path, built):
    root = built(lake_of_three_days)
    before = partition_files(root)

    # GPU 1 turns out to have run job j2 for two hours on the last day.
    r.land(root, "jobs", [r.job("j2", 2 * DAY_S + 600, 2 * DAY_S + 7800)], batch_id="late")
    r.land(
        root,
        "job_gpus",
        [r.job_gpu("j2", 2 * DAY_S + 600, 2 * DAY_S + 7800, gpu_index=1)],
        batch_id="late",
    )
    samples_before = {p: p.read_bytes() for p in (root / "gpu_samples").rglob("*.parquet")}
    con = connect(root)
    report = build_sample_marts(WarehouseConfig(root), AttributionConfig().values())

    # the allocations of day 2 changed, its samples' owners with them: day 2 alone is rebuilt
    # (the samples of day 2 are as they were, so day 1's last buckets stand)
    assert [day.isoformat() for _, day in report.rebuilt] == ["2024-03-03"]
    assert report.tails == ()
    after = partition_files(root)
    earlier = [p for p in before if day_of(p) in ("date=2024-03-01", "date=2024-03-02")]
    assert earlier and all(after[p] == before[p] for p in earlier)
    assert {p: p.read_bytes() for p in (root / "gpu_samples").rglob("*.parquet")} == samples_before

    build_marts(con, root, AttributionConfig())
    got = snapshot(root)
    assert_same_marts(got, rebuilt_from_scratch(root, tmp_path / "scratch"))
    j2 = got["job_usage"].filter(pl.col("job_id") == "j2")
    assert j2["observed_gpu_h"].to_list() == [2.0]


def test_removed_samples_remove_their_day_partitions(tmp_path, built):
    root = built(lake_of_three_days)
    shutil.rmtree(root / "gpu_samples" / "cluster=della" / "date=2024-03-03")

    report = build_sample_marts(WarehouseConfig(root), AttributionConfig().values())

    assert [day.isoformat() for _, day in report.removed] == ["2024-03-03"]
    assert not any(day_of(p) == "date=2024-03-03" for p in partition_files(root))
    assert [day.isoformat() for _, day in report.tails] == ["2024-03-02"]
    assert report.rebuilt == ()


# --- the summary marts, updated in place -------------------------------------------------------

OFFSET_S = 60  # samples at hh:m1:00, so each day's last sample runs 60 s past midnight


def land_offset_day(
    root: Path, day: int, gpus: tuple[int, ...] = (0, 1), busy: float | None = None
) -> None:
    """A day of samples: busy 0.7 two hours in three, else 0 (or `busy` all day)."""
    rows = []
    for gpu_index in gpus:
        times = list(range(day * DAY_S + OFFSET_S, (day + 1) * DAY_S, STEP_S))
        if busy is None:
            active = [0.7 if (t // 3600) % 3 else 0.0 for t in times]
        else:
            active = [busy] * len(times)
        rows += r.samples(
            times,
            gpu_index=gpu_index,
            interval_s=float(STEP_S),
            engine_active=active,
            power_w=200.0,
        )
    r.land(root, "gpu_samples", rows, batch_id=f"day{day}")


def lake_for_summaries(
    root: Path, jobs: tuple[r.Row, ...] = (), job_gpus: tuple[r.Row, ...] = ()
) -> None:
    """Three days (Fri 2024-03-01 to Sun 03-03) of two GPUs: a job over all three days, a job
    still running on GPU 1 (open allocation), a job with no allocation rows still running (its
    allocated time runs to the data's end) and one that only ran on the first day; and the
    `jobs` and `job_gpus` rows given."""
    for day in range(3):
        land_offset_day(root, day)
    r.land(
        root,
        "jobs",
        [
            r.job("j1", 3600, 2 * DAY_S + 7200),
            r.job("jrun", 2 * DAY_S + 20000, None, state="RUNNING"),
            r.job("jfree", DAY_S, None, state="RUNNING", gpus=2),
            r.job("jold", 600, 5000, account="chem", user="bob"),
            *jobs,
        ],
    )
    r.land(
        root,
        "job_gpus",
        [
            r.job_gpu("j1", 3600, 2 * DAY_S + 7200, gpu_index=0),
            r.job_gpu("jrun", 2 * DAY_S + 20000, None, gpu_index=1),
            r.job_gpu("jold", 600, 5000, gpu_index=1),
            *job_gpus,
        ],
    )
    r.land(root, "gpus", [r.gpu(), r.gpu(gpu_index=1)])
    build(root)


def summary_files(root: Path) -> dict[str, tuple[int, int]]:
    """Every summary mart file (relative path) -> (mtime_ns, size)."""
    found = {}
    for mart, _ in SUMMARY_MARTS:
        for path in (root / mart).rglob("*.parquet"):
            stat = path.stat()
            found[str(path.relative_to(root))] = (stat.st_mtime_ns, stat.st_size)
    return found


def update(root: Path) -> SummaryUpdate:
    """What the pipeline does as files land: the day passes, then the summary marts (with no
    connection over the whole lake, as app.pipeline.round's attribute runs them)."""
    build_sample_marts(WarehouseConfig(root), AttributionConfig().values())
    return refresh_summary_marts(None, root, AttributionConfig())


def test_a_new_day_updates_the_summary_marts_in_place_as_a_rebuild_would(tmp_path, built):
    root = built(lake_for_summaries)
    before = summary_files(root)
    old = snapshot(root)

    land_offset_day(root, 3)  # Monday 2024-03-04: a new week
    done = update(root)

    assert done.mode == "incremental", done.reason
    assert [d.isoformat() for _, d in done.days] == ["2024-03-03", "2024-03-04"]
    got = snapshot(root)
    assert_same_marts(got, rebuilt_from_scratch(root, tmp_path / "scratch"))
    # the new day is in every summary mart: its usage, its occupancy, its week
    assert "2024-03-04" in {str(d) for d in got["usage_daily"]["date"].to_list()}
    assert got["fairness_weekly"]["week"].n_unique() == 2
    # the bucket across midnight holds the last span of Sunday and the first of Monday
    midnight = got["cluster_occupancy"].filter(pl.col("bucket") == r.at(3 * DAY_S))
    assert midnight["gpus_unobserved"].to_list() == [pytest.approx(0.0, abs=1e-9)]
    # jobs that did not touch the changed days keep their rows; the others were recomputed
    untouched = old["job_usage"].filter(pl.col("job_id") == "jold")
    assert_frame_equal(got["job_usage"].filter(pl.col("job_id") == "jold"), untouched)
    running = got["job_usage"].filter(pl.col("job_id") == "jrun")
    assert (
        running["observed_gpu_h"].item()
        > old["job_usage"].filter(pl.col("job_id") == "jrun")["observed_gpu_h"].item()
    )
    # usage_daily and cluster_occupancy partitions of the untouched days are left as they were
    after = summary_files(root)
    kept = {
        p: v
        for p, v in before.items()
        if p.startswith(("usage_daily", "cluster_occupancy"))
        and day_of(p) in ("date=2024-03-01", "date=2024-03-02")
    }
    assert len(kept) == 4 and all(after[p] == v for p, v in kept.items())


@SLOW
def test_a_removed_day_updates_the_summary_marts_in_place_as_a_rebuild_would(tmp_path, built):
    root = built(lake_for_summaries)
    land_offset_day(root, 3)
    update(root)
    shutil.rmtree(root / "gpu_samples" / "cluster=della" / "date=2024-03-04")

    done = update(root)

    assert done.mode == "incremental", done.reason
    assert [d.isoformat() for _, d in done.days] == ["2024-03-03", "2024-03-04"]
    got = snapshot(root)
    assert_same_marts(got, rebuilt_from_scratch(root, tmp_path / "scratch"))


@SLOW
def test_a_new_day_updates_only_the_weeks_its_jobs_reach(tmp_path):
    """fairness_weekly's week before the new day's is recomputed only where a job in scope
    spans it: here every job of that week ended in it, so it is left alone."""
    root = tmp_path / "lake"
    lake_over_two_weeks(root, running_since=3 * DAY_S + 10000)  # Monday
    before = summary_files(root)

    land_offset_day(root, 4)  # Tuesday
    done = update(root)

    assert (done.mode, done.weeks) == ("incremental", 1), done.reason
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))
    after = summary_files(root)
    weeks = {day_of(p): p for p in after if p.startswith("fairness_weekly")}
    assert sorted(weeks) == ["date=2024-02-26", "date=2024-03-04"]
    assert after[weeks["date=2024-02-26"]] == before[weeks["date=2024-02-26"]]
    assert after[weeks["date=2024-03-04"]] != before[weeks["date=2024-03-04"]]


@SLOW
def test_a_new_day_updates_the_weeks_before_that_a_running_job_spans(tmp_path):
    """A job running since Sunday turns low-efficiency on an idle Tuesday: its GPU-hours of the
    week before count as low-efficiency too, though no day of that week changed."""
    root = tmp_path / "lake"
    lake_over_two_weeks(root, running_since=2 * DAY_S + 72000)  # Sunday 20:00
    old = snapshot(root)

    land_offset_day(root, 4, busy=0.0)  # Tuesday
    done = update(root)

    assert (done.mode, done.weeks) == ("incremental", 2), done.reason
    got = snapshot(root)
    assert_same_marts(got, rebuilt_from_scratch(root, tmp_path / "scratch"))
    week = (pl.col("week") == r.at(-4 * DAY_S).date()) & (pl.col("level") == "account")
    low = [snap["fairness_weekly"].filter(week)["low_eff_gpu_h"].item() for snap in (old, got)]
    assert low[0] == 0 and low[1] == pytest.approx(4.0)  # Sunday 20:00 to midnight


def lake_over_two_weeks(root: Path, running_since: float) -> None:
    """Fri 2024-03-01 to Mon 03-04 of two GPUs (Monday busy 0.3): a job on Friday and Saturday,
    one on Monday, and one running on GPU 1 since `running_since`."""
    for day in range(4):
        land_offset_day(root, day, busy=0.3 if day == 3 else None)
    r.land(
        root,
        "jobs",
        [
            r.job("jweek", 3600, DAY_S + 7200),
            r.job("jmon", 3 * DAY_S + 3600, 3 * DAY_S + 7200, user="bob"),
            r.job("jrun", running_since, None, state="RUNNING"),
        ],
    )
    r.land(
        root,
        "job_gpus",
        [
            r.job_gpu("jweek", 3600, DAY_S + 7200, gpu_index=0),
            r.job_gpu("jmon", 3 * DAY_S + 3600, 3 * DAY_S + 7200, gpu_index=0),
            r.job_gpu("jrun", running_since, None, gpu_index=1),
        ],
    )
    r.land(root, "gpus", [r.gpu(), r.gpu(gpu_index=1)])
    build(root)


@pytest.mark.parametrize(
    ("change", "untouched_day"),
    [
        ("a new GPU", 1),
        pytest.param("an earlier day", None, marks=SLOW),
        pytest.param("the first day removed", 1, marks=SLOW),
    ],
)
def test_a_new_gpu_or_a_new_first_day_updates_every_occupancy_bucket(
    tmp_path, built, change, untouched_day
):
    """Every cluster_occupancy row depends on the device count and the data's start: a GPU
    first seen on the new day, or the first day's samples removed, change the buckets of days
    whose samples did not change (samples before the first day happen not to here: Friday's
    first bucket gains Thursday's last span and its full width alike)."""
    root = built(lake_for_summaries)
    old = snapshot(root)

    if change == "a new GPU":
        land_offset_day(root, 3, gpus=(0, 1, 2))
    elif change == "an earlier day":
        land_offset_day(root, -1)  # Thursday 2024-02-29: its last span runs into Friday
    else:  # Saturday's first bucket loses Friday's last span and starts the data
        shutil.rmtree(root / "gpu_samples" / "cluster=della" / "date=2024-03-01")
    done = update(root)

    assert done.mode == "incremental", done.reason
    got = snapshot(root)
    assert_same_marts(got, rebuilt_from_scratch(root, tmp_path / "scratch"))
    if untouched_day is None:
        return
    # a day whose samples did not change, whose occupancy did
    day = (pl.col("bucket") >= r.at(untouched_day * DAY_S)) & (
        pl.col("bucket") < r.at((untouched_day + 1) * DAY_S)
    )
    assert not got["cluster_occupancy"].filter(day).equals(old["cluster_occupancy"].filter(day))


def test_nothing_changed_leaves_the_summary_marts_alone(tmp_path, built):
    root = built(lake_for_summaries)
    before = summary_files(root)

    done = update(root)

    assert done.mode == "unchanged"
    assert summary_files(root) == before


def test_other_changes_rebuild_the_summary_marts_whole(tmp_path, built):
    root = built(lake_for_summaries)

    # raw tables other than samples and the scheduler's changed
    r.land(root, "gpu_events", [r.event(DAY_S + 600, "xid", 79)], batch_id="late")
    other = update(root)
    assert other.mode == "rebuilt" and "raw tables" in other.reason
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch"))

    # the state the update reads is gone or was changed by hand: rebuilt, not trusted
    land_offset_day(root, 3)
    next(iter((root / "_state" / "summary_index").rglob("2024-03-01.parquet"))).unlink()
    lost = update(root)
    assert lost.mode == "rebuilt" and "index" in lost.reason
    assert_same_marts(snapshot(root), rebuilt_from_scratch(root, tmp_path / "scratch2"))


@pytest.mark.parametrize(
    "record",
    [
        "a job no record had",  # with its GPU: its samples change owner on Saturday, and j1
        # shares GPU 0 with it there: j1's allocated time is split
        pytest.param("a running job ended", marks=SLOW),  # jrun's allocation stops; the days
        # after lose it
        pytest.param("a running job requeued", marks=SLOW),  # jrun's first run ends, it
        # runs again on GPU 0: lost
        pytest.param("a job moved account", marks=SLOW),  # every day of j1 moves to chem
        pytest.param("a job without samples", marks=SLOW),  # on a GPU no sample reports:
        # allocated, not observed
        pytest.param("a batch file removed", marks=SLOW),
    ],
)
def test_a_late_scheduler_record_updates_the_summary_marts_in_place(tmp_path, built, record):
    root = built(lake_for_summaries)
    land_offset_day(root, 3)
    update(root)
    old = snapshot(root)

    if record == "a job no record had":
        r.land(root, "jobs", [r.job("j9", DAY_S + 600, DAY_S + 4200)], batch_id="late")
        r.land(root, "job_gpus", [r.job_gpu("j9", DAY_S + 600, DAY_S + 4200, gpu_index=0)], "late")
    elif record == "a running job ended":  # as the Slurm collector closes it: batch rewritten
        ended = r.job("jrun", 2 * DAY_S + 20000, 2 * DAY_S + 30000, updated_ts=r.at(3 * DAY_S))
        r.land(root, "jobs", [ended], batch_id="late")
        gpu = r.job_gpu("jrun", 2 * DAY_S + 20000, 2 * DAY_S + 30000, gpu_index=1)
        r.land(root, "job_gpus", [gpu], batch_id="test")
    elif record == "a running job requeued":  # as the Slurm collector lands it
        again = r.job(
            "jrun", 2 * DAY_S + 26000, None, state="RUNNING", requeues=1, updated_ts=r.at(3 * DAY_S)
        )
        r.land(root, "jobs", [again], batch_id="late")
        first = r.job_gpu("jrun", 2 * DAY_S + 20000, 2 * DAY_S + 25000, gpu_index=1)
        r.land(root, "job_gpus", [first], batch_id="test")
        r.land(root, "job_gpus", [r.job_gpu("jrun", 2 * DAY_S + 26000, None)], batch_id="late")
    elif record == "a batch file removed":
        next((root / "job_gpus").rglob("date=2024-03-01/*.parquet")).unlink()  # j1 and jold
    elif record == "a job moved account":
        moved = r.job("j1", 3600, 2 * DAY_S + 7200, account="chem", updated_ts=r.at(4 * DAY_S))
        r.land(root, "jobs", [moved], batch_id="late")
    else:
        r.land(root, "jobs", [r.job("jx", DAY_S, DAY_S + 7200, user="carol")], batch_id="late")
        r.land(root, "job_gpus", [r.job_gpu("jx", DAY_S, DAY_S + 7200, gpu_index=7)], "late")
    done = update(root)

    assert done.mode == "incremental", done.reason
    assert done.late_jobs == (2 if record == "a batch file removed" else 1)
    got = snapshot(root)
    assert_same_marts(got, rebuilt_from_scratch(root, tmp_path / "scratch"))
    assert not got["usage_daily"].equals(old["usage_daily"])
    if record == "a running job requeued":
        outcome = got["job_outcomes"].filter(pl.col("job_id") == "jrun").row(0, named=True)
        assert outcome["gpu_h_lost_requeue"] == pytest.approx(5000 / 3600)
    assert update(root).mode == "unchanged"


# --- shared GPUs: a job's allocated time depends on the jobs sharing its GPU --------------------


@SLOW
def test_a_job_in_scope_keeps_its_split_with_a_sharer_out_of_scope(tmp_path):
    """j1 (recomputed: it has samples on the changed day) shared GPU 0 on the first day with
    jtwo, which is not recomputed (no samples or allocation on the changed days): j1's share of
    that hour still counts jtwo, whose interval is not among the jobs in scope."""
    root = tmp_path / "lake"
    lake_for_summaries(
        root,
        jobs=(r.job("jtwo", 3000, 4600, user="carol"),),
        job_gpus=(r.job_gpu("jtwo", 3000, 4600, gpu_index=0),),
    )
    old = snapshot(root)

    land_offset_day(root, 3)
    done = update(root)

    assert done.mode == "incremental", done.reason
    got = snapshot(root)
    assert_same_marts(got, rebuilt_from_scratch(root, tmp_path / "scratch"))
    usage = {row["job_id"]: row for row in got["job_usage"].to_dicts()}
    assert usage["j1"]["shared"] and usage["jtwo"]["shared"]
    assert usage["jtwo"]["alloc_gpu_h"] == pytest.approx((600 + 1000 / 2) / 3600)
    before = old["job_usage"].filter(pl.col("job_id") == "jtwo")
    assert_frame_equal(got["job_usage"].filter(pl.col("job_id") == "jtwo"), before)


@SLOW
def test_an_open_allocation_extended_changes_its_closed_sharers_split(tmp_path):
    """jrun (open on GPU 1) now runs to the new data end; jlate shared GPU 1 with it up to an
    hour past the old data end: its share of that hour halves."""
    root = tmp_path / "lake"
    late_end = 3 * DAY_S + 3600
    lake_for_summaries(
        root,
        jobs=(r.job("jlate", 2 * DAY_S + 30000, late_end, user="dave"),),
        job_gpus=(r.job_gpu("jlate", 2 * DAY_S + 30000, late_end, gpu_index=1),),
    )

    land_offset_day(root, 3)
    done = update(root)

    assert done.mode == "incremental", done.reason
    got = snapshot(root)
    assert_same_marts(got, rebuilt_from_scratch(root, tmp_path / "scratch"))
    jlate = got["job_usage"].filter(pl.col("job_id") == "jlate")
    assert jlate["alloc_gpu_h"].item() == pytest.approx((late_end - 2 * DAY_S - 30000) / 2 / 3600)


def test_a_clusters_first_samples_split_an_open_allocation_with_its_sharers(tmp_path):
    """Cluster c2 had allocations and no samples: its open allocation xrun ran to the latest
    time c2's records gave (yold's end). Its first samples, days later, end the data there:
    xrun now holds its GPU to then, and shares it with yold, whose row must be recomputed
    too."""
    root = tmp_path / "lake"
    c2 = {"cluster": "c2"}
    lake_for_summaries(
        root,
        jobs=(r.job("xrun", 600, None, state="RUNNING") | c2, r.job("yold", 1200, 4800) | c2),
        job_gpus=(r.job_gpu("xrun", 600, None) | c2, r.job_gpu("yold", 1200, 4800) | c2),
    )

    rows = r.samples(range(2 * DAY_S, 2 * DAY_S + 3600, 120), interval_s=120.0)
    r.land(root, "gpu_samples", [row | c2 for row in rows], batch_id="c2")
    done = update(root)

    assert done.mode == "incremental", done.reason
    got = snapshot(root)
    assert_same_marts(got, rebuilt_from_scratch(root, tmp_path / "scratch"))
    yold = got["job_usage"].filter(pl.col("job_id") == "yold")
    assert yold["alloc_gpu_h"].item() == pytest.approx(3600 / 2 / 3600)


def test_a_clusters_first_samples_extend_a_running_job_without_job_gpus_rows(tmp_path):
    """Cluster c2's running job zrun has no job_gpus row: it holds its GPU over its run, to
    its last update while c2 has no data. c2's first samples, days later, give the data an
    end: zrun now holds it to there, and every day from its start changes."""
    root = tmp_path / "lake"
    c2 = {"cluster": "c2"}
    lake_for_summaries(root, jobs=(r.job("zrun", 600, None, state="RUNNING") | c2,))

    rows = r.samples(range(2 * DAY_S, 2 * DAY_S + 3600, 120), interval_s=120.0)
    r.land(root, "gpu_samples", [row | c2 for row in rows], batch_id="c2")
    done = update(root)

    assert done.mode == "incremental", done.reason
    got = snapshot(root)
    assert_same_marts(got, rebuilt_from_scratch(root, tmp_path / "scratch"))
    days = got["usage_daily"].filter(pl.col("cluster") == "c2").sort("date")
    assert days["alloc_gpu_h"].to_list() == pytest.approx([(DAY_S - 600) / 3600, 24.0, 1.0])


def test_a_late_record_on_a_cluster_without_samples_extends_its_running_jobs(tmp_path):
    """Cluster c2 has scheduler records and no samples: its open allocation xrun runs to the
    latest time c2's records give. A later record of another c2 job moves that end: xrun's
    rows are recomputed, on every day up to the new end, as a rebuild gives them."""
    root = tmp_path / "lake"
    c2 = {"cluster": "c2"}
    lake_for_summaries(
        root,
        jobs=(r.job("xrun", 600, None, state="RUNNING") | c2, r.job("ydone", 1200, 4800) | c2),
        job_gpus=(
            r.job_gpu("xrun", 600, None) | c2,
            r.job_gpu("ydone", 1200, 4800, gpu_index=1) | c2,
        ),
    )
    xrun = snapshot(root)["job_usage"].filter(pl.col("job_id") == "xrun")
    assert xrun["alloc_gpu_h"].item() == pytest.approx((4800 - 600) / 3600)

    later = r.job("zlate", DAY_S + 3600, DAY_S + 7200) | c2
    r.land(root, "jobs", [later], batch_id="late")
    r.land(
        root, "job_gpus", [r.job_gpu("zlate", DAY_S + 3600, DAY_S + 7200, gpu_index=1) | c2], "late"
    )
    done = update(root)

    assert done.mode == "incremental", done.reason
    got = snapshot(root)
    assert_same_marts(got, rebuilt_from_scratch(root, tmp_path / "scratch"))
    xrun = got["job_usage"].filter(pl.col("job_id") == "xrun")
    assert xrun["alloc_gpu_h"].item() == pytest.approx((DAY_S + 7200 - 600) / 3600)


def test_a_late_record_with_an_end_after_tomorrow_updates_in_place_as_a_rebuild_would(tmp_path):
    """An end after tomorrow is no end (sql/views/jobs_latest.sql): the job had ended by its
    record's collection, 10 minutes in; the allocation row with that end ends there too."""
    import datetime as dt

    far = dt.datetime(9999, 12, 31, tzinfo=dt.UTC)
    root = tmp_path / "lake"
    lake_for_summaries(root)
    r.land(root, "jobs", [r.job("jfar", DAY_S, DAY_S + 600) | {"end_ts": far}], batch_id="late")
    gpu = r.job_gpu("jfar", DAY_S, DAY_S + 600, gpu_index=2) | {"end_ts": far}
    r.land(root, "job_gpus", [gpu], batch_id="late")
    assert update(root).mode == "incremental"
    land_offset_day(root, 3)
    done = update(root)

    assert done.mode == "incremental", done.reason
    got = snapshot(root)
    assert_same_marts(got, rebuilt_from_scratch(root, tmp_path / "scratch"))
    jfar = got["job_usage"].filter(pl.col("job_id") == "jfar")
    assert jfar["alloc_gpu_h"].item() == pytest.approx(600 / 3600)


def test_no_summary_mart_reads_what_the_detectors_write():
    """`detect` lands findings every round; the summary marts leave those tables out of their
    inputs (warehouse.summary.state._NOT_READ), which holds only while no mart's SQL reads them."""
    import re

    import sql
    from warehouse.connection import DERIVED_VIEWS
    from warehouse.summary import state, whole

    texts = [sql.load(q) for _, q in whole.SUMMARY_MARTS]
    read = [v for v in DERIVED_VIEWS if any(re.search(rf"\b{v}\b", t) for t in texts)]
    texts += [sql.load(DERIVED_VIEWS[v]) for v in read]
    texts += [sql.load(q) for q in state._HELPERS if q.startswith("attribution/")]
    for table in state._NOT_READ:
        assert not any(re.search(rf"\b{table}\b", text) for text in texts), table
