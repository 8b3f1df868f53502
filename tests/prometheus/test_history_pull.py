"""Acceptance (b): days of history backfilled with promtool, pulled in windows past Prometheus'
11,000-points-per-series limit, land exactly what Prometheus holds (4.9 generation names)."""

from __future__ import annotations

import urllib.parse
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

from app.commands.prometheus import command_prometheus

pytestmark = pytest.mark.live

SELECTOR = 'cluster="hist"'


def _ms(table: pa.Table, column: str) -> np.ndarray:
    return pc.cast(pc.cast(table.column(column), pa.timestamp("ms")), pa.int64()).to_numpy(
        zero_copy_only=False
    )


def test_days_of_history_are_pulled_window_by_window_exactly(
    history, history_server, helpers, tmp_path
):
    server = history_server
    start_ms = int(history.start.timestamp() * 1000)
    end_ms = int(history.end.timestamp() * 1000)
    # the limit is real: one step-resampled range query at the scrape interval is refused
    status, body = helpers.http_get(
        f"{server.url}/api/v1/query_range?"
        + urllib.parse.urlencode(
            {
                "query": "DCGM_FI_DEV_GPU_UTIL_RATIO",
                "start": start_ms / 1000,
                "end": end_ms / 1000,
                "step": 15,
            }
        )
    )
    assert status == 400 and b"exceeded maximum resolution of 11,000 points" in body

    lake = tmp_path / "lake"
    result = CliRunner().invoke(
        command_prometheus,
        [
            "--url", server.url, "--cluster", "hist", "--selector", SELECTOR,
            "--since", history.start.isoformat(), "--until", history.end.isoformat(),
            "--window", "6h", "--lake", str(lake), "--quiet",
        ],
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert "from 8 window(s)" in result.output
    samples = helpers.read_lake(lake, "gpu_samples")
    expected = helpers.read_prometheus(server, helpers.history_families, SELECTOR, start_ms, end_ms)
    compared = helpers.assert_lake_matches(samples, expected)
    assert compared["rows"] == history.samples  # every simulated sample, once
    per_gpu = Counter(samples.column("gpu_uuid").to_pylist())
    assert len(per_gpu) == history.gpus and max(per_gpu.values()) > 11_000
    print(f"history: {compared} ; samples per GPU {sorted(per_gpu.values())}")
    assert set(samples.column("source").to_pylist()) == {"prometheus"}
    assert set(pc.unique(samples.column("interval_s")).to_pylist()) == {15.0}


def test_job_labels_in_history_become_intervals_that_cover_their_samples(
    history, history_server, tmp_path, helpers
):
    lake = tmp_path / "lake"
    result = CliRunner().invoke(
        command_prometheus,
        [
            "--url", history_server.url, "--cluster", "hist", "--selector", SELECTOR,
            "--since", history.start.isoformat(), "--until", history.end.isoformat(),
            "--window", "6h", "--lake", str(lake), "--quiet",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    samples = helpers.read_lake(lake, "gpu_samples")
    jobs = helpers.read_lake(lake, "job_gpus")

    labelled = samples.filter(pc.is_valid(samples.column("hpc_job")))
    assert jobs.num_rows and set(jobs.column("mapping").to_pylist()) == {"exporter-label"}
    assert jobs.num_rows < labelled.num_rows / 20  # runs, not one row per sample
    runs: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for job, uuid, lo, hi in zip(
        jobs.column("job_id").to_pylist(), jobs.column("gpu_uuid").to_pylist(),
        _ms(jobs, "start_ts"), _ms(jobs, "end_ts"), strict=True,
    ):  # fmt: skip
        runs.setdefault((job, uuid), []).append((lo, hi))
    for job, uuid, ts in zip(
        labelled.column("hpc_job").to_pylist(), labelled.column("gpu_uuid").to_pylist(),
        _ms(labelled, "ts"), strict=True,
    ):  # fmt: skip
        assert any(lo <= ts < hi for lo, hi in runs[(job, uuid)]), (job, uuid, ts)
    unlabelled = samples.filter(pc.is_null(samples.column("hpc_job")))
    for uuid, ts in zip(
        unlabelled.column("gpu_uuid").to_pylist(), _ms(unlabelled, "ts"), strict=True
    ):
        assert not any(
            lo <= ts < hi for (_, u), spans in runs.items() if u == uuid for lo, hi in spans
        )


def test_xid_changes_in_history_become_events(history, history_server, tmp_path, helpers):
    lake = tmp_path / "lake"
    CliRunner().invoke(
        command_prometheus,
        [
            "--url", history_server.url, "--cluster", "hist", "--selector", SELECTOR,
            "--since", history.start.isoformat(), "--until", history.end.isoformat(),
            "--window", "6h", "--lake", str(lake), "--quiet",
        ],
    )  # fmt: skip
    events = helpers.read_lake(lake, "gpu_events")
    xid_family = tuple(f for f in helpers.history_families if f.column == "xid_last")
    held = helpers.read_prometheus(
        history_server, xid_family, SELECTOR,
        int(history.start.timestamp() * 1000), int(history.end.timestamp() * 1000),
    )  # fmt: skip

    edges = set()
    last: dict[str, float] = {}
    order = np.lexsort(
        (held.column("ts").to_numpy(), np.array(held.column("gpu_uuid").to_pylist()))
    )
    for i in order:
        uuid, ts, code = (
            held["gpu_uuid"][i].as_py(),
            held["ts"][i].as_py(),
            held["value"][i].as_py(),
        )
        if code != 0 and last.get(uuid) != code:
            edges.add((uuid, ts, int(code)))
        last[uuid] = code
    xids = events.filter(pc.equal(events.column("kind"), "xid"))
    got = set(
        zip(
            xids.column("gpu_uuid").to_pylist(),
            _ms(xids, "ts").tolist(),
            xids.column("code").to_pylist(),
            strict=True,
        )
    )
    assert edges and edges <= got  # every new XID is an event (not every sticky sample)
    assert len(got) <= len(edges) + 2  # at most a repeat after a telemetry gap
