"""Line-level behaviour of the exposition parser: syntax, bad values, sharing, MIG and events."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from collector.errors import ConfigError
from collector.sources.dcgm_exporter.exposition import parse_exposition
from collector.sources.dcgm_exporter.fields import (
    FIELDS,
    METRIC_COLUMNS,
    Cell,
    convert,
    read_number,
)

GPU = 'UUID="GPU-1",Hostname="n1",gpu="0"'


def _one(parse, line: str):
    result = parse(line)
    return (result.samples.to_pylist() or [None])[0], result.counts


@pytest.mark.parametrize(
    ("line", "node"),
    [
        (f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}} 40", "n1"),
        ('DCGM_FI_DEV_GPU_TEMP{ UUID = "GPU-1" , Hostname="n1", } 40', "n1"),  # spaces, comma
        ('  DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1",Hostname="n1"}\t40\r', "n1"),  # tabs, CRLF
        ('DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1",Hostname="a\\"b\\\\c\\nd"} 40', 'a"b\\c\nd'),
        ('DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1",Hostname="x}y{z"} 40', "x}y{z"),
        ('DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1",Hostname="n1"}40', "n1"),  # no space before value
        (f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}} 40 1762070400000", "n1"),  # explicit timestamp
        (f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}} 4e1", "n1"),
    ],
)
def test_valid_lines_parse(parse, line, node):
    row, counts = _one(parse, line)

    assert counts == {}
    assert (row["gpu_uuid"], row["node"], row["temp_c"]) == ("GPU-1", node, 40)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{}", "malformed_line"),
        ("9DCGM 1", "malformed_line"),
        ("DCGM_FI_DEV_GPU_TEMP-x 1", "malformed_line"),
        ('DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1" 40', "malformed_labels"),  # unterminated set
        ('DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1} 40', "malformed_labels"),  # unterminated value
        ('DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1",UUID="GPU-2"} 40', "malformed_labels"),
        ("DCGM_FI_DEV_GPU_TEMP{UUID=GPU-1} 40", "malformed_labels"),
        ('DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1"}} 40', "malformed_labels"),
        (f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}} 40 }}", "malformed_labels"),
        (f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}}", "missing_value"),
        (f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}} 40 soon", "malformed_line"),
        (f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}} 40 1 2", "malformed_line"),
        (f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}} 40 12345678901234567890", "malformed_line"),
        ('DCGM_FI_DEV_GPU_TEMP{Hostname="n1"} 40', "no_gpu_uuid"),
        ('DCGM_FI_DEV_GPU_TEMP{UUID="",Hostname="n1"} 40', "no_gpu_uuid"),
        ('DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1"} 40', "no_node"),
        ('DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1",Hostname="n1",GPU_I_ID="x"} 40', "malformed_labels"),
        ('DCGM_FI_DEV_NOT_A_FIELD{UUID="GPU-1",Hostname="n1"} 40', "unknown_metric"),
    ],
)
def test_bad_lines_are_skipped_and_counted(parse, line, reason):
    result = parse(f"{line}\nDCGM_FI_DEV_POWER_USAGE{{{GPU}}} 100.5\n")

    assert result.counts == {reason: 1}
    assert result.examples[reason][0].startswith("line 1: ")
    [row] = result.samples.to_pylist()  # the good line still lands
    assert row["power_w"] == 100.5 and row["temp_c"] is None


@pytest.mark.parametrize(
    ("metric", "value", "reason"),
    [
        ("DCGM_FI_DEV_GPU_TEMP", "NaN", "not_finite"),
        ("DCGM_FI_DEV_GPU_TEMP", "+Inf", "not_finite"),
        ("DCGM_FI_DEV_GPU_TEMP", "1e999", "not_finite"),
        ("DCGM_FI_DEV_GPU_TEMP", "9" * 400, "not_finite"),
        ("DCGM_FI_DEV_GPU_TEMP", "<<<NOT_SUPPORTED>>>", "sentinel"),
        ("DCGM_FI_DEV_GPU_TEMP", "ERROR - FAILED TO CONVERT TO STRING", "conversion_error"),
        ("DCGM_FI_DEV_GPU_TEMP", "0x1F", "not_a_number"),
        ("DCGM_FI_DEV_GPU_TEMP", "1_000", "not_a_number"),
        ("DCGM_FI_DEV_GPU_TEMP", "2147483632", "sentinel"),  # INT32 blank
        ("DCGM_FI_DEV_GPU_TEMP", "2147483635", "sentinel"),  # INT32 not-permissioned
        ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "9223372036854775792", "sentinel"),  # INT64 blank
        ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "9223372036854775795", "sentinel"),
        ("DCGM_FI_PROF_PCIE_TX_BYTES", "140737488355328", "sentinel"),  # FP64 blank = 2^47
        ("DCGM_FI_PROF_PCIE_TX_BYTES", "140737488355331.000000", "sentinel"),
        ("DCGM_FI_DEV_GPU_TEMP", "-5", "out_of_range"),
        ("DCGM_FI_DEV_POWER_USAGE", "-0.5", "out_of_range"),
        ("DCGM_FI_PROF_SM_ACTIVE", "1.2", "out_of_range"),
        ("DCGM_FI_DEV_GPU_UTIL_RATIO", "91", "out_of_range"),  # a percent in a ratio field
        ("DCGM_FI_DEV_XID_ERRORS", "13.5", "out_of_range"),
        ("DCGM_FI_DEV_XID_ERRORS", "4294967296", "out_of_range"),  # beyond int32
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "2", "out_of_range"),
        ("DCGM_FI_DEV_MEMORY_TEMP", "0", "zero_means_unsupported"),
        ("DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", "0.000000", "zero_means_unsupported"),
    ],
)
def test_bad_values_become_null_and_are_counted(parse, metric, value, reason):
    column = FIELDS[metric].column
    row, counts = _one(parse, f"{metric}{{{GPU}}} {value}\nDCGM_FI_DEV_SM_CLOCK{{{GPU}}} 1980")

    assert counts == {reason: 1}
    assert row[column] is None  # null, never 0
    assert row["sm_clock_mhz"] == 1980


def test_a_gpu_whose_only_value_is_bad_is_still_reported(parse):
    row, counts = _one(parse, f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}} ERROR - FAILED TO CONVERT TO STRING")

    assert counts == {"conversion_error": 1}
    assert row["gpu_uuid"] == "GPU-1"
    assert all(row[c] is None for c in METRIC_COLUMNS)


@pytest.mark.parametrize(
    ("metric", "value", "column", "expected"),
    [
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "5551899580", "energy_j", 5_551_899.58),
        ("DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", "5551899", "energy_j", 5_551_899),
        ("DCGM_FI_DEV_SM_CLOCK_HERTZ", "1980000000", "sm_clock_mhz", 1980),
        ("DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", "2619000000", "mem_clock_mhz", 2619),
        ("DCGM_FI_DEV_FB_USED_BYTES", "85899345920", "fb_used_mib", 81920),
        ("DCGM_FI_DEV_GPU_UTIL_RATIO", "0.250000", "gpu_util_pct", 25),
        ("DCGM_FI_DEV_GPU_UTIL", "25", "gpu_util_pct", 25),
        ("DCGM_FI_PROF_NVLINK_TX_BYTES", "123456789012", "nvlink_tx_bps", 123456789012),
        ("DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND", "1.5e11", "nvlink_rx_bps", 1.5e11),
        ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "72", "clock_event_reasons", 72),
        ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "2147483636", "ecc_sbe_volatile", 2147483636),
        ("DCGM_FI_DEV_ROW_REMAP_PENDING", "1", "remap_pending", True),
        ("DCGM_FI_DEV_ROW_REMAP_FAILED", "0", "remap_failure", False),
        ("dcgm_total_energy_consumption", "1000", "energy_j", 1.0),
    ],
)
def test_units_are_converted(parse, metric, value, column, expected):
    row, counts = _one(parse, f"{metric}{{{GPU}}} {value}")

    assert counts == {}
    assert row[column] == expected
    if isinstance(expected, bool):
        assert row[column] is expected


def test_every_column_has_a_name_in_both_generations():
    by_generation: dict[str, set[str]] = {}
    for spec in FIELDS.values():
        by_generation.setdefault(spec.generation, set()).add(spec.column)
    old = by_generation["<=4.8"]
    new = by_generation[">=4.9"] | by_generation[">=4.10"]

    assert old == set(METRIC_COLUMNS)
    # unchanged names (ECC totals, ROW_REMAP_PENDING, CLOCKS_EVENT_REASONS) serve both
    assert set(METRIC_COLUMNS) - new == {
        "ecc_sbe_volatile",
        "ecc_dbe_volatile",
        "remap_pending",
        "clock_event_reasons",
    }


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("42", 42.0),
        ("-0", 0.0),
        (".5", 0.5),
        ("1e3", 1000.0),
        ("140737488355327", 140737488355327.0),  # 2^47 - 1 is a value
        ("nan", "not_finite"),
        ("", "not_a_number"),
        ("ERROR", "conversion_error"),
    ],
)
def test_read_number(token, expected):
    assert read_number(token) == expected


def test_convert_is_read_number_then_scale():
    spec = FIELDS["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]

    assert convert(spec, "1500") == Cell(1.5)
    assert convert(spec, "NaN") == Cell(None, "not_finite")


def test_naive_scrape_time_is_refused():
    with pytest.raises(ConfigError, match="no time zone"):
        parse_exposition("", cluster="c", ts=dt.datetime(2026, 1, 1), interval_s=30, source="x")


def test_empty_and_comment_only_input_gives_empty_tables(parse):
    for text in ("", "\n\n", "# HELP x y\n# TYPE x gauge\n", "\x00"):
        result = parse(text)
        assert result.samples.num_rows == 0
        assert result.events.num_rows == 0 and result.job_gpus.num_rows == 0


# ---------------------------------------------------------------- sharing, MIG and events


def _synthetic(fixture_text, parse):
    result = parse(fixture_text("synthetic_hpc_job_events.txt"))
    rows = {(r["gpu_uuid"], r["mig_instance"], r["job_id"]): r for r in result.samples.to_pylist()}
    return result, rows


A = "GPU-aaaaaaaa-1111-2222-3333-000000000000"
B = "GPU-bbbbbbbb-1111-2222-3333-000000000001"
C = "GPU-cccccccc-1111-2222-3333-000000000002"
D = "GPU-dddddddd-1111-2222-3333-000000000003"


def test_one_row_per_gpu_or_mig_instance_and_per_sharer_of_a_shared_gpu(fixture_text, parse):
    result, rows = _synthetic(fixture_text, parse)

    # B is time-sliced by jobs 6001 and 6002, D by two pods: one row per sharer, each carrying
    # its job, so the marts split the GPU between them (DESIGN §4); a GPU with one job leaves
    # job_id to attribution (job_gpus)
    assert sorted(rows, key=str) == sorted(
        [
            (A, 1, None),
            (A, 2, None),
            (B, None, "6001"),
            (B, None, "6002"),
            (C, None, None),
            (D, None, "team-a/trainer-0"),
            (D, None, "team-a/trainer-1"),
        ],
        key=str,
    )
    assert (rows[(A, 1, None)]["hpc_job"], rows[(A, 2, None)]["hpc_job"]) == ("5001", "5002")
    assert rows[(A, 1, None)]["engine_active"] == pytest.approx(0.42)
    for job in ("6001", "6002"):
        assert rows[(B, None, job)]["hpc_job"] == job
        assert rows[(B, None, job)]["gpu_util_pct"] == 97  # the device's values on each row
        assert rows[(B, None, job)]["ecc_sbe_volatile"] == 5
    assert rows[(C, None, None)]["hpc_job"] == "777_3"
    assert result.counts == {}  # identical copies are not conflicts


def test_job_labels_become_exporter_label_observations(fixture_text, parse, t0):
    result, _ = _synthetic(fixture_text, parse)
    obs = result.job_gpus.to_pylist()

    assert [(o["job_id"], o["gpu_uuid"], o["mig_instance"]) for o in obs] == [
        ("5001", A, 1),
        ("5002", A, 2),
        ("6001", B, None),
        ("6002", B, None),
        ("777_3", C, None),
        ("team-a/trainer-0", D, None),
        ("team-a/trainer-1", D, None),
    ]
    assert {o["mapping"] for o in obs} == {"exporter-label"}
    assert {(o["start_ts"], o["end_ts"]) for o in obs} == {(t0, t0 + dt.timedelta(seconds=30))}
    assert {o["node"] for o in obs if o["gpu_uuid"] != D} == {"g042"}


def test_device_series_wins_over_per_pod_values(fixture_text, parse):
    _, rows = _synthetic(fixture_text, parse)

    # virtual-GPU mode: the unlabelled series is the device total; per-pod 30/50 are shares
    for pod in ("trainer-0", "trainer-1"):
        shared = rows[(D, None, f"team-a/{pod}")]
        assert (shared["gpu_util_pct"], shared["fb_used_mib"]) == (80, 20000)
        assert shared["node"] == "gk8s01"
        assert (shared["k8s_namespace"], shared["k8s_pod"], shared["k8s_container"]) == (
            "team-a",
            pod,
            "main",
        )


def test_disagreeing_copies_keep_the_first_and_are_counted(parse):
    text = "\n".join(
        f"DCGM_FI_DEV_GPU_UTIL{{{GPU}{labels}}} {util}"
        for labels, util in (("", 10), ("", 20), ("", 10), (',hpc_job="1"', 30))
    )

    result = parse(text)

    # one job: one row; the device-level copies rank first, the first of them is kept
    assert result.samples.column("gpu_util_pct").to_pylist() == [10]
    assert result.counts == {"conflicting_duplicate": 1}


def test_sharers_of_a_gpu_keep_their_own_values(parse):
    text = "\n".join(
        f'DCGM_FI_DEV_GPU_UTIL{{{GPU},hpc_job="{job}"}} {util}'
        for job, util in (("1", 10), ("2", 20), ("3", 10))
    )

    result = parse(text)

    rows = result.samples.to_pylist()
    assert [(r["job_id"], r["hpc_job"], r["gpu_util_pct"]) for r in rows] == [
        ("1", "1", 10),
        ("2", "2", 20),
        ("3", "3", 10),
    ]
    assert result.counts == {}  # no copy was dropped


def test_health_events_once_per_physical_gpu(fixture_text, parse, t0):
    result, _ = _synthetic(fixture_text, parse)
    events = sorted(
        (e["gpu_uuid"], e["kind"], e["code"], e["detail"]) for e in result.events.to_pylist()
    )

    assert events == [
        (A, "ecc_dbe", 2, "2 volatile double-bit ECC error(s)"),
        (A, "hw_slowdown", 72, "clock_event_reasons=0x48 (hw_slowdown, hw_thermal)"),
        (A, "row_remap_failure", None, "row remapping failed"),
        (A, "thermal", 72, "clock_event_reasons=0x48 (hw_slowdown, hw_thermal)"),
        (A, "xid", 79, "GPU has fallen off the bus"),
        (B, "power_brake", 128, "clock_event_reasons=0x80 (hw_power_brake)"),
    ]  # C: XID 0 and the idle bit are not events
    assert {(e["ts"], e["node"], e["cluster"]) for e in result.events.to_pylist()} == {
        (t0, "g042", "della")
    }


def test_mig_rows_repeat_device_fields_of_their_gpu(fixture_text, parse):
    _, rows = _synthetic(fixture_text, parse)

    for gi in (1, 2):
        row = rows[(A, gi, None)]
        assert (row["mig_profile"], row["gpu_index"]) == ("3g.40gb", 0)
        assert (row["xid_last"], row["ecc_dbe_volatile"], row["clock_event_reasons"]) == (79, 2, 72)
        assert (row["remap_failure"], row["remap_pending"]) == (True, True)
        assert row["power_w"] == pytest.approx(250.5)


# ---------------------------------------------------------------- no pathological slowness


@pytest.mark.parametrize(
    "line",
    [
        'DCGM_FI_DEV_GPU_TEMP{UUID="' + "\\" * 300_001,
        'DCGM_FI_DEV_GPU_TEMP{UUID="' + '\\"' * 300_000,
        'DCGM_FI_DEV_GPU_TEMP{UUID="' + '\\"' * 300_000 + '"} 1',
        "DCGM_FI_DEV_GPU_TEMP{" + ",".join(f'l{i}="{i}"' for i in range(50_000)) + "} 1",
        "DCGM_FI_DEV_GPU_TEMP{" + 'a="b",' * 100_000,
        "DCGM_FI_DEV_GPU_TEMP{" + "}" * 300_000 + " 1",
        f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}} " + " 1" * 300_000,
        "D" * 1_000_000,
    ],
)
def test_hostile_lines_parse_in_linear_time(parse, line):
    started = time.perf_counter()
    result = parse(line)
    assert time.perf_counter() - started < 2.0
    assert sum(result.counts.values()) == 1


def test_a_large_scrape_parses_quickly(fixture_text, parse):
    page = fixture_text("sample_l4_gpu_operator.txt")
    uuid = "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"
    text = "\n".join(page.replace(uuid, f"GPU-{i:08d}") for i in range(1000))  # ~7 MB

    started = time.perf_counter()
    result = parse(text)

    assert result.samples.num_rows == 1000
    assert time.perf_counter() - started < 5.0
