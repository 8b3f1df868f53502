"""The first `gpuledger attribute` of a lake, as issue #24 measures it (`gpuledger bench`).

- an external lake: the raw files of a simulated lake as another tool would write them (no
  `_batch`, other file names, samples without any `job_id`), so every sample's owner is decided
  from the allocations; the first attribution of it against the plain scan of the same sample
  columns in the same process (target ≤ 8×, goal 4×);
- a small lake (64 simulated GPUs × 2 days at 15 s, ~0.73 M samples): `gpuledger attribute`
  from scratch, in this process and as a command a user types (target ≤ 1 s).
"""

from __future__ import annotations

import datetime as dt
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from app.errors import AppError
from warehouse import layout
from warehouse.lake import Lake
from warehouse.schema import OWN_TABLES, RAW_TABLES
from warehouse.writer import BATCH_COLUMN

__all__ = [
    "EXTERNAL_TARGET",
    "SMALL_LAKE_TARGET_S",
    "external_copy",
    "time_external_first_pass",
    "time_small_lake",
]

EXTERNAL_TARGET = 8.0  # issue #24: the first pass over an external lake ≤ 8× the scan (goal 4×)
EXTERNAL_GOAL = 4.0
SMALL_LAKE_TARGET_S = 1.0  # issue #24: `attribute` on a lake of under a million samples ≤ 1 s
# what sources land; gpuledger's own outputs among the raw tables are detect's and evaluate's
_COLLECTED = tuple(t for t in RAW_TABLES if t not in OWN_TABLES)
_BATCH_ROWS = 262_144  # rows per batch copied: one day's file is never held whole
Echo = Callable[[str], None]


def external_copy(ours: Path, theirs: Path) -> int:
    """Copy every raw file of the lake `ours` into `theirs` as another tool would write it into
    the layout: no `_batch` (so not gpuledger's to compact), other file names, and samples
    without `job_id` or `hpc_job` (the owners are then decided from the allocations). Streamed
    in batches: memory stays bounded by a batch, not a day. Returns the sample rows copied."""
    samples = 0
    for table in _COLLECTED:
        dropped = {BATCH_COLUMN, *(("job_id", "hpc_job") if table == "gpu_samples" else ())}
        for n, path in enumerate(layout.table_files(ours, table)):
            source = pq.ParquetFile(path)
            kept = [name for name in source.schema_arrow.names if name not in dropped]
            target = theirs / path.parent.relative_to(ours) / f"part-{n:05d}.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            with pq.ParquetWriter(target, _kept_schema(source, kept), compression="zstd") as out:
                for batch in source.iter_batches(batch_size=_BATCH_ROWS, columns=kept):
                    out.write_batch(batch)
                    if table == "gpu_samples":
                        samples += batch.num_rows
    return samples


def _kept_schema(source: pq.ParquetFile, kept: list[str]) -> pa.Schema:
    """The Arrow schema of `source`'s columns `kept`, without the file's metadata."""
    arrow = source.schema_arrow
    return pa.schema([arrow.field(name) for name in kept])


def _cpu_s() -> float:
    """CPU seconds of this process so far, all its threads (DuckDB's included)."""
    return time.process_time()


def _children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _attribute_in_process(root: Path) -> tuple[float, float]:
    """Wall and CPU seconds of `gpuledger attribute`'s work on `root`, in this process (what
    the command runs: compaction of closed days, the per-day pass, the summary marts)."""
    from app.pipeline import attribute, default_pipeline_config

    config = default_pipeline_config()
    cpu, start = _cpu_s(), time.perf_counter()
    attribute(Lake(root), config, dt.datetime.now(dt.UTC))
    return time.perf_counter() - start, _cpu_s() - cpu


def _attribute_command(root: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, all threads) of `gpuledger attribute -q` on `root`
    in a new process, start-up included, as a user types it. With the built-in defaults, as
    the in-process run it is compared with: run from the lake's folder, away from a
    ./gpuledger.toml, and without $GPULEDGER_* settings (a site's `bucket_s` made it other
    work, or failed it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    cpu, start = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "attribute", "-q", "--lake", str(root)],
        capture_output=True,
        text=True,
        check=False,
        cwd=root.parent,
        env=env,
    )
    seconds, used = time.perf_counter() - start, _children_cpu_s() - cpu
    if done.returncode != 0:
        raise AppError(f"gpuledger attribute failed: {done.stderr.strip()[-300:]}")
    return seconds, used


def _floor_s(root: Path, runs: int = 2) -> tuple[float, float]:
    """The best of `runs` plain scans of the sample columns the marts read, on `root`: wall
    and CPU seconds (each the least of the runs)."""
    from app.bench.baselines import floor_scan

    con = Lake(root).connect(require=("gpu_samples",))
    walls, cpus = [], []
    try:
        for _ in range(runs):
            cpu, start = _cpu_s(), time.perf_counter()
            floor_scan(con)
            walls.append(time.perf_counter() - start)
            cpus.append(_cpu_s() - cpu)
    finally:
        con.close()
    return min(walls), min(cpus)


def time_external_first_pass(ours: Path, theirs: Path, echo: Echo) -> dict[str, Any]:
    """Copy the lake `ours` as an external one into `theirs`, then time its first attribution
    against the plain scan of the same columns; `theirs` is removed afterwards."""
    echo("bench: an external lake (samples without job_id), its first attribution")
    copy_s, samples = _timed(lambda: external_copy(ours, theirs))
    try:
        floor_s, floor_cpu_s = _floor_s(theirs)
        rss_before = _peak_rss_mb()
        seconds, cpu_s = _attribute_in_process(theirs)
        rss = _peak_rss_mb()
    finally:
        shutil.rmtree(theirs, ignore_errors=True)
    ratio = seconds / floor_s
    return {
        "samples": samples,
        "copy_s": copy_s,
        "floor_scan_s": floor_s,
        "attribute_s": seconds,
        "attribute_cpu_s": cpu_s,
        "vs_floor": ratio,
        # on a shared machine the steadier ratio: CPU seconds of both, all threads
        "floor_scan_cpu_s": floor_cpu_s,
        "vs_floor_cpu": cpu_s / floor_cpu_s if floor_cpu_s > 0 else float("inf"),
        "target": EXTERNAL_TARGET,
        "goal": EXTERNAL_GOAL,
        "within_target": ratio <= EXTERNAL_TARGET,
        "within_goal": ratio <= EXTERNAL_GOAL,
        # the process's peak resident set before and after (ru_maxrss only grows)
        "peak_rss_mb_before": rss_before,
        "peak_rss_mb": rss,
    }


def _timed(func: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = func()
    return time.perf_counter() - start, value


def time_small_lake(
    folder: Path, gpus: int, days: int, interval_s: int, echo: Echo, runs: int = 2
) -> dict[str, Any]:
    """Simulate `gpus` × `days` at `interval_s` under `folder`, then time `gpuledger attribute`
    from scratch on fresh copies of it, alternately in this process and as a command, `runs`
    times each (the machine may be shared: the best of each is reported, with its CPU time).
    `folder` is removed afterwards."""
    from collector.sim import SimConfig, simulate

    pristine = folder / "simulated"
    echo(f"bench: a small lake, {gpus} GPUs × {days} days at {interval_s} s")
    made = simulate(SimConfig(gpus=gpus, days=days, interval_s=interval_s), Lake(pristine))
    try:
        samples = sum(
            pq.read_metadata(p).num_rows for p in layout.table_files(pristine, "gpu_samples")
        )
        floor_s, floor_cpu_s = _floor_s(pristine)
        load_before = os.getloadavg()[0]
        in_process: list[tuple[float, float]] = []
        command: list[tuple[float, float]] = []
        for run in range(runs):
            for kind, timer, into in (
                ("in process", _attribute_in_process, in_process),
                ("as a command", _attribute_command, command),
            ):
                echo(f"bench: small lake, attribute from scratch {kind} ({run + 1}/{runs})")
                copy = folder / "run"
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(pristine, copy)
                into.append(timer(copy))
                shutil.rmtree(copy, ignore_errors=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    best, best_command = min(in_process), min(command)
    return {
        "gpus": made.gpus,
        "days": days,
        "interval_s": interval_s,
        "samples": samples,
        "jobs": made.jobs,
        "floor_scan_s": floor_s,
        "floor_scan_cpu_s": floor_cpu_s,
        "in_process_s": [s for s, _ in in_process],
        "in_process_cpu_s": [c for _, c in in_process],
        "command_s": [s for s, _ in command],
        "command_cpu_s": [c for _, c in command],
        "best_in_process_s": best[0],
        "best_in_process_cpu_s": best[1],
        "best_command_s": best_command[0],
        "best_command_cpu_s": best_command[1],
        "in_process_vs_floor": best[0] / floor_s,
        "target_s": SMALL_LAKE_TARGET_S,
        "within_target_in_process": best[0] <= SMALL_LAKE_TARGET_S,
        "within_target_command": best_command[0] <= SMALL_LAKE_TARGET_S,
        # the 1-minute load average before and after: how far the wall times stand for an
        # idle machine's
        "load_average": [load_before, os.getloadavg()[0]],
    }
