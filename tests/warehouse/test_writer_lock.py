"""The lake's writer lock between real processes (issue #22, MEDIUM 6): one writer of the marts,
findings and attribution state at a time; the others wait naming it, or exit at once."""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
import threading
import time
from typing import Any

import pytest
from click.testing import CliRunner

from app.cli import cli
from app.pipeline import default_pipeline_config, detect
from tests.marts import rows as r
from tests.warehouse.lock_holder import WAIT_S, hold
from warehouse.attribution import AttributionConfig, build_marts
from warehouse.connection import connect
from warehouse.lake import Lake
from warehouse.writer_lock import WriterBusy, holder, wait_limit, writer_lock

# spawned children must not re-run a dashboard test's __main__ (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("spawn_safe_main")


def holder_context() -> Any:
    """Where the other writers start: forked from one server process per test process that
    has imported tests/warehouse/lock_holder.py and nothing of the test process (no DuckDB
    threads), so each holder costs a fork instead of a new interpreter and its imports."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["tests.warehouse.lock_holder"])
    return ctx


@pytest.fixture
def other_writer(tmp_path):
    """Another process holding `tmp_path`'s writer lock; yields (process, release event)."""
    ctx = holder_context()
    held, release = ctx.Event(), ctx.Event()
    process = ctx.Process(target=hold, args=(str(tmp_path), held, release))
    process.start()
    try:
        assert held.wait(WAIT_S), "the other writer never took the lock"
        yield process, release
    finally:
        release.set()
        process.join(WAIT_S)


def test_a_second_writer_without_waiting_fails_at_once_naming_the_holder(tmp_path, other_writer):
    process, _ = other_writer
    started = time.monotonic()
    with pytest.raises(WriterBusy) as caught:
        with writer_lock(tmp_path, "attribute", wait=False):
            pytest.fail("took a lock another process holds")
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert f"pid {process.pid} on " in message
    assert "gpuledger detect, step detect" in message
    assert "--no-wait" in message
    assert holder(tmp_path) is not None and holder(tmp_path).pid == process.pid


def test_a_second_writer_waits_telling_whom_for_and_takes_the_lock_once_released(
    tmp_path, other_writer
):
    process, release = other_writer
    said: list[str] = []
    threading.Timer(0.6, release.set).start()
    started = time.monotonic()
    with writer_lock(tmp_path, "attribute", command="gpuledger attribute", progress=said.append):
        waited = time.monotonic() - started
        assert holder(tmp_path).pid == os.getpid()
        assert holder(tmp_path).step == "attribute"
    assert waited >= 0.5
    assert len(said) == 1 and f"pid {process.pid}" in said[0] and "gpuledger detect" in said[0]
    assert holder(tmp_path) is None  # released: no record left to mislead


def test_a_wait_has_a_timeout_that_names_the_holder(tmp_path, other_writer):
    process, _ = other_writer
    # 0.6 s: said as "1 s", the wait rounded to whole seconds
    with pytest.raises(WriterBusy, match=rf"gave up after 1 s waiting for pid {process.pid} "):
        with writer_lock(tmp_path, "attribute", timeout_s=0.6, progress=lambda _m: None):
            pytest.fail("took a lock another process holds")


def test_the_step_functions_take_the_lock_themselves(tmp_path):
    # A small lake: the steps of `gpuledger run` (attribute, detect) each wait for it.
    r.land(tmp_path, "gpu_samples", r.samples(range(0, 300, 30)))
    ctx = holder_context()
    held, release = ctx.Event(), ctx.Event()
    process = ctx.Process(target=hold, args=(str(tmp_path), held, release))
    process.start()
    try:
        assert held.wait(WAIT_S)
        con = connect(tmp_path)
        with wait_limit(0.2):
            with pytest.raises(WriterBusy, match=f"pid {process.pid}"):
                build_marts(con, tmp_path, AttributionConfig())
            with pytest.raises(WriterBusy, match=f"pid {process.pid}"):
                detect(
                    Lake.at(tmp_path),
                    default_pipeline_config(),
                    dt.datetime(2024, 3, 2, tzinfo=dt.UTC),
                )
        release.set()
        process.join(WAIT_S)
        counts = build_marts(con, tmp_path, AttributionConfig())  # once released, it runs
        assert counts["gpu_job_buckets"] > 0
        con.close()
    finally:
        release.set()
        process.join(WAIT_S)


def test_the_lock_is_reentrant_within_a_thread_and_released_when_its_holder_dies(tmp_path):
    with writer_lock(tmp_path, "attribute"):
        with writer_lock(tmp_path, "attribute", wait=False):  # a command, then its step
            pass
        assert holder(tmp_path) is not None
    ctx = holder_context()
    held, release = ctx.Event(), ctx.Event()
    process = ctx.Process(target=hold, args=(str(tmp_path), held, release))
    process.start()
    assert held.wait(WAIT_S)
    process.kill()  # no clean exit: the kernel releases the flock
    process.join(WAIT_S)
    with writer_lock(tmp_path, "attribute", timeout_s=5.0):
        pass


@pytest.mark.parametrize("command", ["attribute", "detect"])
def test_the_cli_with_no_wait_exits_with_one_line_naming_the_holder(
    tmp_path, other_writer, command
):
    process, _ = other_writer
    r.land(tmp_path, "gpu_samples", r.samples(range(0, 300, 30)))
    result = CliRunner().invoke(cli, [command, "--lake", str(tmp_path), "--no-wait", "-q"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: the lake is being written by ")
    assert f"pid {process.pid}" in lines[0]
    assert "Traceback" not in result.output
