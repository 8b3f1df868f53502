"""Parsing the Philly trace files: local times with their PDT/PST suffix, empty and NA cells,
trailing commas, malformed lines and jobs (skipped and counted, never raised), GPU counts."""

from __future__ import annotations

import datetime as dt
import gzip
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from collector.errors import ConfigError, MalformedSample
from collector.sources.philly.gpu_util import UtilStats, _ReplacingUtf8, read_gpu_util
from collector.sources.philly.trace import (
    JobLog,
    Machine,
    Skipped,
    find_trace_files,
    gpu_counts,
    read_job_log,
    read_machine_list,
)

UTC = dt.UTC
HEADER = "time,machineId,gpu0_util,gpu1_util\n"


def _read(
    tmp_path: Path, body: str, counts: dict[str, int] | None = None, **kw: Any
) -> tuple[list[dict[str, Any]], UtilStats]:
    path = tmp_path / "cluster_gpu_util"
    path.write_text(HEADER + body)
    stats = UtilStats()
    tables = list(read_gpu_util(path, "c", counts or {"m1": 2, "m2": 2}, stats, **kw))
    rows = pa.concat_tables(tables).to_pylist() if tables else []
    return rows, stats


def _utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, tzinfo=UTC)


def test_local_times_become_utc_by_their_suffix_across_the_dst_change(tmp_path):
    # 2017-11-05: PDT (UTC-7) until 02:00 local, then PST (UTC-8); 01:xx happens twice.
    rows, stats = _read(
        tmp_path,
        "2017-11-04 23:59:00 PDT,m1,1,\n"
        "2017-11-05 01:30:00 PDT,m1,2,\n"
        "2017-11-05 01:30:00 PST,m1,3,\n"
        "2017-11-05 02:00:00 PST,m1,4,\n"
        "2017-07-01 12:00:00 PDT,m1,5,\n"
        "2017-12-01 12:00:00 PST,m1,6,\n",
    )
    got = {r["gpu_util_pct"]: r["ts"] for r in rows if r["gpu_index"] == 0}
    assert got == {
        1.0: _utc(2017, 11, 5, 6, 59),
        2.0: _utc(2017, 11, 5, 8, 30),
        3.0: _utc(2017, 11, 5, 9, 30),  # the repeated hour lands an hour later, not on top
        4.0: _utc(2017, 11, 5, 10, 0),
        5.0: _utc(2017, 7, 1, 19, 0),
        6.0: _utc(2017, 12, 1, 20, 0),
    }
    assert stats.malformed == 0
    assert {r["interval_s"] for r in rows} == {60.0}
    assert {r["source"] for r in rows} == {"philly"}


def test_empty_and_na_cells_are_no_sample_never_zero(tmp_path):
    # a row for a cell with no value said the GPU was watched that minute (and the marts count
    # a sample with no activity field as active): the minute is unobserved, as a missed scrape
    rows, stats = _read(
        tmp_path, "2017-10-03 00:08:00 PDT,m1,NA,,\n2017-10-03 00:09:00 PDT,m1,0,0.0,\n"
    )
    values = [(r["ts"].minute, r["gpu_index"], r["gpu_util_pct"]) for r in rows]
    assert sorted(values) == [(9, 0, 0.0), (9, 1, 0.0)]
    assert stats.invalid_values == 0  # empty and NA mean "no value", not "bad value"


def test_values_outside_0_to_100_and_non_numbers_are_no_sample_and_counted(tmp_path):
    rows, stats = _read(tmp_path, "2017-10-03 00:08:00 PDT,m1,-1.0,abc,\n")
    assert rows == []
    assert stats.invalid_values == 2


def test_the_trailing_comma_is_optional(tmp_path):
    with_comma, _ = _read(tmp_path, "2017-10-03 00:08:00 PDT,m1,10,20,\n")
    without, stats = _read(tmp_path, "2017-10-03 00:08:00 PDT,m1,10,20\n")
    mixed, mixed_stats = _read(
        tmp_path, "2017-10-03 00:08:00 PDT,m1,10,20,\n2017-10-03 00:09:00 PDT,m1,30,NA\n"
    )
    assert with_comma == without
    assert [r["gpu_util_pct"] for r in with_comma] == [10.0, 20.0]
    assert sorted(r["gpu_util_pct"] for r in mixed if r["gpu_util_pct"] is not None) == [
        10.0,
        20.0,
        30.0,
    ]
    assert stats.malformed == mixed_stats.malformed == 0
    assert mixed_stats.lines == 2


def test_malformed_lines_are_skipped_counted_and_reported(tmp_path):
    rows, stats = _read(
        tmp_path,
        "2017-10-03 00:08:00 PDT,m1,10,20,\n"
        "garbage\n"
        "2017-10-03 00:09:00 EST,m1,10,20,\n"  # unknown zone: no guessing
        "2017-10-03 00:10:00,m1,10,20,\n"  # no zone at all
        "2017-13-03 00:11:00 PDT,m1,10,20,\n"  # no such month
        "2017-10-03 00:12:00 PDT,,10,20,\n"  # no machine
        "2017-10-03 00:13:00 PDT,m1,10,20,30,40,\n"  # too many fields
        "2017-10-03 00:14:00 PDT,m1,10,20,junk\n"  # trailing field not empty
        "2017-10-03 00:15:00 PDT,m2,50,60,\n",
    )
    assert stats.malformed == 7
    assert stats.lines == 9
    assert sorted({(r["node"], r["ts"].minute) for r in rows}) == [("m1", 8), ("m2", 15)]
    assert len(stats.examples) == 5
    assert any("line 3" in e and "garbage" in e for e in stats.examples), stats.examples


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_lines_with_bytes_that_are_not_utf8_are_skipped_and_counted(tmp_path, gz):
    body = (
        b"2017-10-03 00:08:00 PDT,m1,10,20,\n"
        b"\xff\xfe damaged\n"  # wrong field count as well
        b"2017-10-03 00:09:00 PDT,m\xff1,10,20,\n"  # a machine name cut by a bad byte
        b"2017-10-03 00:10:00 PDT,m1,1\xff0,20,\n"  # a bad value: null, counted
        b"2017-10-03 00:11:00 PDT,m2,50,60,\n"
    )
    data = HEADER.encode() + body * 3
    path = tmp_path / ("cluster_gpu_util.gz" if gz else "cluster_gpu_util")
    path.write_bytes(gzip.compress(data) if gz else data)
    stats = UtilStats()

    tables = list(read_gpu_util(path, "c", {"m1": 2, "m2": 2}, stats, block_bytes=64))

    rows = pa.concat_tables(tables).to_pylist()
    assert stats.lines == 15
    assert stats.malformed == 6
    assert stats.invalid_values == 3
    assert sorted({(r["node"], r["ts"].minute) for r in rows}) == [
        ("m1", 8),
        ("m1", 10),
        ("m2", 11),
    ]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
@pytest.mark.parametrize("read", [1, 5, 4096])
def test_utf8_replacing_stream_keeps_valid_text_and_replaces_only_bad_bytes(chunk, read):
    # 2- and 3-byte characters cut by every chunk boundary stay whole; each bad byte is one
    # U+FFFD, and a truncated sequence at the very end is replaced too.
    data = "é€ µ".encode() + b"ok\xffz\xc3" + "—x".encode() + b"\xe2\x82"
    stream = _ReplacingUtf8(io.BytesIO(data), chunk_bytes=chunk)
    out = bytearray()
    while part := stream.read(read):
        out += part
    assert out.decode() == "é€ µok\ufffdz\ufffd—x\ufffd"


def test_gpus_beyond_the_machine_count_land_only_where_they_hold_a_value(tmp_path):
    rows, stats = _read(tmp_path, "2017-10-03 00:08:00 PDT,m1,10,20,\n", counts={"m1": 1})
    assert [(r["gpu_index"], r["gpu_util_pct"]) for r in rows] == [(0, 10.0), (1, 20.0)]
    assert stats.extra_gpus == {"m1": 2}
    rows, stats = _read(tmp_path, "2017-10-03 00:08:00 PDT,m1,10,,\n", counts={"m1": 1})
    assert [(r["gpu_index"], r["gpu_util_pct"]) for r in rows] == [(0, 10.0)]
    assert stats.extra_gpus == {}


def test_batches_split_the_file_without_changing_its_rows(tmp_path):
    body = "".join(
        f"2017-10-03 {h:02d}:{m:02d}:00 PDT,m{1 + m % 2},{m},NA,\n"
        for h in range(10)
        for m in range(60)
    )
    whole, _ = _read(tmp_path, body)
    path = tmp_path / "cluster_gpu_util"
    stats = UtilStats()
    parts = list(
        read_gpu_util(path, "c", {"m1": 2, "m2": 2}, stats, lines_per_batch=50, block_bytes=1024)
    )
    assert len(parts) > 5
    key = ("node", "gpu_index", "ts")
    assert sorted(pa.concat_tables(parts).to_pylist(), key=lambda r: [r[k] for k in key]) == sorted(
        whole, key=lambda r: [r[k] for k in key]
    )
    assert stats.lines == 600
    assert stats.samples == 600  # the NA column lands nothing


def test_a_file_without_the_expected_header_is_refused(tmp_path):
    path = tmp_path / "cluster_gpu_util"
    path.write_text("machine,when,util\nm1,now,3\n")
    with pytest.raises(MalformedSample, match="expected a header like 'time,machineId"):
        list(read_gpu_util(path, "c", {}, UtilStats()))


def test_gzipped_files_read_like_plain_ones(tmp_path):
    plain, _ = _read(tmp_path, "2017-10-03 00:08:00 PDT,m1,10,NA,\n")
    gz = tmp_path / "cluster_gpu_util.gz"
    gz.write_bytes(gzip.compress((tmp_path / "cluster_gpu_util").read_bytes()))
    tables = list(read_gpu_util(gz, "c", {"m1": 2}, UtilStats()))
    assert pa.concat_tables(tables).to_pylist() == plain


def test_files_saved_with_a_byte_order_mark_read_like_plain_ones(tmp_path):
    """A spreadsheet or Windows editor starts UTF-8 with a byte-order mark: the util header was
    refused, the machine list's header counted as a bad row, the job log was not JSON."""
    plain, _ = _read(tmp_path, "2017-10-03 00:08:00 PDT,m1,10,NA,\n")
    util = tmp_path / "cluster_gpu_util"
    util.write_bytes(b"\xef\xbb\xbf" + util.read_bytes())
    tables = list(read_gpu_util(util, "c", {"m1": 2}, UtilStats()))
    assert pa.concat_tables(tables).to_pylist() == plain

    machines = tmp_path / "cluster_machine_list"
    machines.write_bytes(b"\xef\xbb\xbfmachineId, number of GPUs, single GPU mem\nm0,2, 12GB\n")
    skipped = Skipped()
    assert read_machine_list(machines, skipped) == {"m0": Machine(2, 12 * 1024.0)}
    assert skipped.count == 0

    log = tmp_path / "cluster_job_log"
    log.write_bytes(b"\xef\xbb\xbf" + json.dumps([_job()]).encode())
    skipped = Skipped()
    assert read_job_log(log, "c", skipped).jobs["job_id"].to_pylist() == [_job()["jobid"]]
    assert skipped.count == 0


# ---------------------------------------------------------------- job log


def _job(**overrides: Any) -> dict[str, Any]:
    job = {
        "status": "Pass",
        "vc": "vc1",
        "jobid": "application_1_1",
        "user": "u1",
        "submitted_time": "2017-10-01 10:00:00",
        "attempts": [
            {
                "start_time": "2017-10-01 10:05:00",
                "end_time": "2017-10-01 11:00:00",
                "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}],
            },
            {
                "start_time": "2017-10-01 11:10:00",
                "end_time": "2017-10-01 12:00:00",
                "detail": [{"ip": "m1", "gpus": ["gpu2"]}, {"ip": "m2", "gpus": ["gpu7"]}],
            },
        ],
    }
    job.update(overrides)
    return job


def _log(tmp_path: Path, jobs: list[object]) -> tuple[JobLog, Skipped]:
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(jobs))
    skipped = Skipped()
    return read_job_log(path, "c", skipped), skipped


def test_a_job_spans_its_attempts_and_each_attempt_is_an_allocation(tmp_path):
    log, skipped = _log(tmp_path, [_job()])
    [job] = log.jobs.to_pylist()
    assert job["state"] == "COMPLETED"
    assert (job["user"], job["account"], job["source"]) == ("u1", "vc1", "philly")
    assert job["submit_ts"] == _utc(2017, 10, 1, 10, 0)  # the job log is in UTC
    assert job["start_ts"] == _utc(2017, 10, 1, 10, 5)
    assert job["end_ts"] == job["updated_ts"] == _utc(2017, 10, 1, 12, 0)
    assert (job["gpus"], job["nodes"], job["requeues"]) == (2, ["m1", "m2"], 1)
    allocations = [
        (r["node"], r["gpu_index"], r["start_ts"].hour, r["end_ts"].hour, r["mapping"])
        for r in log.job_gpus.to_pylist()
    ]
    assert allocations == [
        ("m1", 0, 10, 11, "trace"),
        ("m1", 1, 10, 11, "trace"),
        ("m1", 2, 11, 12, "trace"),
        ("m2", 7, 11, 12, "trace"),
    ]
    assert log.allocations == 2
    assert log.machine_gpus == {"m1": 3, "m2": 8}
    assert skipped.count == 0


@pytest.mark.parametrize(
    ("status", "state"), [("Pass", "COMPLETED"), ("Failed", "FAILED"), ("Killed", "CANCELLED")]
)
def test_statuses_map_to_scheduler_states(tmp_path, status, state):
    log, _ = _log(tmp_path, [_job(status=status)])
    assert log.jobs.column("state").to_pylist() == [state]


def test_a_last_attempt_without_end_is_still_running(tmp_path):
    job = _job()
    job["attempts"][1]["end_time"] = None
    log, _ = _log(tmp_path, [job])
    [row] = log.jobs.to_pylist()
    assert (row["state"], row["end_ts"], row["updated_ts"]) == (
        "RUNNING",
        None,
        _utc(2017, 10, 1, 10, 0),
    )
    assert [r["end_ts"] for r in log.job_gpus.to_pylist()][-2:] == [None, None]


def test_a_job_with_bytes_that_are_not_utf8_is_skipped_and_counted(tmp_path):
    path = tmp_path / "cluster_job_log"
    text = json.dumps([_job(user="u@@1"), _job(jobid="j2")], ensure_ascii=False)
    path.write_bytes(text.encode().replace(b"@@", b"\xff"))
    skipped = Skipped()
    log = read_job_log(path, "c", skipped)
    assert log.jobs.column("job_id").to_pylist() == ["j2"]
    assert skipped.count == 1


def test_attempts_with_unknown_spans_are_not_landed(tmp_path):
    job = _job()
    job["attempts"][0]["end_time"] = "None"  # not the last attempt: a logging error
    log, _ = _log(tmp_path, [job, _job(jobid="j2", attempts=[])])
    assert log.attempts_without_times == 1
    assert log.allocations == 1
    assert {r["gpu_index"] for r in log.job_gpus.to_pylist()} == {2, 7}
    never = log.jobs.to_pylist()[1]
    assert (never["start_ts"], never["gpus"], never["requeues"]) == (None, 0, 0)  # held none


def test_a_gpu_count_instead_of_names_means_the_first_n_gpus(tmp_path):
    job = _job(attempts=[{**_job()["attempts"][0], "detail": [{"ip": "m3", "gpus": 4}]}])
    log, _ = _log(tmp_path, [job])
    assert [r["gpu_index"] for r in log.job_gpus.to_pylist()] == [0, 1, 2, 3]


def test_malformed_jobs_are_skipped_and_counted(tmp_path):
    bad_time = _job(jobid="j2", submitted_time="yesterday")
    bad_gpu = _job(jobid="j3")
    bad_gpu["attempts"][0]["detail"][0]["gpus"] = ["card0"]
    log, skipped = _log(tmp_path, [_job(), "not a job", bad_time, bad_gpu, _job(), {"vc": "x"}])
    assert log.jobs.column("job_id").to_pylist() == ["application_1_1"]
    assert skipped.count == 5
    assert any("repeated jobid" in e for e in skipped.examples)
    assert any("card0" in e for e in skipped.examples)


def test_a_job_log_that_is_not_json_is_one_clear_error(tmp_path):
    path = tmp_path / "cluster_job_log"
    path.write_text("{not json")
    with pytest.raises(MalformedSample, match="not a JSON job log"):
        read_job_log(path, "c", Skipped())


# ---------------------------------------------------------------- machines and files


def test_machine_list_rows_and_bad_rows(tmp_path):
    path = tmp_path / "cluster_machine_list"
    path.write_text("machineId, number of GPUs, single GPU mem\nm0,2, 12GB\nm1,8, 24GB\nm2,x,1GB\n")
    skipped = Skipped()
    machines = read_machine_list(path, skipped)
    assert machines == {"m0": Machine(2, 12 * 1024.0), "m1": Machine(8, 24 * 1024.0)}
    assert skipped.count == 1


def test_machine_list_rows_with_bytes_that_are_not_utf8_are_skipped(tmp_path):
    path = tmp_path / "cluster_machine_list"
    path.write_bytes(
        b"machineId, number of GPUs, single GPU mem\nm0,2, 12GB\n"
        b"m\xff1,8, 24GB\n\xff\xfe\n"
        b"m2,8, 24GB\n"
    )
    skipped = Skipped()
    machines = read_machine_list(path, skipped)
    assert machines == {"m0": Machine(2, 12 * 1024.0), "m2": Machine(8, 24 * 1024.0)}
    assert skipped.count == 2


def test_gpu_counts_follow_the_trace_where_the_machine_list_under_counts():
    machines = {"m0": Machine(2, 12288.0), "m1": Machine(8, 24576.0), "m2": Machine(2, 12288.0)}
    counts = gpu_counts(machines, {"m0": 2, "m1": 3, "m2": 5, "m9": 1})
    # m2 runs gpu4 though listed with 2 GPUs: it is an 8-GPU machine (the only larger size)
    assert counts == {"m0": 2, "m1": 8, "m2": 8, "m9": 2}


def test_trace_files_are_found_plain_or_gzipped(tmp_path):
    for name in ("cluster_job_log", "cluster_machine_list"):
        (tmp_path / name).write_text("")
    (tmp_path / "cluster_gpu_util.gz").write_bytes(b"")
    files = find_trace_files(tmp_path)
    assert files.gpu_util.name == "cluster_gpu_util.gz"
    (tmp_path / "cluster_gpu_util").write_text("")
    assert find_trace_files(tmp_path).gpu_util.name == "cluster_gpu_util"  # plain wins


def test_missing_folder_or_files_are_named(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        find_trace_files(tmp_path / "nope")
    (tmp_path / "cluster_job_log").write_text("[]")
    with pytest.raises(ConfigError, match="has no cluster_gpu_util, cluster_machine_list"):
        find_trace_files(tmp_path)


def test_a_file_given_as_the_trace_folder_is_named_as_a_file(tmp_path):
    log = tmp_path / "cluster_job_log"
    log.write_text("[]")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        find_trace_files(log)


def test_a_truncated_gzip_file_is_one_clear_error(tmp_path):
    body = "".join(f"2017-10-03 00:{m:02d}:00 PDT,m1,{m},NA,\n" for m in range(60))
    data = gzip.compress((HEADER + body * 50).encode())
    path = tmp_path / "cluster_gpu_util.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(MalformedSample, match="cannot read past byte"):
        list(read_gpu_util(path, "c", {"m1": 2}, UtilStats()))


def test_a_gpu_or_machine_listed_twice_is_held_once(tmp_path):
    # ["gpu0", "gpu0"] made `gpus` 2 beside one GPU's hours; the same entry twice, 4
    job = _job()
    job["attempts"] = [
        {
            "start_time": "2017-10-01 10:05:00",
            "end_time": "2017-10-01 11:00:00",
            "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu0", "gpu1"]}] * 2,
        }
    ]
    log, skipped = _log(tmp_path, [job])

    assert log.jobs.column("gpus").to_pylist() == [2]
    assert [(r["node"], r["gpu_index"]) for r in log.job_gpus.to_pylist()] == [
        ("m1", 0),
        ("m1", 1),
    ]
    assert skipped.count == 0


def test_a_machine_without_an_ip_is_skipped_not_named_none(tmp_path):
    # a null ip was the machine "None", whose GPUs joined the cluster's inventory
    job = _job()
    job["attempts"][1]["detail"][1]["ip"] = None
    log, skipped = _log(tmp_path, [job, _job(jobid="j2")])

    assert log.jobs.column("job_id").to_pylist() == ["j2"]
    assert "None" not in log.machine_gpus
    assert skipped.count == 1
