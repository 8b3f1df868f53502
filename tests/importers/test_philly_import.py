"""Importing the real Philly sample (tests/fixtures/philly): per-job samples and utilisation in
job_usage equal an independent computation from the raw files, re-imports add nothing, and a
gzipped cluster_gpu_util imports the same rows."""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import shutil
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from app.commands.philly import command
from collector.errors import CollectorError, MalformedSample
from collector.sources.philly.trace import ImportResult
from tests.importers.philly_lake import CLUSTER, FIXTURE, attributed_philly_lake, import_fixture
from warehouse.attribution import AttributionConfig, attribute
from warehouse.connection import connect
from warehouse.lake import Lake
from warehouse.schema import RAW_TABLES
from warehouse.writer import write_batch

PACIFIC_OFFSET_H = {"PDT": 7, "PST": 8}  # local + offset = UTC


# ---------------------------------------------------------------- the independent computation


def _job_log_utc(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)


def _util_utc(text: str) -> dt.datetime:
    local, zone = text.rsplit(" ", 1)
    naive = dt.datetime.strptime(local, "%Y-%m-%d %H:%M:%S")
    return (naive + dt.timedelta(hours=PACIFIC_OFFSET_H[zone])).replace(tzinfo=dt.UTC)


def _value(cell: str) -> float | None:
    """Empty and NA are no value; so is anything outside 0-100 (the trace writes -1.0)."""
    if cell in ("", "NA"):
        return None
    value = float(cell)
    return value if 0.0 <= value <= 100.0 else None


def expected_usage() -> dict[str, dict[str, Any]]:
    """Per job, from the raw files with plain Python: the machine-minute-GPU cells with a value
    that fall in [attempt start, attempt end) on the GPUs the attempt held, and their
    utilisation means. A cell with no value is no sample (the minute is unobserved).

    `weighted` follows DESIGN §4: a sample stands for the time to the next sample of its GPU when
    that comes within 2 × 60 s, else for 60 s.
    """
    valued: dict[tuple[str, int], dict[dt.datetime, float]] = defaultdict(dict)
    with open(FIXTURE / "cluster_gpu_util", newline="") as handle:
        rows = csv.reader(handle)
        next(rows)
        for row in rows:
            ts = _util_utc(row[0])
            for index, cell in enumerate(row[2:10]):
                value = _value(cell)
                if value is not None:
                    valued[(row[1], index)][ts] = value
    span: dict[tuple[str, int, dt.datetime], float] = {}
    for (machine, index), seen in valued.items():
        times = sorted(seen)
        for ts, nxt in zip(times, [*times[1:], None], strict=True):
            step = None if nxt is None else (nxt - ts).total_seconds()
            span[(machine, index, ts)] = step if step is not None and step <= 120 else 60.0
    jobs = json.loads((FIXTURE / "cluster_job_log").read_text())
    out = {}
    for job in jobs:
        samples, values, weighted, weights = 0, [], 0.0, 0.0
        for attempt in job["attempts"]:
            start, end = _job_log_utc(attempt["start_time"]), _job_log_utc(attempt["end_time"])
            for detail in attempt["detail"]:
                machine = detail["ip"]
                for gpu in detail["gpus"]:
                    index = int(gpu.removeprefix("gpu"))
                    for ts, value in valued.get((machine, index), {}).items():
                        if not start <= ts < end:
                            continue
                        samples += 1
                        values.append(value)
                        weighted += value * span[(machine, index, ts)]
                        weights += span[(machine, index, ts)]
        out[job["jobid"]] = {
            "samples": samples,
            "plain": sum(values) / len(values) if values else None,
            "weighted": weighted / weights if weights else None,
        }
    return out


def test_the_fixture_has_no_gpu_held_by_two_jobs_at_once():
    """A precondition of the comparison below: every sample has at most one owner."""
    held = defaultdict(list)
    for job in json.loads((FIXTURE / "cluster_job_log").read_text()):
        for a in job["attempts"]:
            for d in a["detail"]:
                for gpu in d["gpus"]:
                    held[(d["ip"], gpu)].append((a["start_time"], a["end_time"]))
    for spans in held.values():
        spans.sort()
        assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:], strict=False))


def test_util_suffixes_agree_with_us_pacific_time():
    """The suffix of every util time is what America/Los_Angeles says for that instant."""
    from zoneinfo import ZoneInfo

    pacific = ZoneInfo("America/Los_Angeles")
    with open(FIXTURE / "cluster_gpu_util", newline="") as handle:
        rows = csv.reader(handle)
        next(rows)
        for row in rows:
            assert _util_utc(row[0]).astimezone(pacific).tzname() == row[0][-3:], row[0]


# ---------------------------------------------------------------- the import


def _import(root: Path, directory: Path = FIXTURE) -> ImportResult:
    return import_fixture(root, directory)


def _one(con: duckdb.DuckDBPyConnection, query: str) -> tuple[Any, ...]:
    row = con.execute(query).fetchone()
    assert row is not None
    return row


def _counts(root: Path) -> dict[str, int]:
    con = connect(root)
    return {t: _one(con, f"SELECT count(*) FROM {t}")[0] for t in RAW_TABLES}


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample imported (no malformed line) and attributed, shared with the other files that
    read it (tests/importers/philly_lake.py)."""
    return attributed_philly_lake(tmp_path_factory)


@pytest.fixture(scope="module")
def lake_con(lake: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """One connection over the attributed sample for the tests that only read it."""
    with connect(lake, require=("job_usage",)) as con:
        yield con


def test_import_lands_every_job_allocation_and_sample(tmp_path):
    result = _import(tmp_path / "lake")
    assert (result.jobs, result.allocations, result.util_lines) == (86, 86, 1869)
    # 708 GPUs held by the 86 attempts, as the job log lists them
    jobs = json.loads((FIXTURE / "cluster_job_log").read_text())
    held = sum(len(d["gpus"]) for j in jobs for a in j["attempts"] for d in a["detail"])
    assert result.job_gpus == held == 708
    assert result.invalid_values == 266  # the -1.0 cells
    # 73 machines listed with 2 GPUs run gpu2..gpu7 (msr-fiddle/philly-traces#8)
    assert result.machines_recounted == 73
    counts = _counts(tmp_path / "lake")
    assert counts["jobs"] == 86 and counts["job_gpus"] == 708
    assert counts["gpu_samples"] == result.samples


def test_job_usage_matches_an_independent_computation_from_the_raw_files(lake_con):
    expected = expected_usage()
    con = lake_con
    rows = con.execute("SELECT job_id, samples, gpu_util_pct_mean, gpus FROM job_usage").fetchall()
    got = {row[0]: row[1:] for row in rows}
    assert set(got) == set(expected)
    assert sum(e["samples"] for e in expected.values()) > 5000  # the comparison is not vacuous
    for job_id, want in expected.items():
        samples, mean, _gpus = got[job_id]
        assert samples == want["samples"], job_id
        if want["weighted"] is None:
            assert mean is None, job_id
        else:
            assert mean == pytest.approx(want["weighted"], rel=1e-6, abs=1e-6), job_id
            # samples here are a regular minute apart (gaps are over 2 min): weighting by span
            # changes nothing, so the mean is also the plain mean of the values
            assert mean == pytest.approx(want["plain"], rel=1e-6, abs=1e-6), job_id


def test_jobs_carry_the_job_log_in_utc(lake_con):
    con = lake_con
    row = _one(
        con,
        "SELECT user, account, state, submit_ts, start_ts, end_ts, gpus, nodes, requeues,"
        " updated_ts FROM jobs WHERE job_id = 'application_1504131676014_15024'",
    )
    utc = dt.UTC
    assert row == (
        "c3b46a",
        "6214e9",
        "FAILED",
        dt.datetime(2017, 9, 20, 23, 44, 19, tzinfo=utc),
        dt.datetime(2017, 10, 9, 2, 34, 57, tzinfo=utc),
        dt.datetime(2017, 10, 9, 2, 44, 22, tzinfo=utc),
        2,
        ["m183"],
        0,
        dt.datetime(2017, 10, 9, 2, 44, 22, tzinfo=utc),
    )
    states = dict(con.execute("SELECT state, count(*) FROM jobs GROUP BY ALL").fetchall())
    assert states == {"COMPLETED": 51, "FAILED": 35}


def test_a_cell_without_a_value_lands_no_sample(lake_con):
    con = lake_con
    total, valued, zero, low, high, first = _one(
        con,
        "SELECT count(*), count(gpu_util_pct), count(*) FILTER (WHERE gpu_util_pct = 0),"
        " min(gpu_util_pct), max(gpu_util_pct), min(ts) FROM gpu_samples",
    )
    assert total == valued == 9744 - 266  # numeric cells less the -1.0 ones
    assert valued > zero
    assert 0 <= low <= high <= 100
    assert first == dt.datetime(2017, 10, 3, 11, 18, tzinfo=dt.UTC)  # 04:18 PDT


@pytest.mark.slow
def test_reimporting_the_same_folder_lands_no_duplicates(lake):
    before = _counts(lake)
    con = connect(lake)
    usage = sorted(
        con.execute("SELECT job_id, samples, gpu_util_pct_mean FROM job_usage").fetchall()
    )
    _import(lake)
    assert _counts(lake) == before
    attribute(connect(lake), lake, AttributionConfig())
    con = connect(lake)
    again = sorted(
        con.execute("SELECT job_id, samples, gpu_util_pct_mean FROM job_usage").fetchall()
    )
    assert [r[:2] for r in again] == [r[:2] for r in usage]
    for a, b in zip(again, usage, strict=True):
        assert (a[2] is None and b[2] is None) or math.isclose(a[2], b[2], rel_tol=1e-9)


def test_importing_an_updated_trace_replaces_the_last_one_whole(tmp_path):
    # the job log lands by submit day: a job a later trace no longer has (or submitted on
    # another day) stayed, and a job's old record beside its new allocations showed 48.3
    # GPU-hours over a 9-minute span
    import json

    folder = tmp_path / "v2"
    folder.mkdir()
    for name in ("cluster_machine_list", "cluster_gpu_util"):
        shutil.copy(FIXTURE / name, folder / name)
    log = json.loads((FIXTURE / "cluster_job_log").read_text())
    kept = log[:-6]
    kept[0]["submitted_time"] = "2017-09-19 23:44:19"  # a day earlier: another partition
    (folder / "cluster_job_log").write_text(json.dumps(kept))
    lake = tmp_path / "lake"
    _import(lake)
    sample_rows = _counts(lake)["gpu_samples"]
    result = _import(lake, folder)

    assert result.jobs == 80
    con = connect(lake)
    assert _one(con, "SELECT count(*), count(DISTINCT job_id) FROM jobs") == (80, 80)
    dropped = {job["jobid"] for job in log[-6:]}
    assert not dropped & {r[0] for r in con.execute("SELECT job_id FROM job_gpus").fetchall()}
    (submit,) = _one(con, f"SELECT submit_ts FROM jobs WHERE job_id = '{log[0]['jobid']}'")
    assert submit == _job_log_utc("2017-09-19 23:44:19")  # the new record only
    assert _counts(lake)["gpu_samples"] == sample_rows


def test_a_gzipped_util_file_imports_the_same_rows(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    for name in ("cluster_job_log", "cluster_machine_list", "cluster_gpu_util.gz"):
        shutil.copy(FIXTURE / name, folder / name)
    plain, gz = tmp_path / "plain", tmp_path / "gz"
    _import(plain)
    _import(gz, folder)
    query = "SELECT * EXCLUDE (job_id) FROM gpu_samples ORDER BY node, gpu_index, ts"
    assert connect(gz).execute(query).fetchall() == connect(plain).execute(query).fetchall()


# ---------------------------------------------------------------- the command


def test_the_command_imports_and_summarises(tmp_path):
    runner = CliRunner()
    lake = tmp_path / "lake"
    result = runner.invoke(command, ["philly", str(FIXTURE), "--cluster", "p", "--lake", str(lake)])
    assert result.exit_code == 0, result.output
    assert "86 jobs, 86 allocations (708 job-GPU rows)" in result.output
    assert "0 malformed lines skipped" in result.output
    assert "gpuledger attribute" in result.output
    assert _counts(lake)["jobs"] == 86


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("index", "GPU name 'gpu40000': past the GPUs a machine has"),
        ("count", "gpus 40000: more than a machine has"),
        ("machine", "cluster_machine_list line"),
    ],
)
def test_a_gpu_past_what_a_machine_has_is_skipped_not_a_traceback(tmp_path, damage, said):
    # the contract's gpu_index is an int16: 40000 failed the whole import (after some tables
    # had landed)
    trace = tmp_path / "trace"
    shutil.copytree(FIXTURE, trace)
    log = json.loads((trace / "cluster_job_log").read_text())
    if damage == "index":
        log[0]["attempts"][0]["detail"][0]["gpus"] = ["gpu40000"]
    elif damage == "count":
        log[0]["attempts"][0]["detail"][0]["gpus"] = 40000
    (trace / "cluster_job_log").write_text(json.dumps(log))
    if damage == "machine":
        with (trace / "cluster_machine_list").open("a") as machines:
            machines.write("m9999,40000, 12GB\n")
    result = CliRunner().invoke(
        command, ["philly", str(trace), "--cluster", "p", "--lake", str(tmp_path / "lake")]
    )
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and said in result.output


def test_the_command_is_registered_under_gpuledger_import():
    from app.cli import cli

    result = CliRunner().invoke(cli, ["import", "philly", "--help"])
    assert result.exit_code == 0, result.output
    assert "Import the Microsoft Philly trace" in result.output


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["philly", "/no/such/folder", "--cluster", "p"], 1, "does not exist"),
        (["philly", "{empty}", "--cluster", "p"], 1, "has no cluster_job_log"),
        (["philly", str(FIXTURE)], 2, "Missing option '--cluster'"),
    ],
)
def test_the_command_fails_with_one_clear_line(tmp_path, args, code, fragment):
    args = [a.replace("{empty}", str(tmp_path)) for a in args]
    result = CliRunner().invoke(command, [*args, "--lake", str(tmp_path / "lake")])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and fragment in errors[0], result.output


def test_a_cluster_holding_another_sources_data_is_refused_and_left_as_it_was(tmp_path):
    """Imported into a cluster that has its scheduler's records, the trace's 86 jobs and their
    samples merged into that cluster's figures, with nothing to tell them apart."""
    from tests.marts import rows as r

    lake = tmp_path / "lake"
    r.land(lake, "jobs", [r.job("1", 0, 3600)], batch_id="slurm-della-1")
    before = _counts(lake)

    result = CliRunner().invoke(
        command, ["philly", str(FIXTURE), "--cluster", r.CLUSTER, "--lake", str(lake)]
    )

    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "already holds jobs that are not this trace's" in errors[0]
    assert _counts(lake) == before
    # a cluster of its own (and this trace again into it) imports
    assert _import(lake).jobs == 86 and _import(lake).jobs == 86


def test_a_malformed_util_line_is_skipped_and_reported_by_the_command(tmp_path):
    folder = tmp_path / "trace"
    shutil.copytree(FIXTURE, folder)
    with open(folder / "cluster_gpu_util", "a") as handle:
        handle.write("this is not a sample\n")
    result = CliRunner().invoke(
        command, ["philly", str(folder), "--cluster", "p", "--lake", str(tmp_path / "lake")]
    )
    assert result.exit_code == 0, result.output
    assert "1 malformed lines skipped (cluster_gpu_util 1)" in result.output
    assert "line 1871" in result.output


# ---------------------------------------------------------------- a failed import lands nothing


def _files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


def _truncated_trace(tmp_path: Path) -> Path:
    folder = tmp_path / "truncated"
    folder.mkdir()
    for name in ("cluster_job_log", "cluster_machine_list"):
        shutil.copy(FIXTURE / name, folder / name)
    gz = (FIXTURE / "cluster_gpu_util.gz").read_bytes()
    (folder / "cluster_gpu_util.gz").write_bytes(gz[:10_000])
    return folder


def test_a_truncated_util_file_fails_the_import_with_nothing_landed(tmp_path):
    # the jobs and their allocations had landed before the util file failed: half a cluster,
    # with no samples and no inventory
    lake = tmp_path / "lake"
    result = CliRunner().invoke(
        command, ["philly", str(_truncated_trace(tmp_path)), "--cluster", "p", "--lake", str(lake)]
    )
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "cannot read past byte 10000" in errors[0], result.output
    assert "nothing was landed: the lake is as it was before this import" in errors[0]
    assert _files(lake) == {}
    assert not list((lake / "_state").glob("philly-import-*"))  # no staged samples left


def test_what_a_killed_import_staged_goes_with_the_clusters_next_import(tmp_path):
    # review: a SIGKILL or an out-of-memory kill left `_state/philly-import-*` (up to the
    # trace's samples) that nothing removed
    from collector.sources.philly.trace import _staging

    lake = Lake.at(tmp_path / "lake")
    with _staging(lake, CLUSTER) as staging:
        left = Path(staging)
    left.mkdir()  # as an import killed mid-way leaves it
    (left / "samples-00000.arrow").write_bytes(b"x" * 1000)

    _import(lake.root)

    assert not list((lake.root / "_state").glob("philly-import-*"))


def test_a_truncated_util_file_leaves_an_earlier_import_as_it_was(tmp_path):
    lake = tmp_path / "lake"
    _import(lake)
    before = _files(lake)
    with pytest.raises(MalformedSample, match="nothing was landed"):
        _import(lake, _truncated_trace(tmp_path))
    assert _files(lake) == before


def test_a_failure_while_landing_removes_what_a_first_import_landed(tmp_path, monkeypatch):
    from collector.sources.philly import trace

    def failing(root: Path, table: str, rows: Any, batch_id: str) -> list[Path]:
        if batch_id.endswith("-gpus"):  # the last batch: the others have landed
            raise OSError(28, "No space left on device")
        return write_batch(root, table, rows, batch_id)

    monkeypatch.setattr(trace, "write_batch", failing)
    lake = tmp_path / "lake"
    with pytest.raises(CollectorError, match="what it had landed was removed"):
        _import(lake)
    assert _counts(lake) == dict.fromkeys(RAW_TABLES, 0)
    # into a cluster an earlier import landed, it says the cluster holds part of each
    monkeypatch.setattr(trace, "write_batch", write_batch)
    _import(lake)
    monkeypatch.setattr(trace, "write_batch", failing)
    with pytest.raises(CollectorError, match="part of this import and part of the last one"):
        _import(lake)


# ---------------------------------------------------------------- an empty machine list


def test_an_empty_machine_list_is_a_warning_not_a_silent_smaller_inventory(tmp_path):
    # 568 GPUs instead of 2,928, with a note that 84 machines hold more GPUs than the list says
    folder = tmp_path / "trace"
    shutil.copytree(FIXTURE, folder)
    (folder / "cluster_machine_list").write_bytes(b"")
    result = CliRunner().invoke(
        command, ["philly", str(folder), "--cluster", "p", "--lake", str(tmp_path / "lake")]
    )
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 1, result.output
    assert "cluster_machine_list lists no machine (empty or unreadable)" in warnings[0]
    assert "inventory comes from cluster_gpu_util and cluster_job_log alone" in warnings[0]
    assert "hold more GPUs than cluster_machine_list says" not in result.output
    assert (
        "Warning:"
        not in CliRunner()
        .invoke(command, ["philly", str(FIXTURE), "--cluster", "p", "--lake", str(tmp_path / "l2")])
        .output
    )


# ---------------------------------------------------------------- a job killed before it ran


def test_a_job_killed_before_any_attempt_is_not_a_gpu_job_of_the_replay(tmp_path):
    # it was replayed as a 1-GPU job and counted among the "GPU jobs": the trace does not say
    # how many GPUs it asked for
    from detectors.replay.workload import load_workload

    folder = tmp_path / "trace"
    shutil.copytree(FIXTURE, folder)
    log = json.loads((folder / "cluster_job_log").read_text())
    killed = {**log[0], "jobid": "application_x_killed", "status": "Killed", "attempts": []}
    (folder / "cluster_job_log").write_text(json.dumps([*log, killed]))
    lake = tmp_path / "lake"
    assert _import(lake, folder).jobs == 87
    con = connect(lake)
    row = _one(con, "SELECT gpus, gpus_requested FROM jobs WHERE job_id = 'application_x_killed'")
    assert row == (0, None)  # it held none; what it asked for is unknown
    workload = load_workload(con, "philly")
    assert "application_x_killed" not in workload.job_id
    assert len(workload.job_id) == 86
