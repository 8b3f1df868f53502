"""Acceptance of the Slurm collector (issue #4) against a real Slurm 22.05 with slurmdbd.

The tests run in file order on one lake and build on each other, as collection runs do: the
first run lands the workload; a second lands nothing; a job finishes and is updated; slurmdbd,
then slurmctld, go down (a clear error, nothing landed) and come back (the next run catches up).
The collector runs through its real runner (`run_command`: real sacct and scontrol); what it
landed is compared with what this module reads from sacct and scontrol itself (cluster.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import shutil
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from collector.sources.slurm.collect import SlurmCollectResult, collect_slurm, run_command
from tests.slurm_live.cluster import (
    CLUSTER,
    STATE_DIR,
    SlurmCluster,
    Workload,
    epoch_ms,
    expected_jobs,
    seconds,
)
from warehouse.connection import connect
from warehouse.lake import Lake

# The workload waits ~90 s for a time limit to strike; a session may first wait for another
# one to release the cluster (conftest.LOCK_WAIT_S).
pytestmark = [pytest.mark.live, pytest.mark.slow, pytest.mark.timeout(900)]

ALL_TIME = "--starttime=2000-01-01T00:00:00"  # the accounting database holds this session only
JOB_COLUMNS = (
    "cluster",
    "job_id",
    "job_id_raw",
    "user",
    "account",
    "partition",
    "qos",
    "job_name",
    "state",
    "exit_code",
    "submit_ts",
    "start_ts",
    "end_ts",
    "time_limit_s",
    "gpus",
    "gpus_requested",
    "gpu_type",
    "nodes",
    "cpus",
    "mem_req_mib",
    "cpu_time_s",
    "max_rss_mib",
    "interactive",
    "requeues",
    "source",
)


# ---- reading the lake and the collector's state


def lake_rows(lake: Path, query: str) -> list[dict[str, Any]]:
    """Rows of a query over the lake's views; timestamps as epoch milliseconds."""
    con = connect(lake)
    try:
        table = con.sql(query).arrow()
    finally:
        con.close()
    if isinstance(table, pa.RecordBatchReader):
        table = table.read_all()
    columns = [
        col.cast(pa.timestamp("ms", col.type.tz)).cast(pa.int64())
        if pa.types.is_timestamp(col.type)
        else col
        for col in table.columns
    ]
    rows: list[dict[str, Any]] = pa.Table.from_arrays(columns, names=table.column_names).to_pylist()
    return rows


def latest_jobs(lake: Path) -> dict[str, dict[str, Any]]:
    rows = lake_rows(lake, "SELECT * FROM jobs_latest")
    by_id = {r["job_id"]: r for r in rows}
    assert len(by_id) == len(rows), "jobs_latest has more than one row for a job"
    return by_id


def job_gpu_rows(lake: Path) -> list[dict[str, Any]]:
    return lake_rows(lake, "SELECT * FROM job_gpus ORDER BY job_id, node, gpu_index, start_ts")


def versions(lake: Path) -> dict[str, int]:
    rows = lake_rows(lake, "SELECT job_id, count(*) AS n FROM jobs GROUP BY job_id")
    return {r["job_id"]: r["n"] for r in rows}


def new_versions(lake: Path, before: dict[str, int]) -> dict[str, dict[str, Any]]:
    """The jobs landed again since `before` (from versions()), each with what changed."""
    rows = lake_rows(lake, "SELECT * FROM jobs ORDER BY job_id, updated_ts")
    now = versions(lake)
    out: dict[str, dict[str, Any]] = {}
    for older, newer in zip(rows, rows[1:], strict=False):
        job_id = newer["job_id"]
        if older["job_id"] == job_id and now[job_id] > before.get(job_id, 0):
            out[job_id] = {
                k: (older[k], newer[k])
                for k in JOB_COLUMNS
                if older[k] != newer[k] and k != "updated_ts"
            }
    return out


def checkpoint_ms(lake: Path) -> int:
    con = sqlite3.connect(lake / "_state" / "slurm.sqlite")
    try:
        (value,) = con.execute(
            "SELECT window_end_ms FROM checkpoint WHERE cluster = ?", (CLUSTER,)
        ).fetchone()
    finally:
        con.close()
    return int(value)


def mismatches(landed: dict[str, Any], expected: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Columns where the lake differs from sacct: {column: (lake, sacct)}."""
    out = {}
    for column in JOB_COLUMNS:
        got, want = landed[column], expected[column]
        if isinstance(want, float) and isinstance(got, float):
            if math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-3):
                continue
        if got != want:
            out[column] = (got, want)
    return out


def assert_lake_matches_sacct(
    cluster: SlurmCluster, lake: Path, job_ids: Any = None
) -> dict[str, dict[str, Any]]:
    """Every job sacct knows (or just `job_ids`) is in jobs_latest exactly as sacct reports it."""
    expected = expected_jobs(cluster, cluster.sacct(ALL_TIME))
    landed = latest_jobs(lake)
    wanted = set(expected) if job_ids is None else set(job_ids)
    assert wanted <= set(landed), f"not landed: {sorted(wanted - set(landed))}"
    wrong = {j: mismatches(landed[j], expected[j]) for j in sorted(wanted)}
    assert not {j: m for j, m in wrong.items() if m}, "fields differ from sacct (lake, sacct)"
    return expected


def invoke_collect(lake: Path) -> Result:
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
    return runner.invoke(cli, ["collect", "slurm", "--cluster", CLUSTER, "--lake", str(lake)])


def the_error_line(result: Result) -> str:
    """The failed command's output: exactly one line, `Error: …`, exit 1, no traceback."""
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- the runs


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("live-slurm") / "lake"


@pytest.fixture(scope="module")
def first_run(workload: Workload, lake: Path) -> SlurmCollectResult:
    return collect_slurm(Lake.at(lake), CLUSTER)


def test_the_workload_covers_every_kind_of_job(slurm_cluster, workload):
    """What the acceptance asks of the workload, as sacct records it."""
    jobs = expected_jobs(slurm_cluster, slurm_cluster.sacct(ALL_TIME))

    assert set(jobs) == set(workload.all)
    assert {jobs[j]["user"] for j in jobs} == {"alice", "bob", "carol"}
    assert {jobs[j]["account"] for j in jobs} == {"research", "ml"}
    assert jobs[workload.multi]["gpus"] == 2
    assert jobs[workload.running]["nodes"] == ["gpu-node01", "gpu-node02"]
    assert all(jobs[t]["state"] == "COMPLETED" for t in workload.array)
    assert (jobs[workload.failed]["state"], jobs[workload.failed]["exit_code"]) == ("FAILED", "1:0")
    assert jobs[workload.cancelled]["state"].startswith("CANCELLED by ")
    assert jobs[workload.timeout]["state"] == "TIMEOUT"
    for job in workload.holding_gpus:
        assert jobs[job]["state"] == "RUNNING"
    assert jobs[workload.pending]["state"] == "PENDING"


def test_first_run_lands_every_job_as_sacct_reports_it(slurm_cluster, workload, lake, first_run):
    expected = assert_lake_matches_sacct(slurm_cluster, lake)

    assert set(latest_jobs(lake)) == set(workload.all)
    assert (first_run.jobs_new, first_run.jobs_updated) == (len(expected), 0)
    assert first_run.malformed == ()
    assert first_run.unmapped_jobs == ()
    # Steps fold into their job: the failed job's batch and srun steps are not jobs (their CPU
    # time is its), and the timed-out job's peak memory comes from its batch step.
    steps = {r["JobID"] for r in slurm_cluster.sacct(ALL_TIME) if "." in r["JobID"]}
    assert {f"{workload.failed}.batch", f"{workload.failed}.0"} <= steps
    assert expected[workload.timeout]["max_rss_mib"] is not None


def test_first_run_agrees_with_scontrol(slurm_cluster, workload, lake, first_run):
    """Every job slurmctld still lists: the same owner, place, times, limit and resources."""
    landed = latest_jobs(lake)
    listed = slurm_cluster.scontrol_jobs()

    assert set(listed) == set(workload.all)  # MinJobAge keeps ended jobs listed for 5 minutes
    for job_id, job in listed.items():
        row = landed[job_id]
        started = job["JobState"] != "PENDING"  # a pending job's StartTime is an estimate
        assert row["job_id_raw"] == job["JobId"], job_id
        assert row["user"] == job["UserId"].split("(", 1)[0], job_id
        assert (row["account"], row["partition"], row["qos"]) == (
            job["Account"],
            job["Partition"],
            job["QOS"],
        ), job_id
        assert row["job_name"] == job["JobName"], job_id
        assert row["state"].split(" ", 1)[0] == job["JobState"], job_id
        assert row["submit_ts"] == epoch_ms(job["SubmitTime"]), job_id
        assert row["time_limit_s"] == seconds(job["TimeLimit"]), job_id
        if started:
            gpus = dict(t.split("=", 1) for t in job["TRES"].split(","))
            assert row["start_ts"] == epoch_ms(job["StartTime"]), job_id
            assert row["cpus"] == int(job["NumCPUs"]), job_id
            assert row["gpus"] == int(gpus.get("gres/gpu", 0)), job_id
            assert row["nodes"] == slurm_cluster.hostnames(job["NodeList"]), job_id
        if job["JobState"] not in ("RUNNING", "PENDING"):
            assert row["end_ts"] == epoch_ms(job["EndTime"]), job_id
        else:
            assert row["end_ts"] is None, job_id


def test_running_jobs_gpu_indices_match_scontrol(slurm_cluster, workload, lake, first_run):
    listed = slurm_cluster.scontrol_jobs()
    want = {
        (job_id, node, index, epoch_ms(job["StartTime"]))
        for job_id, job in listed.items()
        if job["JobState"] == "RUNNING"
        for node, indices in job["gpu_idx"].items()
        for index in indices
    }
    rows = job_gpu_rows(lake)
    got = {(r["job_id"], r["node"], r["gpu_index"], r["start_ts"]) for r in rows}

    assert got == want
    assert all(r["end_ts"] is None and r["mapping"] == "scontrol-idx" for r in rows)
    assert all(r["gpu_uuid"] is None and r["mig_instance"] is None for r in rows)
    assert first_run.gpu_rows_opened == len(want) == 2 + 2 + 1 + 2 + 1
    by_job: dict[tuple[str, str], set[int]] = {}
    for job_id, node, index, _ in got:
        by_job.setdefault((job_id, node), set()).add(index)
    assert {j for j, _ in by_job} == set(workload.holding_gpus)
    assert set(listed[workload.running]["gpu_idx"]) == {"gpu-node01", "gpu-node02"}
    # The job itself saw the same GPUs (SLURM_JOB_GPUS on its batch node; no cgroups here,
    # so these are the node's own GPU ordinals).
    for job_id in workload.holding_gpus:
        words = dict(w.split("=", 1) for w in slurm_cluster.job_output(job_id).split())
        seen = {int(i) for i in words["gpus"].split(",")}
        assert by_job[(job_id, words["node"])] == seen, job_id


def test_a_second_run_lands_nothing_new(slurm_cluster, workload, lake, first_run):
    jobs_before, gpus_before = versions(lake), job_gpu_rows(lake)

    again = collect_slurm(Lake.at(lake), CLUSTER)

    assert again.jobs_seen == len(workload.all)
    assert (again.jobs_landed, again.gpu_rows_opened, again.gpu_rows_closed) == (0, 0, 0)
    assert again.window_start == first_run.window_end - dt.timedelta(minutes=10)
    assert versions(lake) == jobs_before
    assert job_gpu_rows(lake) == gpus_before


def test_a_job_finishing_between_runs_is_updated_not_duplicated(slurm_cluster, workload, lake):
    gpus_before = job_gpu_rows(lake)
    slurm_cluster.release(workload.multi)
    slurm_cluster.wait_ended(workload.multi, "COMPLETED")

    run = collect_slurm(Lake.at(lake), CLUSTER)

    assert (run.jobs_new, run.jobs_updated) == (0, 1)
    assert (run.gpu_rows_opened, run.gpu_rows_closed) == (0, 2)
    assert versions(lake) == {j: 2 if j == workload.multi else 1 for j in workload.all}
    expected = assert_lake_matches_sacct(slurm_cluster, lake)
    assert expected[workload.multi]["state"] == "COMPLETED"
    # Its two GPU rows are closed at the job's end, in place: no open copy is left beside them.
    rows = job_gpu_rows(lake)
    assert len(rows) == len(gpus_before)
    mine = [r for r in rows if r["job_id"] == workload.multi]
    assert len(mine) == 2
    assert {r["end_ts"] for r in mine} == {expected[workload.multi]["end_ts"]}
    strip = [{k: v for k, v in r.items() if k != "end_ts"} for r in rows]
    assert strip == [{k: v for k, v in r.items() if k != "end_ts"} for r in gpus_before]
    assert all(r["end_ts"] is None for r in rows if r["job_id"] != workload.multi)


def test_a_requeued_job_is_updated_and_its_first_run_gives_up_its_gpus_when_it_ended(
    slurm_cluster, workload, lake
):
    c, job = slurm_cluster, workload.requeued
    [first] = [r for r in job_gpu_rows(lake) if r["job_id"] == job]
    c.run("scontrol", "requeue", job)
    c.wait_for("the job to wait again", lambda: c.scontrol_jobs()[job]["JobState"] == "PENDING")
    # Slurm holds a requeued job back for two minutes (BeginTime); let it start again now.
    c.run("scontrol", "update", f"jobid={job}", "StartTime=now")
    c.wait_for(
        "the job to run again, in sacct",
        lambda: [r["State"] for r in c.sacct_runs(job)] == ["REQUEUED", "RUNNING"],
    )
    [earlier, _] = c.sacct_runs(job)
    live = c.scontrol_jobs()[job]

    run = collect_slurm(Lake.at(lake), CLUSTER)

    assert (run.jobs_new, run.jobs_updated) == (0, 1)
    assert (run.gpu_rows_opened, run.gpu_rows_closed) == (1, 1)
    expected = assert_lake_matches_sacct(c, lake)
    assert (expected[job]["requeues"], expected[job]["state"]) == (1, "RUNNING")
    [(node, [index])] = live["gpu_idx"].items()
    assert [r for r in job_gpu_rows(lake) if r["job_id"] == job] == sorted(
        [
            # The first run's GPU ends when sacct says that run ended, not at the restart.
            {**first, "end_ts": epoch_ms(earlier["End"])},
            {**first, "node": node, "gpu_index": index, "start_ts": epoch_ms(live["StartTime"])},
        ],
        key=lambda r: (r["node"], r["gpu_index"], r["start_ts"]),
    )
    assert epoch_ms(earlier["Start"]) == first["start_ts"]

    c.release(job)
    c.wait_ended(job, "COMPLETED")
    done = collect_slurm(Lake.at(lake), CLUSTER)

    assert (done.jobs_updated, done.gpu_rows_closed) == (1, 1)
    expected = assert_lake_matches_sacct(c, lake)
    ends = sorted(r["end_ts"] for r in job_gpu_rows(lake) if r["job_id"] == job)
    assert ends == sorted([epoch_ms(earlier["End"]), expected[job]["end_ts"]])


class Outage:
    """Stops daemons for one test and makes sure they run again after it."""

    def __init__(self, cluster: SlurmCluster) -> None:
        self.cluster = cluster
        self.down: list[str] = []

    def stop(self, daemon: str) -> None:
        self.cluster.stop(daemon)
        self.down.append(daemon)

    def end(self) -> None:
        self.cluster.start()  # idempotent: starts just what is not running
        self.down.clear()


@pytest.fixture
def outage(slurm_cluster: SlurmCluster) -> Iterator[Outage]:
    handle = Outage(slurm_cluster)
    yield handle
    if handle.down:  # the test failed before it ended the outage
        handle.end()


def check_outage_and_catch_up(
    cluster: SlurmCluster, lake: Path, outage: Outage, daemon: str, job: str
) -> tuple[str, str]:
    """Stop `daemon`, let `job` (a gated one holding GPUs) end meanwhile, run the command; start
    the daemon again and run it once more. Returns (the error line, the catching-up output).

    The failed run lands nothing and keeps the checkpoint. The next run's window starts at that
    checkpoint (minus the overlap) and lands a new version of exactly the jobs whose sacct
    record changed meanwhile: `job`, and any that Slurm rewrote on its way back.
    """
    sacct_before = expected_jobs(cluster, cluster.sacct(ALL_TIME))
    checkpoint, jobs_before, gpus_before = checkpoint_ms(lake), versions(lake), job_gpu_rows(lake)
    held = [r for r in gpus_before if r["job_id"] == job]
    assert held and all(r["end_ts"] is None for r in held)
    outage.stop(daemon)
    cluster.release(job)
    if daemon == "slurmdbd":  # slurmctld sees the end and keeps the record for slurmdbd
        cluster.wait_for(
            f"slurmctld to record the end of job {job}",
            lambda: cluster.scontrol_jobs()[job]["JobState"] == "COMPLETED",
        )

    failed = invoke_collect(lake)

    line = the_error_line(failed)
    assert checkpoint_ms(lake) == checkpoint
    assert (versions(lake), job_gpu_rows(lake)) == (jobs_before, gpus_before)

    outage.end()
    cluster.wait_ended(job, "COMPLETED")
    sacct_after = expected_jobs(cluster, cluster.settled_sacct(ALL_TIME))
    caught_up = invoke_collect(lake)

    assert caught_up.exit_code == 0, caught_up.output
    assert f"{utc(checkpoint - 600_000)} to " in caught_up.output  # from the kept checkpoint
    changed = {j for j, row in sacct_after.items() if row != sacct_before.get(j)}
    assert job in changed
    assert set(new_versions(lake, jobs_before)) == changed
    n = len(changed)
    assert (
        f"{n} landed (0 new, {n} updated); GPU allocations: 0 opened, {len(held)} closed"
        in caught_up.output
    )
    assert checkpoint_ms(lake) > checkpoint
    expected = assert_lake_matches_sacct(cluster, lake)
    closed = [r for r in job_gpu_rows(lake) if r["job_id"] == job]
    assert [r["end_ts"] for r in closed] == [expected[job]["end_ts"]] * len(held)
    return line, caught_up.output


def test_slurmdbd_down_is_a_clear_error_and_the_next_run_catches_up(
    slurm_cluster, workload, lake, outage
):
    line, _ = check_outage_and_catch_up(slurm_cluster, lake, outage, "slurmdbd", workload.dbd_gated)

    assert line.startswith("Error: sacct failed (exit 1): ")
    assert "Connection refused" in line


def test_slurmctld_down_is_a_clear_error_and_the_next_run_catches_up(
    slurm_cluster, workload, lake, outage
):
    # The job's script ends while the controller is away; slurmd reports it once it is back.
    # (slurmctld also re-sends the jobs it still holds to slurmdbd on its way back, and some
    # records change: `CANCELLED by 1002` becomes `CANCELLED`, an exit code 0:0 becomes 0:15.
    # The collector lands those as new versions too, as sacct now reports them.)
    line, _ = check_outage_and_catch_up(
        slurm_cluster, lake, outage, "slurmctld", workload.ctld_gated
    )

    assert line.startswith("Error: scontrol failed (exit 1): ")
    assert "Unable to contact slurm controller" in line
    # The running job kept its GPUs through the restart.
    still_open = {r["job_id"] for r in job_gpu_rows(lake) if r["end_ts"] is None}
    assert still_open == {workload.running}


def test_a_malformed_sacct_line_is_skipped_counted_reported_and_the_rest_lands(
    slurm_cluster, workload, tmp_path, caplog
):
    """A real sacct answer with one job's line cut short (as a broken pipe would leave it)."""
    garbled: list[int] = []

    def cut_one_line(argv: list[str]) -> str:
        out = run_command(argv)
        is_window = argv[0] == "sacct" and "--helpformat" not in argv
        if not is_window or any(a.startswith("--jobs=") for a in argv):
            return out
        # (the collector's own delimiter, as it asked sacct for it)
        delimiter = next(a for a in argv if a.startswith("--delimiter=")).split("=", 1)[1]
        lines = out.splitlines(keepends=True)
        at = next(i for i, ln in enumerate(lines) if ln.split(delimiter, 1)[0] == workload.failed)
        lines[at] = delimiter.join(lines[at].split(delimiter)[:8]) + "\n"
        garbled.append(at + 1)
        return "".join(lines)

    lake = tmp_path / "lake"
    with caplog.at_level(logging.WARNING, logger="collector.sources.slurm.collect"):
        result = collect_slurm(Lake.at(lake), CLUSTER, cut_one_line)

    [bad] = result.malformed
    assert (bad.source, bad.line_no) == ("sacct", garbled[0])
    assert bad.reason.startswith("8 fields, expected ")
    assert "skipped 1 malformed line(s)" in caplog.text
    others = set(workload.all) - {workload.failed}
    assert set(latest_jobs(lake)) == others
    assert result.jobs_new == len(others)
    assert_lake_matches_sacct(slurm_cluster, lake, others)

    healed = collect_slurm(Lake.at(lake), CLUSTER)  # the real runner: the skipped job lands now

    assert (healed.jobs_new, healed.jobs_updated, healed.malformed) == (1, 0, ())
    assert_lake_matches_sacct(slurm_cluster, lake)


def test_the_command_reports_a_garbage_sacct_line_and_lands_the_rest(
    slurm_cluster, workload, tmp_path, monkeypatch
):
    real_sacct = shutil.which("sacct")
    assert real_sacct is not None
    shim = tmp_path / "bin" / "sacct"
    shim.parent.mkdir()
    shim.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--helpformat*|*--jobs=*) exec ' + real_sacct + ' "$@";; esac\n'
        "out=$(" + real_sacct + ' "$@") || exit $?\n'
        "printf '%s\\n' \"$out\" | sed '2i garbage from a broken pipe'\n",
        encoding="utf-8",
    )
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    lake = tmp_path / "lake"

    result = invoke_collect(lake)

    assert result.exit_code == 0, result.output
    n = len(workload.all)
    assert f"{n} job(s) seen, {n} landed ({n} new, 0 updated)" in result.output
    assert "1 malformed line(s) skipped: sacct line 2: 1 fields, expected " in result.output
    assert_lake_matches_sacct(slurm_cluster, lake)


def _our_processes(conf: Path) -> dict[int, str]:
    """Daemons of the test cluster (by pid file) and processes of its jobs (by environment)."""
    found: dict[int, str] = {}
    for pid_file in [*STATE_DIR.glob("run/*.pid"), *STATE_DIR.glob("*/*.pid")]:
        text = pid_file.read_text().strip()
        if text.isdigit() and Path(f"/proc/{text}").exists():
            found[int(text)] = pid_file.name
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SLURM_CONF={conf}".encode() in environ and any(
            e.startswith(b"SLURM_JOB_ID=") for e in environ
        ):
            found[int(proc.name)] = "job"
    return found


def test_stopping_the_cluster_leaves_no_process_behind(slurm_cluster, workload):
    running = _our_processes(slurm_cluster.conf)
    assert "job" in running.values()  # the two-node job is still running
    assert {"slurmctld.pid", "slurmdbd.pid", "mariadbd.pid"} <= set(running.values())

    slurm_cluster.stop()
    slurm_cluster.stop()  # idempotent

    assert _our_processes(slurm_cluster.conf) == {}
