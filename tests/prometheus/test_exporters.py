"""The simulated dcgm-exporter fleet: its rendering and its HTTP endpoints
(collector/sim/exposition.py, collector/sim/exporters.py, `gpuledger serve-exporters`)."""

from __future__ import annotations

import datetime as dt
import re
import urllib.error
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

from app.commands.serve_exporters import command as serve_exporters
from collector.sim.exporters import (
    ExporterServers,
    FleetConfig,
    SimulatedFleet,
    history,
    scrape_config,
)
from collector.sim.exposition import FAMILIES, render_exposition, render_openmetrics
from collector.sources.dcgm_exporter.exposition import parse_exposition

T0 = dt.datetime(2026, 11, 2, 8, 0, tzinfo=dt.UTC)
LABEL_ORDER_48 = [
    "gpu",
    "UUID",
    "pci_bus_id",
    "device",
    "modelName",
    "Hostname",
    "DCGM_FI_DRIVER_VERSION",
]


@pytest.fixture(scope="module")
def fleet() -> SimulatedFleet:
    clock = iter(np.arange(1_000_000.0, 2_000_000.0, 0.5)).__next__
    return SimulatedFleet(FleetConfig(cluster="t", gpus=16, collect_interval_s=30), clock=clock)


def _one_row_per_gpu(fleet: SimulatedFleet) -> pa.Table:
    return fleet.current("gpu-001", fleet.started + 3600)


@pytest.mark.parametrize("version", ["4.8", "4.9"])
def test_a_rendered_scrape_parses_back_to_the_simulated_values(fleet, version):
    rows = _one_row_per_gpu(fleet)

    text = render_exposition(rows, version=version)
    parsed = parse_exposition(text, cluster="t", ts=T0, interval_s=30, source="x")

    assert parsed.counts == {}  # every line known and valid
    assert parsed.samples.num_rows == rows.num_rows
    got = {r["gpu_uuid"]: r for r in parsed.samples.to_pylist()}
    for want in rows.to_pylist():
        row = got[want["gpu_uuid"]]
        for column in (
            "gpu_util_pct",
            "fb_used_mib",
            "temp_c",
            "sm_clock_mhz",
            "xid_last",
            "hpc_job",
        ):
            assert row[column] == want[column], column
        for column in ("power_w", "sm_active", "energy_j", "pcie_rx_bps"):
            if want[column] is None:
                assert row[column] is None
            else:  # %f keeps 6 decimals; mJ are whole numbers
                assert row[column] == pytest.approx(want[column], abs=1e-3, rel=1e-6), column


def test_series_carry_dcgm_exporters_labels_in_its_order():
    fleet_rows = pa.table(
        {
            "gpu_index": pa.array([3], pa.int16()),
            "gpu_uuid": ["GPU-x"],
            "model": ["NVIDIA H100 80GB HBM3"],
            "node": ["n7"],
            "xid_last": pa.array([79], pa.int32()),
            "hpc_job": ["1234"],
            "gpu_util_pct": pa.array([97.0], pa.float32()),
        }
    )

    text = render_exposition(fleet_rows, version="4.8")

    xid = next(line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_XID_ERRORS{"))
    names = re.findall(r'([A-Za-z_]+)="', xid)
    assert names == [*LABEL_ORDER_48, "err_code", "err_msg", "hpc_job"]
    assert 'pci_bus_id="00000000:5D:00.0"' in xid and 'device="nvidia3"' in xid
    assert 'err_msg="GPU has fallen off the bus"' in xid and xid.endswith("} 79")
    assert (
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        in text
    )
    assert "DCGM_FI_DEV_POWER_USAGE" not in text  # a null field is left out, as the exporter does


def test_the_49_generation_renames_fields_labels_and_units():
    rows = pa.table(
        {
            "gpu_index": pa.array([0], pa.int16()),
            "gpu_uuid": ["GPU-x"],
            "model": ["M"],
            "node": ["n7"],
            "sm_clock_mhz": pa.array([1980.0], pa.float32()),
            "fb_used_mib": pa.array([1024.0], pa.float32()),
            "gpu_util_pct": pa.array([50.0], pa.float32()),
            "energy_j": pa.array([1234.5], pa.float64()),
        }
    )

    text = render_exposition(rows, version="4.9")

    assert 'hostname="n7",DCGM_FI_SYSTEM_DRIVER_VERSION=' in text
    assert re.search(r"DCGM_FI_DEV_SM_CLOCK_HERTZ\{.*\} 1980000000\n", text)
    assert re.search(r"DCGM_FI_DEV_FB_USED_BYTES\{.*\} 1073741824\n", text)
    assert re.search(r"DCGM_FI_DEV_GPU_UTIL_RATIO\{.*\} 0\.500000\n", text)
    assert re.search(r"DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL\{.*\} 1234\.500000\n", text)
    assert {f.column for f in FAMILIES["4.8"]} == {f.column for f in FAMILIES["4.9"]}


def test_values_advance_with_the_wall_clock(fleet):
    early = fleet.current("gpu-001", fleet.started + 100)
    later = fleet.current("gpu-001", fleet.started + 400)

    assert fleet.sim_ms(fleet.started + 400) - fleet.sim_ms(fleet.started + 100) == 300_000
    assert early.column("ts").to_pylist() != later.column("ts").to_pylist()
    day = fleet.sim_ms(fleet.started + 86_400 + 100)
    assert day == fleet.sim_ms(fleet.started + 100)  # the simulated day repeats


def test_each_node_is_served_on_its_own_port(fleet):
    with ExporterServers(fleet, port=0) as servers:
        targets = servers.targets
        assert set(targets) == {"gpu-001", "gpu-002"} and len(set(targets.values())) == 2
        with urllib.request.urlopen(f"http://{targets['gpu-002']}/metrics", timeout=10) as reply:
            body = reply.read().decode()
            assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://{targets['gpu-002']}/other", timeout=10)
        assert missing.value.code == 404
        missing.value.close()
    assert 'Hostname="gpu-002"' in body and 'Hostname="gpu-001"' not in body
    assert f'"{targets["gpu-001"]}"' in scrape_config(targets, cluster="t")


def test_history_renders_as_openmetrics_that_promtool_can_load():
    samples = history(FleetConfig(cluster="h", gpus=8), start=T0, days=1, interval_s=3600)

    text = "".join(render_openmetrics(samples, version="4.9", extra_labels=(("job", "dcgm"),)))

    lines = text.splitlines()
    assert lines[-1] == "# EOF"
    families = [line.split()[2] for line in lines if line.startswith("# TYPE")]
    assert len(families) == len(set(families))  # each family once, contiguous
    sample = next(line for line in lines if not line.startswith("#"))
    assert re.fullmatch(r'\S+\{.*,job="dcgm"(,hpc_job="\d+")?\} \S+ \d+\.\d{3}', sample)
    seen = [line.rsplit(" ", 2)[0] for line in lines if not line.startswith("#")]
    for i in range(1, len(seen)):  # a series never comes back after another one started
        assert seen[i] == seen[i - 1] or seen[i] not in seen[: i - 1]
    assert pc.min(samples.column("ts")).as_py() >= T0


def test_serve_exporters_writes_history_for_promtool(tmp_path):
    out = tmp_path / "history.om"

    result = CliRunner().invoke(
        serve_exporters,
        ["--gpus", "8", "--openmetrics", str(out), "--days", "1", "--interval", "3600"],
    )

    assert result.exit_code == 0, result.output
    assert out.read_text().endswith("# EOF\n")
    assert "promtool tsdb create-blocks-from openmetrics" in result.output


def test_serve_exporters_refuses_a_collect_interval_that_does_not_divide_a_day():
    result = CliRunner().invoke(serve_exporters, ["--collect-interval", "7", "--port", "0"])

    assert result.exit_code == 1
    assert "interval_s must divide a day" in result.output
