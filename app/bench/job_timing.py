"""Time `gpuledger job JOBID` on a bench lake: in this process and as a user types it."""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from app.errors import AppError

__all__ = ["report_in_process", "report_process", "report_process_cpu", "time_job_reports"]


def report_in_process(lake: Path, job_id: str, cluster: str | None = None) -> float:
    """Seconds of `gpuledger job`'s work in this process: the job's views, report and text."""
    from app.commands.job import render_text
    from detectors.job_report import load_job_report
    from warehouse.one_job import connect_job

    t0 = time.perf_counter()
    con = connect_job(lake, job_id, cluster)
    try:
        render_text(load_job_report(con, job_id, cluster))
    finally:
        con.close()
    return time.perf_counter() - t0


def _children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def report_process(lake: Path, job_id: str) -> float:
    """Seconds of `gpuledger job JOBID` in a new process (start-up included)."""
    return report_process_cpu(lake, job_id)[0]


def report_process_cpu(lake: Path, job_id: str) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, all its threads) of `gpuledger job JOBID` in a
    new process: on a shared machine the CPU time is the steadier figure."""
    cpu0, t0 = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "job", "--lake", str(lake), job_id],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds, cpu = time.perf_counter() - t0, _children_cpu_s() - cpu0
    if done.returncode != 0:
        raise AppError(f"gpuledger job {job_id} failed: {done.stderr.strip()[-300:]}")
    return seconds, cpu


def time_job_reports(lake: Path, jobs: list[tuple[str, int]]) -> dict[str, Any]:
    """`gpuledger job` for each (job_id, GPUs) of `jobs`: seconds in process and as a process,
    with their medians."""
    in_process = [report_in_process(lake, job_id) for job_id, _ in jobs]
    process, process_cpu = zip(
        *(report_process_cpu(lake, job_id) for job_id, _ in jobs), strict=True
    )
    return {
        "jobs": [job_id for job_id, _ in jobs],
        "gpus": [gpus for _, gpus in jobs],
        "in_process_s": in_process,
        "process_s": list(process),
        "process_cpu_s": list(process_cpu),
        "median_in_process_s": statistics.median(in_process),
        "median_process_s": statistics.median(process),
        "median_process_cpu_s": statistics.median(process_cpu),
    }
