"""`collect_slurm`: incremental, idempotent landing of jobs and GPU allocations.

Slurm is a fake runner answering from recorded outputs of a two-node cluster (see
tests/fixtures/slurm/PROVENANCE.md): `early` while jobs 1–5 run and 6–7 wait, `final` after all
of them ended. The lake is read back through `warehouse.connection.connect`.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest

from collector.errors import ConfigError
from collector.sources.slurm.collect import SlurmCommandError, collect_slurm
from warehouse.attribution import AttributionConfig, build_marts
from warehouse.connection import connect
from warehouse.lake import Lake

CLUSTER = "two-node"
T1 = dt.datetime(2026, 12, 2, 13, 17, 31, tzinfo=dt.UTC)
T2 = T1 + dt.timedelta(minutes=1)
T3 = dt.datetime(2026, 12, 2, 13, 20, 0, tzinfo=dt.UTC)
DB_DOWN = "sacct failed (exit 1): sacct: error: Problem talking to the database: Connection refused"


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


@pytest.fixture
def early(fake_slurm, fixture_text):
    return fake_slurm(
        fixture_text("collect/sacct-early.txt"), fixture_text("collect/scontrol-early.txt")
    )


@pytest.fixture
def final(fake_slurm, fixture_text):
    return fake_slurm(
        fixture_text("collect/sacct-final.txt"), fixture_text("collect/scontrol-final.txt")
    )


_connections: dict[tuple, object] = {}


def rows(root, query):
    """The result of `query` over the lake; one connection per state of the lake's files."""
    key = (root, tuple(sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*.parquet"))))
    if key not in _connections:
        _connections.clear()
        _connections[key] = connect(root)
    return _connections[key].sql(query).fetchall()  # type: ignore[attr-defined]


def window_of(call):
    """(--starttime, --endtime) of a recorded sacct call."""
    args = dict(a.split("=", 1) for a in call if a.startswith("--") and "=" in a)
    return args.get("--starttime"), args.get("--endtime")


def test_the_first_run_lands_every_job_and_the_gpus_of_running_ones(tmp_path, early):
    result = collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)

    assert (result.jobs_seen, result.jobs_new, result.jobs_updated) == (7, 7, 0)
    assert (result.gpu_rows_opened, result.gpu_rows_closed) == (9, 0)
    assert result.malformed == () and result.unmapped_jobs == ()
    assert rows(tmp_path, "SELECT count(*) FROM jobs") == [(7,)]
    assert rows(tmp_path, "SELECT job_id, state FROM jobs_latest ORDER BY job_id") == [
        ("1", "RUNNING"),
        ("2", "RUNNING"),
        ("3", "RUNNING"),
        ("4", "RUNNING"),
        ("5", "RUNNING"),
        ("6", "PENDING"),
        ("7", "PENDING"),
    ]
    assert rows(
        tmp_path,
        "SELECT node, gpu_index, mapping, end_ts FROM job_gpus WHERE job_id = '2' ORDER BY 2",
    ) == [("gpu-node01", i, "scontrol-idx", None) for i in (2, 3, 4, 5)]
    assert rows(tmp_path, "SELECT DISTINCT cluster, source FROM jobs") == [(CLUSTER, "slurm")]


def test_the_first_run_asks_slurm_three_times_for_the_last_day(tmp_path, early):
    result = collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)

    assert [c[:2] for c in early.calls] == [
        ["sacct", "--helpformat"],
        ["sacct", "--parsable2"],
        ["scontrol", "show"],
    ]
    window = early.calls_of("sacct --allusers")[0]
    assert {"--noheader", "--duplicates"} <= set(window)
    assert window_of(window) == ("2026-12-01T13:17:31", "2026-12-02T13:17:31")
    assert result.commands == 3


def test_a_second_identical_run_lands_nothing(tmp_path, early):
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)
    files_before = sorted(p.name for p in tmp_path.rglob("*.parquet"))

    again = collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T2)

    assert (again.jobs_seen, again.jobs_landed) == (7, 0)
    assert (again.gpu_rows_opened, again.gpu_rows_closed) == (0, 0)
    assert sorted(p.name for p in tmp_path.rglob("*.parquet")) == files_before
    assert rows(tmp_path, "SELECT count(*) FROM jobs") == [(7,)]
    # The window starts at the checkpoint minus the 10-minute overlap.
    assert window_of(early.calls_of("sacct --allusers")[-1]) == (
        "2026-12-02T13:07:31",
        "2026-12-02T13:18:31",
    )
    assert early.calls_of("sacct --jobs") == []  # the window listed every unfinished job


def test_jobs_that_finish_between_runs_get_one_new_version_each(tmp_path, early, final):
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)

    result = collect_slurm(Lake.at(tmp_path), CLUSTER, final, now=T3)

    assert (result.jobs_new, result.jobs_updated) == (0, 7)
    assert rows(tmp_path, "SELECT count(*) FROM jobs") == [(14,)]  # versions are kept
    latest = rows(
        tmp_path,
        "SELECT job_id, state, end_ts, updated_ts FROM jobs_latest WHERE job_id IN ('2', '6') "
        "ORDER BY job_id",
    )
    assert latest == [
        ("2", "CANCELLED by 1001", utc("2026-12-02T13:17:32"), T3),
        ("6", "COMPLETED", utc("2026-12-02T13:19:12"), T3),
    ]
    assert rows(tmp_path, "SELECT count(*), count(DISTINCT job_id) FROM jobs_latest") == [(7, 7)]


def test_gpu_rows_of_finished_jobs_are_closed_not_duplicated(tmp_path, early, final):
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)

    result = collect_slurm(Lake.at(tmp_path), CLUSTER, final, now=T3)

    assert (result.gpu_rows_opened, result.gpu_rows_closed) == (8, 9)
    assert rows(tmp_path, "SELECT count(*) FROM job_gpus WHERE end_ts IS NULL") == [(0,)]
    assert rows(
        tmp_path,
        "SELECT gpu_index, start_ts, end_ts FROM job_gpus WHERE job_id = '2' ORDER BY 1",
    ) == [(i, utc("2026-12-02T13:17:30"), utc("2026-12-02T13:17:32")) for i in (2, 3, 4, 5)]
    # Job 6 ran between the two runs; scontrol still listed it, so its GPUs are known too.
    assert rows(tmp_path, "SELECT count(*), min(end_ts) FROM job_gpus WHERE job_id = '6'") == [
        (8, utc("2026-12-02T13:19:12"))
    ]
    assert rows(tmp_path, "SELECT count(*) FROM job_gpus") == [(17,)]


def test_a_run_killed_before_its_state_committed_leaves_no_open_copy(
    tmp_path, early, final, monkeypatch
):
    # killed after its files landed, before its state committed: the next run lands the same
    # rows again, and they must replace the first copy, or that copy stays open for ever (its
    # job charged to the end of the data)
    from collector.sources.slurm.state import SlurmState

    def killed(*_args: object) -> None:
        raise KeyboardInterrupt("killed")

    with monkeypatch.context() as patch:
        patch.setattr(SlurmState, "mark_asked", killed)
        with pytest.raises(KeyboardInterrupt):
            collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T2)
    collect_slurm(Lake.at(tmp_path), CLUSTER, final, now=T3)

    assert rows(tmp_path, "SELECT count(*) FROM job_gpus WHERE end_ts IS NULL") == [(0,)]
    assert rows(tmp_path, "SELECT count(*) FROM job_gpus") == [(17,)]


def test_a_finished_jobs_mapping_is_left_alone_afterwards(tmp_path, early, final):
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)
    collect_slurm(Lake.at(tmp_path), CLUSTER, final, now=T3)
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "job_gpus").rglob("*.parquet")}

    again = collect_slurm(Lake.at(tmp_path), CLUSTER, final, now=T3 + dt.timedelta(minutes=5))

    assert (again.jobs_landed, again.gpu_rows_opened, again.gpu_rows_closed) == (0, 0, 0)
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "job_gpus").rglob("*.parquet")}
    assert after == before


def test_unfinished_jobs_the_window_misses_are_asked_for_in_one_call(
    tmp_path, early, fake_slurm, fixture_text
):
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)
    final_text = fixture_text("collect/sacct-final.txt")
    # slurmdbd recorded the ends of jobs 1-5 late: the window lists only jobs 6 and 7.
    window = "".join(
        line + "\n" for line in final_text.splitlines() if line.split("|")[0][:1] in "67"
    )
    late = fake_slurm(window, fixture_text("collect/scontrol-final.txt"), by_id=final_text)

    result = collect_slurm(Lake.at(tmp_path), CLUSTER, late, now=T3)

    [by_id] = late.calls_of("sacct --parsable2")[1:]
    assert "--jobs=1,2,3,4,5" in by_id
    assert not any(a.startswith("--starttime") for a in by_id)
    assert (result.jobs_seen, result.jobs_updated) == (7, 7)
    assert rows(tmp_path, "SELECT state FROM jobs_latest WHERE job_id = '3'") == [("FAILED",)]
    assert rows(tmp_path, "SELECT count(*) FROM job_gpus WHERE end_ts IS NULL") == [(0,)]


def test_a_failing_command_lands_nothing_and_keeps_the_checkpoint(
    tmp_path, early, final, fake_slurm, fixture_text
):
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)
    final.fail = {"sacct": DB_DOWN}

    with pytest.raises(SlurmCommandError, match="Problem talking to the database"):
        collect_slurm(Lake.at(tmp_path), CLUSTER, final, now=T3)

    assert rows(tmp_path, "SELECT count(*) FROM jobs") == [(7,)]
    assert rows(tmp_path, "SELECT count(*) FROM job_gpus WHERE end_ts IS NULL") == [(9,)]
    final.fail = {}
    result = collect_slurm(Lake.at(tmp_path), CLUSTER, final, now=T3)
    # The window still starts from the first run's end: the failed run moved nothing.
    assert window_of(final.calls_of("sacct --allusers")[-1])[0] == "2026-12-02T13:07:31"
    assert result.jobs_updated == 7


def test_a_failing_scontrol_lands_nothing_either(tmp_path, early, final):
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)
    final.fail = {"scontrol": "scontrol failed (exit 1): slurm_load_jobs error: Unable to contact"}

    with pytest.raises(SlurmCommandError, match="Unable to contact"):
        collect_slurm(Lake.at(tmp_path), CLUSTER, final, now=T3)

    assert rows(tmp_path, "SELECT count(*) FROM jobs") == [(7,)]


def test_a_missing_sacct_on_the_first_run_is_a_clear_error(tmp_path, early):
    early.fail = {"sacct --helpformat": "'sacct' not found on PATH"}

    with pytest.raises(SlurmCommandError, match="'sacct' not found on PATH"):
        collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)

    assert not (tmp_path / "jobs").exists()


def test_a_malformed_line_is_skipped_counted_and_reported(tmp_path, fake_slurm, fixture_text):
    slurm = fake_slurm(
        fixture_text("collect/sacct-early-with-bad-line.txt"),
        fixture_text("collect/scontrol-early.txt"),
    )

    result = collect_slurm(Lake.at(tmp_path), CLUSTER, slurm, now=T1)

    assert [(m.source, m.line_no) for m in result.malformed] == [("sacct", 5)]
    assert "10 fields, expected 20" in result.malformed[0].reason
    assert result.jobs_new == 7  # the rest landed
    assert rows(tmp_path, "SELECT count(*) FROM jobs_latest") == [(7,)]


def test_a_requeued_job_restarting_on_other_gpus_closes_its_old_rows(
    tmp_path, early, fake_slurm, fixture_text
):
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)
    # Job 2 (the first record with this start and projected end) restarted on GPUs 0-3.
    before = "StartTime=2026-12-02T13:17:30 EndTime=2026-12-02T14:17:30"
    after = "StartTime=2026-12-02T13:19:00 EndTime=2026-12-02T14:19:00"
    restarted = (
        fixture_text("collect/scontrol-early.txt")
        .replace(before, after, 1)
        .replace("GRES=gpu:h100:4(IDX:2-5)", "GRES=gpu:h100:4(IDX:0-3)")
    )
    slurm = fake_slurm(fixture_text("collect/sacct-early.txt"), restarted)

    result = collect_slurm(Lake.at(tmp_path), CLUSTER, slurm, now=T3)

    assert (result.gpu_rows_opened, result.gpu_rows_closed) == (4, 4)
    assert rows(
        tmp_path,
        "SELECT gpu_index, start_ts, end_ts FROM job_gpus WHERE job_id = '2' ORDER BY 2, 1",
    ) == [(i, utc("2026-12-02T13:17:30"), utc("2026-12-02T13:19:00")) for i in (2, 3, 4, 5)] + [
        (i, utc("2026-12-02T13:19:00"), None) for i in (0, 1, 2, 3)
    ]


REQUEUE_PHASES = {  # recorded on the live test cluster (tests/fixtures/slurm/PROVENANCE.md)
    "1-running": utc("2026-12-02T17:04:27"),
    "2-requeued": utc("2026-12-02T17:04:30"),
    "3-restarted": utc("2026-12-02T17:04:35"),
    "4-completed": utc("2026-12-02T17:04:40"),
}


@pytest.mark.parametrize(
    "phases",
    [
        ("1-running", "2-requeued", "3-restarted", "4-completed"),
        ("1-running", "3-restarted", "4-completed"),  # no run while it waited to restart
    ],
)
def test_a_requeued_jobs_earlier_run_gives_up_its_gpus_when_sacct_says_it_ended(
    tmp_path, fake_slurm, fixture_text, phases
):
    # Job 1 ran on GPUs 0-1 from 17:04:26, was requeued at 17:04:28 (`scontrol requeue`), waited
    # (scontrol: PENDING, Reason=BeginTime, an estimated StartTime), ran again on GPUs 0-1 from
    # 17:04:31 and completed at 17:04:36. The first run's rows end when that run ended (its
    # REQUEUED record's End), not at the next collection nor at the restart.
    for phase in phases:
        slurm = fake_slurm(
            fixture_text(f"requeue/sacct-{phase}.txt"),
            fixture_text(f"requeue/scontrol-{phase}.txt"),
        )
        collect_slurm(Lake.at(tmp_path), CLUSTER, slurm, now=REQUEUE_PHASES[phase])

    first, second, end = (utc(f"2026-12-02T17:04:{s}") for s in ("26", "31", "36"))
    assert rows(tmp_path, "SELECT gpu_index, start_ts, end_ts FROM job_gpus ORDER BY 2, 1") == [
        (0, first, utc("2026-12-02T17:04:28")),
        (1, first, utc("2026-12-02T17:04:28")),
        (0, second, end),
        (1, second, end),
    ]
    assert rows(
        tmp_path, "SELECT state, requeues, submit_ts, start_ts, end_ts FROM jobs_latest"
    ) == [("COMPLETED", 1, utc("2026-12-02T17:04:24"), second, end)]


def test_a_requeued_jobs_earlier_run_counts_as_lost_in_job_outcomes(
    tmp_path, fake_slurm, fixture_text
):
    # The recorded requeue (above): the first run held GPUs 0-1 for 2 s before `scontrol
    # requeue`, the second 5 s and completed. job_outcomes counts the first run as lost.
    for phase in REQUEUE_PHASES:
        slurm = fake_slurm(
            fixture_text(f"requeue/sacct-{phase}.txt"),
            fixture_text(f"requeue/scontrol-{phase}.txt"),
        )
        collect_slurm(Lake.at(tmp_path), CLUSTER, slurm, now=REQUEUE_PHASES[phase])
    con = connect(tmp_path)
    build_marts(con, tmp_path, AttributionConfig())

    assert rows(
        tmp_path,
        "SELECT outcome, requeued, alloc_gpu_h * 3600, gpu_h_lost_requeue * 3600, "
        "gpu_h_lost * 3600 FROM job_outcomes",
    ) == [("completed", True, pytest.approx(14.0), pytest.approx(4.0), pytest.approx(4.0))]


def test_requeues_never_go_back_when_the_earlier_run_leaves_the_window(tmp_path, fake_slurm):
    fields = "JobID|JobIDRaw|State|Submit|Start|End|JobName"
    first = (
        f"{fields}\n"
        "9|9|REQUEUED|2026-12-02T12:00:00|2026-12-02T12:00:01|2026-12-02T12:30:00|train\n"
        "9|9|RUNNING|2026-12-02T12:30:01|2026-12-02T12:31:00|Unknown|train\n"
    )
    later = (
        f"{fields}\n"
        "9|9|COMPLETED|2026-12-02T12:30:01|2026-12-02T12:31:00|2026-12-02T13:10:00|train\n"
    )
    collect_slurm(Lake.at(tmp_path), CLUSTER, fake_slurm(first), now=T1)

    collect_slurm(Lake.at(tmp_path), CLUSTER, fake_slurm(later), now=T3)

    assert rows(tmp_path, "SELECT state, requeues, submit_ts FROM jobs_latest") == [
        ("COMPLETED", 1, utc("2026-12-02T12:00:00"))
    ]


def test_since_sets_the_window_start(tmp_path, early):
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1, since=utc("2026-11-30T00:00:00"))

    assert window_of(early.calls_of("sacct --allusers")[0])[0] == "2026-11-30T00:00:00"


def test_the_window_is_printed_in_the_runners_time_zone(tmp_path, early):
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1, tz=dt.timezone(dt.timedelta(hours=1)))

    assert window_of(early.calls_of("sacct --allusers")[0])[1] == "2026-12-02T14:17:31"


def test_a_window_in_the_repeated_hour_of_daylight_saving_time_is_asked_no_narrower(
    tmp_path, early
):
    """05:55Z to 06:20Z on 2026-11-01 is 01:55 EDT to 01:20 EST in New York: printed as local
    times, the window ran backwards. Each end moves an hour outward where its text is
    ambiguous; a time outside that hour is printed as it is."""
    ny = zoneinfo.ZoneInfo("America/New_York")
    since, now = utc("2026-11-01T05:55:00"), utc("2026-11-01T06:20:00")
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=now, since=since, tz=ny)
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=utc("2026-11-01T08:00:00"), tz=ny)

    calls = early.calls_of("sacct --allusers")
    assert window_of(calls[0]) == ("2026-11-01T00:55:00", "2026-11-01T02:20:00")
    assert window_of(calls[1]) == ("2026-11-01T01:10:00", "2026-11-01T03:00:00")


def test_newer_sacct_is_asked_for_restarts_too(tmp_path, fake_slurm, fixture_text):
    slurm = fake_slurm("", helpformat=fixture_text("handmade/sacct-helpformat-25.11.txt"))

    collect_slurm(Lake.at(tmp_path), CLUSTER, slurm, now=T1)

    fmt = next(a for a in slurm.calls_of("sacct --allusers")[0] if a.startswith("--format="))
    assert fmt.endswith(",MaxRSS,Restarts,JobName")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"since": utc("2026-12-03T00:00:00")}, "not before its end"),
        ({"since": dt.datetime(2026, 12, 1)}, "since must be timezone-aware"),
    ],
)
def test_bad_windows_are_refused_before_asking_slurm(tmp_path, early, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1, **kwargs)

    assert early.calls == []


def test_gpus_of_a_job_sacct_does_not_list_are_not_read_until_it_does(
    tmp_path, fake_slurm, fixture_text
):
    """scontrol alone cannot vouch for a job: a name or comment holding a line break and a
    whole record (`JobId=777 … Nodes=gpu09 GRES=gpu:8(IDX:0-7)`) reads as one. Its GPUs are
    read once sacct lists the job, from the allocation's own start."""
    running = fixture_text("two-node-cluster/scontrol_show_job_d_running.txt")
    first = collect_slurm(Lake.at(tmp_path), CLUSTER, fake_slurm("", running), now=T1)
    assert first.gpu_rows_opened == 0
    assert "scontrol line 0: job 2: sacct does not list it; its GPUs are not read" in [
        str(m) for m in first.malformed
    ]
    listed = fixture_text("two-node-cluster/sacct.txt")

    later = collect_slurm(Lake.at(tmp_path), CLUSTER, fake_slurm(listed, running), now=T2)

    assert later.gpu_rows_opened > 0
    starts = rows(tmp_path, "SELECT DISTINCT start_ts FROM job_gpus WHERE job_id = '2'")
    assert starts == [(utc("2026-12-02T13:17:30"),)]  # the job's start, not this run's


def test_a_copy_of_another_users_job_in_a_comment_takes_none_of_its_gpus(
    tmp_path, fake_slurm, fixture_text
):
    """A second record of job 2 (alice's) from another job's comment, claiming other GPUs
    under another user: sacct vouches for alice's copy only, which is read; one claiming
    alice too cannot be told from hers, and neither is read."""
    running = fixture_text("two-node-cluster/scontrol_show_job_d_running.txt")
    listed = fixture_text("two-node-cluster/sacct.txt")
    stolen = running.replace("UserId=alice(1001)", "UserId=mallory(1666)").replace(
        "IDX:2-5", "IDX:0-7"
    )

    other_user = collect_slurm(
        Lake.at(tmp_path / "a"), CLUSTER, fake_slurm(listed, running + "\n" + stolen), now=T1
    )
    same_user = collect_slurm(
        Lake.at(tmp_path / "b"),
        CLUSTER,
        fake_slurm(listed, running + "\n" + running.replace("IDX:2-5", "IDX:0-7")),
        now=T1,
    )

    indices = rows(tmp_path / "a", "SELECT gpu_index FROM job_gpus WHERE job_id = '2' ORDER BY 1")
    assert indices == [(2,), (3,), (4,), (5,)]  # alice's own
    assert any("job 2: sacct lists another user or nodes" in str(m) for m in other_user.malformed)
    assert same_user.gpu_rows_opened == 0
    assert any("job 2 is listed 2 times" in str(m) for m in same_user.malformed)


def test_a_running_job_whose_gpus_no_record_maps_is_named_among_the_unmapped(
    tmp_path, fake_slurm, fixture_text
):
    """A job's own name or comment can make its scontrol record unreadable (a line break and a
    second `UserId=` line), and two agreeing copies cannot be told apart: either way its GPUs
    are not read and its samples stay unattributed. It was said only as a malformed line,
    never among the running jobs whose GPUs no index maps: a user could hide their usage."""
    running = fixture_text("two-node-cluster/scontrol_show_job_d_running.txt")
    listed = fixture_text("two-node-cluster/sacct.txt").replace(
        "2|2|alice|research|gpu|CANCELLED by 1001|2026-12-02T13:17:29|2026-12-02T13:17:30|"
        "2026-12-02T13:17:32|",
        "2|2|alice|research|gpu|RUNNING|2026-12-02T13:17:29|2026-12-02T13:17:30|Unknown|",
    )
    assert "|RUNNING|" in listed
    unreadable = running.replace(
        "JobId=2 JobName=big-sweep\n", "JobId=2 JobName=big-sweep\n   UserId=alice(1001)\n"
    )
    assert unreadable != running

    hidden = collect_slurm(Lake.at(tmp_path / "a"), CLUSTER, fake_slurm(listed, unreadable), now=T1)
    twice = collect_slurm(
        Lake.at(tmp_path / "b"), CLUSTER, fake_slurm(listed, running + "\n" + running), now=T1
    )
    mapped = collect_slurm(Lake.at(tmp_path / "c"), CLUSTER, fake_slurm(listed, running), now=T1)
    again = collect_slurm(Lake.at(tmp_path / "c"), CLUSTER, fake_slurm(listed, unreadable), now=T2)

    assert hidden.gpu_rows_opened == 0 and "2" in hidden.unmapped_jobs
    assert twice.gpu_rows_opened == 0 and "2" in twice.unmapped_jobs
    assert mapped.gpu_rows_opened > 0 and "2" not in mapped.unmapped_jobs
    assert "2" not in again.unmapped_jobs  # mapped at an earlier run: its rows stay open


def test_jobs_sacct_no_longer_lists_are_asked_for_three_runs_only(tmp_path, early, fake_slurm):
    collect_slurm(Lake.at(tmp_path), CLUSTER, early, now=T1)
    asked = []
    for minute in range(1, 6):
        empty = fake_slurm("")
        collect_slurm(Lake.at(tmp_path), CLUSTER, empty, now=T1 + dt.timedelta(minutes=minute))
        asked.append(len(empty.calls_of("sacct --parsable2")) - 1)

    assert asked == [1, 1, 1, 0, 0]
