"""Acceptance (c): the collector killed mid-pull, and Prometheus going away mid-pull. Either way
the next run resumes from the checkpoint and the lake ends with every sample exactly once."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]
SELECTOR = 'cluster="hist"'
WINDOW_S = 1800


def _args(url: str, history, lake: Path, *extra: str) -> list[str]:
    return [
        "--url", url, "--cluster", "hist", "--selector", SELECTOR,
        "--since", history.start.isoformat(), "--until", history.end.isoformat(),
        "--window", f"{WINDOW_S}s", "--parallel", "1", "--lake", str(lake), *extra,
    ]  # fmt: skip


def _checkpoint_ms(lake: Path) -> int | None:
    path = lake / "_state" / "prometheus.sqlite"
    if not path.exists():
        return None
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as con:
            row = con.execute(
                "SELECT done_until_ms FROM checkpoints WHERE cluster = 'hist'"
            ).fetchone()
    except sqlite3.OperationalError:  # created but not yet initialised
        return None
    return None if row is None else int(row[0])


def _wait_for_checkpoint(
    lake: Path, at_least_ms: int, proc: subprocess.Popen, timeout_s: float = 120
) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = _checkpoint_ms(lake)
        if done is not None and done >= at_least_ms:
            return done
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    pytest.fail("the collector never got past its first windows")


def _assert_exact(helpers, server, history, lake: Path) -> dict[str, int]:
    start_ms = int(history.start.timestamp() * 1000)
    end_ms = int(history.end.timestamp() * 1000)
    expected = helpers.read_prometheus(server, helpers.history_families, SELECTOR, start_ms, end_ms)
    compared = helpers.assert_lake_matches(helpers.read_lake(lake, "gpu_samples"), expected)
    for table in ("job_gpus", "gpu_events"):
        rows = helpers.read_lake(lake, table).drop_columns(["_batch"]).to_pylist()
        keys = [tuple(sorted((k, str(v)) for k, v in row.items())) for row in rows]
        assert len(keys) == len(set(keys)), f"duplicate {table} rows"
    return compared


def test_a_collector_killed_mid_pull_reruns_without_duplicates_or_gaps(
    history, history_server, helpers, tmp_path
):
    lake = tmp_path / "lake"
    start_ms = int(history.start.timestamp() * 1000)
    args = _args(history_server.url, history, lake, "--quiet")
    proc = subprocess.Popen(
        helpers.collector(*args),
        cwd=REPO,
        env=helpers.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for_checkpoint(lake, start_ms + 3 * WINDOW_S * 1000, proc)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    killed_at = _checkpoint_ms(lake)
    assert proc.returncode == -signal.SIGKILL
    assert killed_at is not None and killed_at < int(history.end.timestamp() * 1000)  # mid-pull

    rerun = subprocess.run(
        helpers.collector(*args),
        cwd=REPO,
        env=helpers.env(),
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert rerun.returncode == 0, rerun.stderr
    compared = _assert_exact(helpers, history_server, history, lake)
    assert compared["rows"] == history.samples
    print(f"killed with the checkpoint at {killed_at}; after the rerun: {compared}")
    assert _checkpoint_ms(lake) == int(history.end.timestamp() * 1000)


def test_prometheus_going_away_is_retried_then_one_clear_error_and_the_next_run_resumes(
    history, serve_history_copy, helpers, tmp_path
):
    server = serve_history_copy()
    lake = tmp_path / "lake"
    start_ms = int(history.start.timestamp() * 1000)
    args = _args(
        server.url, history, lake, "--retries", "2", "--backoff", "0.2s", "--timeout", "5s"
    )
    proc = subprocess.Popen(
        helpers.collector(*args), cwd=REPO, env=helpers.env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for_checkpoint(lake, start_ms + 2 * WINDOW_S * 1000, proc)
        server.stop()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()

    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, err
    assert f"Prometheus at {server.url} did not answer" in errors[0]
    assert "after 3 attempt(s)" in errors[0] and "the next run resumes from" in errors[0]
    stopped_at = _checkpoint_ms(lake)
    assert stopped_at is not None and start_ms < stopped_at < int(history.end.timestamp() * 1000)

    server.start()  # same data, same port
    rerun = subprocess.run(
        helpers.collector(*args),
        cwd=REPO,
        env=helpers.env(),
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert rerun.returncode == 0, rerun.stderr
    first = next(line for line in rerun.stderr.splitlines() if "UTC" in line and "rows" in line)
    resumed = time.strftime("%Y-%m-%d %H:%M", time.gmtime(stopped_at / 1000))
    assert first.startswith(resumed), (first, resumed)  # began at the checkpoint, not at --since
    compared = _assert_exact(helpers, server, history, lake)
    assert compared["rows"] == history.samples
    print(f"{errors[0]}\nresumed at {resumed}; after the rerun: {compared}")
