"""The node-local spool: atomic puts, idempotent landing, an unreachable lake, bad files."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil

import pyarrow as pa
import pytest

from collector.sources.nvml.agent import AgentConfig, NvmlAgent
from collector.sources.spool import Spool, read_throughput_file
from tests.nvml.fake_nvml import FakeGpu, FakeNvml
from warehouse.lake import Lake
from warehouse.schema import RAW_TABLES
from warehouse.writer import write_batch

UUID = "GPU-0f1e2d3c-0000-4000-8000-000000000000"
SLURM = "0::/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_0"


def events(t0: dt.datetime, *codes: int) -> pa.Table:
    schema = RAW_TABLES["gpu_events"].schema
    rows = [
        {"cluster": "della", "node": "g001", "gpu_uuid": UUID, "gpu_index": 0, "ts": t0,
         "kind": "xid", "code": c, "detail": None}
        for c in codes
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=schema)


def test_put_then_land_moves_rows_to_the_lake_and_empties_the_spool(tmp_path, t0, read_lake):
    spool = Spool(tmp_path / "spool")
    spool.put("gpu_events", events(t0, 48, 79), "b1")

    result = spool.land(Lake.at(tmp_path / "lake"), "della")

    assert (result.files, dict(result.rows), result.error) == (1, {"gpu_events": 2}, None)
    assert read_lake(tmp_path / "lake", "gpu_events").column("code").to_pylist() == [48, 79]
    assert spool.pending() == []


def test_putting_a_batch_id_again_replaces_the_spooled_version(tmp_path, t0, read_lake):
    spool = Spool(tmp_path / "spool")
    spool.put("gpu_events", events(t0, 1), "grows")
    spool.put("gpu_events", events(t0, 1, 2), "grows")

    spool.land(Lake.at(tmp_path / "lake"), "della")

    assert read_lake(tmp_path / "lake", "gpu_events").column("code").to_pylist() == [1, 2]


def test_a_landing_retried_after_a_crash_does_not_duplicate(tmp_path, t0, read_lake):
    spool = Spool(tmp_path / "spool")
    path = spool.put("gpu_events", events(t0, 48), "b1")
    assert path is not None
    copy = tmp_path / "copy.parquet"
    shutil.copy(path, copy)
    spool.land(Lake.at(tmp_path / "lake"), "della")
    shutil.copy(copy, path)  # as if the agent died after writing to the lake, before unlinking

    spool.land(Lake.at(tmp_path / "lake"), "della")

    assert read_lake(tmp_path / "lake", "gpu_events").num_rows == 1


def test_a_lake_that_fails_midway_keeps_the_rest_for_later(tmp_path, t0, read_lake):
    spool = Spool(tmp_path / "spool")
    for n in range(3):
        spool.put("gpu_events", events(t0 + dt.timedelta(seconds=n), n), f"b{n}")
    calls = []

    def flaky(root, table, batch, batch_id):
        calls.append(batch_id)
        if len(calls) == 2:
            raise OSError(5, "Input/output error")
        return write_batch(root, table, batch, batch_id)

    first = spool.land(Lake.at(tmp_path / "lake"), "della", write=flaky)
    second = spool.land(Lake.at(tmp_path / "lake"), "della", write=flaky)

    assert (first.files, first.pending) == (1, 2)
    assert first.error is not None and "Input/output error" in first.error
    assert (second.files, second.pending, second.error) == (2, 0, None)
    assert sorted(read_lake(tmp_path / "lake", "gpu_events").column("code").to_pylist()) == [
        0,
        1,
        2,
    ]


def test_a_file_the_lake_refuses_is_set_aside_and_does_not_block_the_others(tmp_path, t0):
    spool = Spool(tmp_path / "spool")
    spool.put("gpu_events", events(t0, 1), "good")
    bad = tmp_path / "spool" / "gpu_events" / "bad.parquet"
    bad.write_bytes(b"not parquet at all")

    result = spool.land(Lake.at(tmp_path / "lake"), "della")

    assert (result.files, result.rejected) == (1, 1)
    assert (tmp_path / "spool" / "_rejected" / "gpu_events" / "bad.parquet").exists()
    assert spool.pending() == []


def test_throughput_files_land_their_valid_lines(tmp_path, read_lake, t0):
    inbox = Spool(tmp_path / "spool").open_inbox()
    ts_ms = int(t0.timestamp() * 1000)
    lines = [
        json.dumps({"job_id": "1234", "ts_ms": ts_ms, "node": "g001", "reporter": "77",
                    "samples_total": 640, "tokens_total": None, "steps_total": 20,
                    "source": "app", "model_params": 125_000_000}),
        "{not json",
        json.dumps({"ts_ms": ts_ms}),  # no job id
        json.dumps({"job_id": "1234", "ts_ms": ts_ms + 1000, "samples_total": "many",
                    "model_params": 1.5}),  # not a parameter count: null
    ]  # fmt: skip
    (inbox / "g001.77.1.jsonl").write_text("\n".join(lines) + "\n")

    result = Spool(tmp_path / "spool").land(Lake.at(tmp_path / "lake"), "della")

    assert (result.files, result.skipped_lines) == (1, 2)
    rows = read_lake(tmp_path / "lake", "app_throughput").to_pylist()
    assert rows == [
        {"cluster": "della", "job_id": "1234", "ts": t0, "node": "g001", "reporter": "77",
         "samples_total": 640.0, "tokens_total": None, "steps_total": 20.0, "source": "app",
         "model_params": 125_000_000},
        {"cluster": "della", "job_id": "1234", "ts": t0 + dt.timedelta(seconds=1), "node": None,
         "reporter": None, "samples_total": None, "tokens_total": None, "steps_total": None,
         "source": "app", "model_params": None},
    ]  # fmt: skip


def test_a_symlink_dropped_in_the_inbox_is_not_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text('{"job_id": "x", "ts_ms": 1}\n')
    inbox = Spool(tmp_path / "spool").open_inbox()
    (inbox / "evil.jsonl").symlink_to(secret)

    with pytest.raises(OSError):
        read_throughput_file(inbox / "evil.jsonl", "della")
    result = Spool(tmp_path / "spool").land(Lake.at(tmp_path / "lake"), "della")
    assert (result.files, result.rejected) == (0, 1)


def test_the_inbox_lets_anyone_drop_files_but_not_list_them(tmp_path):
    inbox = Spool(tmp_path / "spool").open_inbox()

    assert inbox.stat().st_mode & 0o7777 == 0o1733


def test_the_spool_is_the_agents_alone_and_the_lake_its_groups(tmp_path, t0):
    """Root reads and writes in the spool: its group may read it but not place files or links
    there, unlike in the shared lake (whatever the umask)."""
    old = os.umask(0)
    try:
        spool = Spool(tmp_path / "spool")
        spool.put("gpu_events", events(t0, 48), "b1")
        assert spool.state_dir.is_dir()  # made on first use
        spool.land(Lake.at(tmp_path / "lake"), "della")
    finally:
        os.umask(old)

    def modes(root):
        return {oct(p.stat().st_mode & 0o7777) for p in [root, *root.rglob("*")] if p.is_dir()}

    assert modes(tmp_path / "spool") == {"0o750"}
    assert modes(tmp_path / "lake") == {"0o2770"}


# ---- the agent with a lake that comes and goes


@pytest.fixture
def agent_parts(tmp_path, proc, clock):
    proc.add(1001, SLURM.format(job=42))
    nvml = FakeNvml([FakeGpu(UUID, processes=[(1001, 1 << 30)])])
    lake = tmp_path / "lake"
    config = AgentConfig("della", "g001", tmp_path / "spool", Lake.at(lake), 30.0)
    return NvmlAgent(config, nvml=nvml, proc_root=proc.root, clock=clock), lake


def test_an_unreachable_lake_loses_nothing_and_duplicates_nothing(
    agent_parts, clock, read_lake, t0
):
    agent, lake = agent_parts
    lake.write_text("the shared file system is not mounted")  # every write under it fails
    with agent:
        down = []
        for _ in range(3):
            down.append(agent.tick())
            clock.advance(30)
        lake.unlink()
        up = agent.tick()
        clock.advance(30)
        after = agent.tick()

    assert all(t.landed.error is not None and t.landed.files == 0 for t in down)
    # inventory, interval and one sample file; then one sample file per tick: the growing
    # interval replaces its own spooled file
    assert [t.landed.pending for t in down] == [3, 4, 5]
    assert (up.landed.error, up.landed.pending) == (None, 0)
    assert after.landed.files == 2  # this tick's samples and the grown interval
    samples = read_lake(lake, "gpu_samples")
    s = dt.timedelta(seconds=1)
    assert sorted(samples.column("ts").to_pylist()) == [t0 + n * 30 * s for n in range(5)]
    runs = read_lake(lake, "job_gpus").to_pylist()
    assert [(r["job_id"], r["start_ts"], r["end_ts"]) for r in runs] == [("42", t0, t0 + 150 * s)]
    assert read_lake(lake, "gpus").num_rows == 1
    assert Spool(agent.config.spool).pending() == []
