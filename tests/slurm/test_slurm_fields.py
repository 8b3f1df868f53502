"""Single sacct/scontrol values: times, limits, sizes, TRES and states."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest

from collector.errors import MalformedSample
from collector.sources.slurm.fields import (
    base_state,
    parse_duration_s,
    parse_end_ms,
    parse_gpu_tres,
    parse_req_mem,
    parse_size_mib,
    parse_time_limit_s,
    parse_timestamp_ms,
    parse_tres,
)

T0_MS = int(dt.datetime(2026, 12, 2, 13, 1, 9, tzinfo=dt.UTC).timestamp() * 1000)


def test_times_are_read_in_the_given_zone_and_returned_as_utc_milliseconds():
    assert parse_timestamp_ms("2026-12-02T13:01:09") == T0_MS
    cet = dt.timezone(dt.timedelta(hours=1))
    assert parse_timestamp_ms("2026-12-02T14:01:09", cet) == T0_MS
    assert parse_timestamp_ms(str(T0_MS // 1000)) == T0_MS  # SLURM_TIME_FORMAT=%s


def test_an_end_in_the_repeated_hour_is_the_occurrence_after_its_start():
    # (scontrol's EndTime as sacct's End) 2026-11-01 01:30 in New York is 05:30Z or 06:30Z
    ny = zoneinfo.ZoneInfo("America/New_York")
    first, second = 1_793_511_000_000, 1_793_514_600_000
    assert parse_end_ms("2026-11-01T01:30:00", None, ny) == first
    assert parse_end_ms("2026-11-01T01:30:00", first - 60_000, ny) == first
    assert parse_end_ms("2026-11-01T01:30:00", first + 60_000, ny) == second
    # an end before its start that no other reading helps stays as printed
    assert parse_end_ms("2026-12-02T13:01:09", T0_MS + 1) == T0_MS


@pytest.mark.parametrize("text", ["Unknown", "None", "", "N/A", "(null)"])
def test_unknown_times_are_null(text):
    assert parse_timestamp_ms(text) is None


@pytest.mark.parametrize("text", ["2026-13-02T10:00:00", "yesterday", "02/12/2026 10:00"])
def test_bad_times_are_refused_with_the_value(text):
    with pytest.raises(MalformedSample, match=repr(text)):
        parse_timestamp_ms(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:01:00", 60),
        ("02:00:00", 7200),
        ("1-12:00:00", 129600),
        ("365-00:00:00", 365 * 86400),  # what backfill records for an unlimited job: kept
        ("30:00", 1800),  # MM:SS
        ("2-06", 2 * 86400 + 6 * 3600),  # D-HH
        ("1-00:30", 86400 + 1800),  # D-HH:MM
        ("45", 2700),  # bare minutes
    ],
)
def test_time_limits_in_every_slurm_layout(text, seconds):
    assert parse_time_limit_s(text) == seconds


@pytest.mark.parametrize("text", ["UNLIMITED", "Partition_Limit", "", "INVALID"])
def test_unlimited_time_limits_are_null(text):
    assert parse_time_limit_s(text) is None


def test_cpu_times_keep_their_fraction():
    assert parse_duration_s("00:00.500") == 0.5
    assert parse_duration_s("1-02:03:04") == 93784
    assert parse_duration_s("01:02:03.250") == 3723.25


@pytest.mark.parametrize("text", ["1:2:3:4", "ab:cd", "1.5:00"])
def test_bad_durations_are_refused(text):
    with pytest.raises(MalformedSample, match="invalid duration"):
        parse_duration_s(text)


@pytest.mark.parametrize(
    ("text", "bare", "mib"),
    [
        ("4000M", "M", 4000),
        ("16G", "M", 16384),
        ("2.50G", "B", 2560),
        ("1024K", "B", 1),
        ("1T", "M", 1024 * 1024),
        ("4000", "M", 4000),  # memory requests are in MB
        ("1048576", "B", 1),  # usage (MaxRSS) is in bytes
    ],
)
def test_sizes_become_mib(text, bare, mib):
    assert parse_size_mib(text, bare) == pytest.approx(mib)


def test_empty_sizes_are_null_and_bad_ones_refused():
    assert parse_size_mib("") is None
    with pytest.raises(MalformedSample, match="invalid size '12Q'"):
        parse_size_mib("12Q")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4000Mc", (4000, "c")),  # per CPU (Slurm before 21.08)
        ("4000Mn", (4000, "n")),  # per node
        ("16G", (16384, "")),  # the job's
        ("0n", (0, "n")),
    ],
)
def test_requested_memory_keeps_what_it_is_per(text, expected):
    assert parse_req_mem(text) == expected


def test_tres_lists_split_into_names_and_values():
    assert parse_tres("billing=2,cpu=2,gres/gpu:h100=2,gres/gpu=2,node=1") == {
        "billing": "2",
        "cpu": "2",
        "gres/gpu:h100": "2",
        "gres/gpu": "2",
        "node": "1",
    }
    assert parse_tres("") == {}
    with pytest.raises(MalformedSample, match="invalid TRES item 'cpu'"):
        parse_tres("cpu,node=1")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("billing=2,cpu=2,gres/gpu:h100=2,gres/gpu=2,node=1", (2, "h100")),  # never 4
        ("cpu=4,gres/gpu:a100=4,gres/gpu:h100=4,gres/gpu=8,node=2", (8, "a100,h100")),
        ("cpu=2,gres/gpu:a100=2", (2, "a100")),  # typed only: summed
        ("cpu=2,gres/gpu=4", (4, None)),  # untyped only
        ("cpu=2,gres/gpumem=80G,gres/gpuutil=50", (0, None)),  # not GPUs
        ("", (0, None)),  # a job that never ran
    ],
)
def test_gpu_counts_use_the_total_and_never_add_typed_counts(text, expected):
    assert parse_gpu_tres(parse_tres(text)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("CANCELLED by 1001", "CANCELLED"), ("RUNNING", "RUNNING"), ("CANCELLED+", "CANCELLED")],
)
def test_base_state_drops_the_reason(text, expected):
    assert base_state(text) == expected
