"""Every recorded dcgm-exporter scrape parses into the rows, units and counts a reader expects."""

from __future__ import annotations

import pytest

from warehouse.schema import RAW_TABLES

F32 = pytest.approx  # float32 columns: compare with a relative tolerance


def _rows(result):
    return result.samples.to_pylist()


def _by_key(result):
    return {(r["gpu_uuid"], r["mig_instance"]): r for r in _rows(result)}


def test_every_fixture_yields_contract_tables(fixture_text, parse):
    for name in (
        "sample_l4_gpu_operator.txt",
        "sample_t4_gpu_operator_busy.txt",
        "sample_a800_mig_excerpt.txt",
        "sample_datadog_fixture.txt",
        "sample_issue_snippets.txt",
        "synthetic_4.10_renamed.txt",
        "synthetic_hpc_job_events.txt",
    ):
        result = parse(fixture_text(name), default_node="fallback-node")
        assert result.samples.schema == RAW_TABLES["gpu_samples"].schema, name
        assert result.events.schema == RAW_TABLES["gpu_events"].schema, name
        assert result.job_gpus.schema == RAW_TABLES["job_gpus"].schema, name
        assert result.samples.num_rows > 0, name


def test_l4_gpu_operator_scrape(fixture_text, parse, t0):
    result = parse(fixture_text("sample_l4_gpu_operator.txt"))

    [row] = _rows(result)
    assert row["ts"] == t0
    assert (row["cluster"], row["node"], row["model"]) == (
        "della",
        "i-030791dc5a37cd257",
        "NVIDIA L4",
    )
    assert row["gpu_uuid"] == "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"
    assert (row["gpu_index"], row["mig_profile"], row["mig_instance"]) == (0, None, None)
    assert row["sm_clock_mhz"] == 210 and row["mem_clock_mhz"] == 405
    assert row["temp_c"] == 31
    assert row["mem_temp_c"] is None  # 0 on a GDDR board means "not supported"
    assert row["power_w"] == F32(16.365, rel=1e-6)
    assert row["energy_j"] == 4742.776  # 4742776 mJ
    assert row["gpu_util_pct"] == 0 and row["engine_active"] == 0
    assert (row["fb_used_mib"], row["fb_free_mib"]) == (0, 22563)
    assert (row["pcie_tx_bps"], row["pcie_rx_bps"]) == (112603, 17544)
    assert row["remap_failure"] is False
    assert row["sm_active"] is None and row["xid_last"] is None  # not exported: null, never 0
    assert row["interval_s"] == 30.0 and row["source"] == "dcgm-exporter"
    # PCIE_REPLAY, MEM_COPY/ENC/DEC util, FB_RESERVED, (UN)CORRECTABLE_REMAPPED_ROWS, VGPU_LICENSE
    assert result.counts == {"unknown_metric": 8, "zero_means_unsupported": 1}
    assert result.lines == 23
    assert result.events.num_rows == 0 and result.job_gpus.num_rows == 0


def test_t4_busy_scrape_keeps_gpu_util_and_engine_activity_apart(fixture_text, parse):
    result = parse(fixture_text("sample_t4_gpu_operator_busy.txt"))

    [row] = _rows(result)
    assert (row["node"], row["model"]) == ("cp-bm14r7", "Tesla T4")
    assert row["gpu_uuid"] == "GPU-6d5c0ac5-74d7-3130-46f1-e93ed57f469a"
    # GPU_UTIL says 91 % "a kernel was running"; the engine was active only 15.6 % of the time
    assert row["gpu_util_pct"] == 91
    assert row["engine_active"] == F32(0.156205, rel=1e-6)
    assert row["dram_active"] == F32(0.092781, rel=1e-6)
    assert row["tensor_active"] == F32(0.005822, rel=1e-6)
    assert row["energy_j"] == pytest.approx(15_152_422.938, abs=1e-6)
    assert (row["fb_used_mib"], row["fb_free_mib"]) == (5120, 9791)
    assert (row["temp_c"], row["mem_temp_c"]) == (74, None)
    assert row["power_w"] == F32(68.244, rel=1e-6)
    assert (row["sm_clock_mhz"], row["mem_clock_mhz"]) == (660, 5000)
    assert (row["pcie_tx_bps"], row["pcie_rx_bps"]) == (4_791_810, 6_935_930)
    assert result.counts == {"unknown_metric": 6, "zero_means_unsupported": 1}


def test_a800_mig_scrape(fixture_text, parse):
    result = parse(fixture_text("sample_a800_mig_excerpt.txt"))
    rows = _by_key(result)

    parent = "GPU-1f027ee8-6e1e-2b8c-0108-3d370e5f0418"
    assert len(rows) == 10  # GPU 0 as three 2g.20gb instances + GPUs 1..7 whole
    for gi in (3, 5, 6):
        mig = rows[(parent, gi)]
        assert (mig["gpu_index"], mig["mig_profile"]) == (0, "2g.20gb")
        assert mig["gpu_util_pct"] is None  # DCGM_FI_DEV_GPU_UTIL is not emitted for MIG
        assert mig["engine_active"] == 0.0
        # device-level fields repeat on every instance with the parent's value
        assert mig["energy_j"] == pytest.approx(257_858.316)
        assert mig["sm_clock_mhz"] == 1410
    whole = rows[("GPU-9e5b8fec-61bf-5124-a0a9-079af1b65cc6", None)]
    assert (whole["gpu_index"], whole["mig_profile"]) == (1, None)
    assert whole["gpu_util_pct"] == 0 and whole["sm_clock_mhz"] == 210
    assert whole["energy_j"] == pytest.approx(187_554.325)
    assert {r["node"] for r in rows.values()} == {"msxf-hpc-64-35-ai"}
    assert {r["model"] for r in rows.values()} == {"NVIDIA A800-SXM4-80GB"}
    # the two 'ERROR - FAILED TO CONVERT TO STRING' lines are skipped and counted, nothing else
    assert result.counts == {"conversion_error": 2}
    assert all(
        "ERROR - FAILED TO CONVERT TO STRING" in e for e in result.examples["conversion_error"]
    )


def test_datadog_fixture(fixture_text, parse):
    result = parse(fixture_text("sample_datadog_fixture.txt"))
    rows = _by_key(result)

    t4 = rows[("GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e", None)]
    assert (t4["node"], t4["model"]) == ("424773df46e0", "Tesla T4")
    assert (t4["sm_clock_mhz"], t4["mem_clock_mhz"], t4["temp_c"]) == (300, 405, 25)
    assert t4["power_w"] == F32(8.969, rel=1e-6)
    assert t4["energy_j"] == pytest.approx(128_996.013)
    assert (t4["fb_free_mib"], t4["fb_used_mib"], t4["gpu_util_pct"], t4["xid_last"]) == (
        15109,
        0,
        0,
        0,
    )
    throttled = rows[("GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5", None)]
    assert throttled["clock_event_reasons"] == 1  # via the old CLOCK_THROTTLE_REASONS name
    a10g = rows[("GPU-abc", None)]
    assert (a10g["model"], a10g["node"]) == ("NVIDIA A10G", "ip-11111")
    assert a10g["dram_active"] == F32(3e-6, rel=1e-6)
    assert (a10g["k8s_namespace"], a10g["k8s_pod"], a10g["k8s_container"]) == (
        "ray-llm",
        "ray-1111111",
        "ray-worker",
    )
    [obs] = result.job_gpus.to_pylist()
    assert (obs["job_id"], obs["gpu_uuid"], obs["mapping"]) == (
        "ray-llm/ray-1111111",
        "GPU-abc",
        "exporter-label",
    )
    # the file's dummy lines carry no labels at all: no GPU to put them on
    assert result.counts == {"no_gpu_uuid": 8, "unknown_metric": 19}


def test_issue_snippets(fixture_text, parse):
    result = parse(fixture_text("sample_issue_snippets.txt"), default_node="exporter-host")
    rows = _by_key(result)

    # A: XID gauge with err_code/err_msg labels, GeForce
    rtx = rows[("GPU-96be9fff-fdfd-9b87-88d4-fe5b9a012148", None)]
    assert (rtx["node"], rtx["xid_last"], rtx["fb_free_mib"]) == ("debian", 0, 24268)
    # C: A30 MIG instances of two GPUs
    a30 = [r for r in rows.values() if r["model"] == "NVIDIA A30"]
    assert sorted((r["gpu_index"], r["mig_instance"]) for r in a30) == [
        (0, 3),
        (0, 4),
        (0, 5),
        (0, 6),
        (1, 3),
        (1, 4),
    ]
    assert {(r["mig_profile"], r["sm_clock_mhz"]) for r in a30} == {("1g.6gb", 1440)}
    # E: 1.x names with empty pod labels (old exporters write pod="" for "no pod")
    old = rows[("GPU-c1f38265-5e7c-0a81-14a0-240a35ea8160", None)]
    assert old["node"] == "dcgm-exporter-6ldbb"
    assert (old["sm_clock_mhz"], old["mem_clock_mhz"], old["temp_c"]) == (585, 5000, 54)
    assert old["power_w"] == F32(30.982, rel=1e-6)
    assert old["energy_j"] == pytest.approx(55_491_669.881)
    assert old["gpu_util_pct"] == 0
    assert old["k8s_pod"] is None and old["k8s_namespace"] is None
    # F: old namespace (`uuid`, pod_name/pod_namespace/container_name), no host label
    mig = rows[("GPU-af2c63a8-8c8b-21cc-581a-bab6bba89d08", 1)]
    assert (mig["mig_profile"], mig["node"], mig["k8s_pod"]) == ("4g.40gb", "exporter-host", None)
    podded = rows[("GPU-931446e6-0413-2864-5b76-11227dcda4ae", None)]
    assert podded["engine_active"] == F32(0.008246, rel=1e-6)
    assert (podded["k8s_namespace"], podded["k8s_pod"], podded["k8s_container"]) == (
        "ai-1",
        "d85np-t6mdg",
        "-grpc-pod",
    )
    # H: the raw DCGM sentinel 9223372036854775794 becomes null and is counted
    readme = rows[("GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52", None)]
    assert (readme["sm_clock_mhz"], readme["mem_clock_mhz"]) == (139, 405)
    assert readme["mem_temp_c"] is None
    assert "9223372036854775794" in result.examples["sentinel"][0]
    # D: PromQL result text without values; B/G/I and 1.x pcie_replay: no column
    assert result.counts == {"missing_value": 2, "sentinel": 1, "unknown_metric": 6}


def test_series_without_host_label_need_a_default_node(fixture_text, parse):
    result = parse(fixture_text("sample_issue_snippets.txt"))

    assert result.counts["no_node"] == 4  # snippets F and H (H's sentinel line counts as such)
    assert "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52" not in set(
        result.samples.column("gpu_uuid").to_pylist()
    )


def test_exported_pod_labels_win_over_the_exporters_own_pod(fixture_text, parse):
    # Snippet D is PromQL output without values; give each line one to parse it as a scrape.
    lines = [
        line + " 41"
        for line in fixture_text("sample_issue_snippets.txt").splitlines()
        if line.startswith("DCGM_FI") and "exported_pod" in line
    ]
    assert len(lines) == 2

    one = parse(lines[0])
    both = parse("\n".join(lines))

    [row] = one.samples.to_pylist()
    assert (row["k8s_namespace"], row["k8s_pod"], row["k8s_container"]) == (
        "default",
        "pod1",
        "ai-artifactory-control",
    )
    assert (row["node"], row["temp_c"]) == ("worker1", 41)
    # two pods share the GPU: one sample row per pod, each with the device's values (DESIGN §4)
    shared = both.samples.to_pylist()
    assert [(r["job_id"], r["k8s_pod"], r["temp_c"]) for r in shared] == [
        ("default/pod1", "pod1", 41),
        ("default/pod2", "pod2", 41),
    ]
    assert [o["job_id"] for o in both.job_gpus.to_pylist()] == ["default/pod1", "default/pod2"]
    assert "dcgm-exporter-dev-78z52" not in str(both.samples.to_pylist())


def test_renamed_4_10_fields_land_like_the_4_8_scrape(fixture_text, parse):
    old = _rows(parse(fixture_text("sample_t4_gpu_operator_busy.txt")))[0]
    result = parse(fixture_text("synthetic_4.10_renamed.txt"))
    [new] = _rows(result)

    for column, value in old.items():
        if column == "energy_j":
            assert new[column] == 15_152_422  # whole joules in the new field
        elif value is not None:
            assert new[column] == value, column
    assert new["gpu_util_pct"] == 91  # ratio 0.91 → %
    assert (new["sm_clock_mhz"], new["mem_clock_mhz"]) == (660, 5000)  # Hz → MHz
    assert (new["fb_used_mib"], new["fb_free_mib"]) == (5120, 9791)  # bytes → MiB
    assert new["sm_active"] == F32(0.101, rel=1e-6)
    assert new["sm_occupancy"] == F32(0.05, rel=1e-6)
    assert (new["nvlink_tx_bps"], new["nvlink_rx_bps"]) == (0, 0)
    assert (new["xid_last"], new["remap_failure"], new["clock_event_reasons"]) == (0, False, 0)
    # FB_CAPACITY_BYTES has no column; MEMORY_TEMP_CELSIUS 0 is "unsupported" as before
    assert result.counts == {"unknown_metric": 1, "zero_means_unsupported": 1}
