"""The service's status file, `<lake>/_state/service.json`, and its summary for `gpuledger status`.

`gpuledger run` rewrites the file (atomically) after every task step; `gpuledger status` reads it
and the lake, so it works without network access to the service and after the service stopped.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import socket
from dataclasses import asdict
from typing import Any

from app.errors import AppError
from app.service.metrics import Metrics
from app.service.supervisor import TaskState
from warehouse import layout
from warehouse.lake import Lake

__all__ = [
    "STATUS_FILE",
    "iso",
    "overdue_tasks",
    "read_status",
    "render_status",
    "stuck_tasks",
    "write_status",
]

STATUS_FILE = "service.json"


def write_status(
    lake: Lake, states: dict[str, TaskState], metrics: Metrics, now: float, pid: int
) -> None:
    """Replace the status file with the tasks' states and every metric."""
    body = {
        "written_at": now,
        "pid": pid,
        "host": socket.gethostname(),
        "tasks": {name: asdict(state) for name, state in states.items()},
        "metrics": metrics.snapshot(),
    }
    path = lake.state_dir() / STATUS_FILE
    fd, tmp = layout.create_temp(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(body, out, indent=1, default=str)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # renamed into place already, unless the write failed


def read_status(lake: Lake) -> dict[str, Any] | None:
    """The last status the service wrote, or None when it never ran on this lake. A file this
    version cannot read (cut short, damaged, or written in another layout) is one AppError."""
    path = lake.root / "_state" / STATUS_FILE
    if not path.is_file():
        return None
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AppError(f"{path}: not a status file this version can read ({exc})") from None
    problem = _shape_problem(loaded)
    if problem:
        raise AppError(
            f"{path}: not a status file this version can read ({problem}); `gpuledger run` "
            "writes a new one at its next step"
        )
    status: dict[str, Any] = loaded
    return status


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _shape_problem(body: object) -> str | None:
    """What in a loaded status file is not as `write_status` writes it (None: nothing)."""
    if not isinstance(body, dict):
        return "not a JSON object"
    if not _number(body.get("written_at")):
        return "no written_at time"
    tasks, metrics = body.get("tasks", {}), body.get("metrics", {})
    if not isinstance(tasks, dict) or not all(isinstance(t, dict) for t in tasks.values()):
        return "tasks are not objects by name"
    for name, task in tasks.items():
        for key in ("runs", "failures", "consecutive_failures"):
            if not _number(task.get(key, 0)):
                return f"task {name!r}: {key} is not a number"
        for key in ("last_success", "running_since", "deadline_s", "next_run", "every_s"):
            if task.get(key) is not None and not _number(task[key]):
                return f"task {name!r}: {key} is not a number"
    if not isinstance(metrics, dict) or not all(
        isinstance(series, list)
        and all(
            isinstance(point, list | tuple)
            and len(point) == 2
            and isinstance(point[0], dict)
            and _number(point[1])
            for point in series
        )
        for series in metrics.values()
    ):
        return "metrics are not series of (labels, value)"
    return None


def _process_gone(status: dict[str, Any]) -> bool:
    """Whether the status file's service process no longer runs (on this host: the pid is
    checked only where the file was written)."""
    pid, host = status.get("pid"), status.get("host")
    if not isinstance(pid, int) or (host is not None and host != socket.gethostname()):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: it runs
        return False
    return False


def iso(when: float) -> str:
    """A Unix time as `2026-12-04 20:31:02 UTC`."""
    return dt.datetime.fromtimestamp(when, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def stuck_tasks(status: dict[str, Any], now: float) -> dict[str, float]:
    """The tasks of a status file whose step has run past its deadline by `now`: name -> when
    the step started (the file is written when a step starts, so a step that never returns
    shows here however long ago the file was last written)."""
    out = {}
    for name, task in status.get("tasks", {}).items():
        since, deadline = task.get("running_since"), task.get("deadline_s")
        if since is not None and deadline is not None and now - float(since) > float(deadline):
            out[name] = float(since)
    return out


# A task is overdue when its next step is this many cadences late (at least OVERDUE_MIN_S)
# with no step running: the service is frozen (SIGSTOP, a hung interpreter), or cannot write
# its status file (a read-only or full lake). Either way nothing it says is current.
OVERDUE_CADENCES = 3.0
OVERDUE_MIN_S = 60.0


def overdue_tasks(status: dict[str, Any], now: float) -> dict[str, float]:
    """The tasks of a status file whose next step is overdue by `now` (no step running):
    name -> when it was due. A file without cadences (an older version's) uses the tasks'
    step deadlines."""
    out = {}
    for name, task in status.get("tasks", {}).items():
        due, every = task.get("next_run"), task.get("every_s")
        if due is None or task.get("running_since") is not None:
            continue
        grace = (
            max(OVERDUE_CADENCES * float(every), OVERDUE_MIN_S)
            if every is not None
            else task.get("deadline_s")
        )
        if grace is not None and now - float(due) > float(grace):
            out[name] = float(due)
    return out


def _ago(then: float | None, now: float) -> str:
    if then is None:
        return "never"
    seconds = max(0, int(now - then))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _metric(status: dict[str, Any], name: str) -> list[tuple[dict[str, str], float]]:
    return [(labels, value) for labels, value in status.get("metrics", {}).get(name, [])]


def render_status(status: dict[str, Any] | None, now: float) -> tuple[str, bool]:
    """A human summary of the status file, and whether everything looks healthy."""
    if status is None:
        return "gpuledger run has never run on this lake (no _state/service.json).", False
    written = float(status["written_at"])
    claimed = any(v for _, v in _metric(status, "gpuledger_up"))
    # a service killed (SIGKILL, a crash, the machine) never wrote that it stopped
    gone = claimed and _process_gone(status)
    running = claimed and not gone
    stamp = iso(written)
    state = "running" if running else "stopped"
    if gone:
        state = "DOWN: its process is gone without stopping (killed?)"
    lines = [
        f"service: {state} (pid {status.get('pid')}), last update {stamp} ({_ago(written, now)})",
        "",
        f"{'task':<22} {'runs':>6} {'failed':>7}  {'last success':<14} last error",
    ]
    healthy = True
    stuck = stuck_tasks(status, now) if running else {}
    overdue = overdue_tasks(status, now) if running else {}
    for name, task in sorted(status.get("tasks", {}).items()):
        failing = task.get("consecutive_failures", 0) > 0
        healthy &= not failing and name not in stuck and name not in overdue
        error = task.get("last_error") or ""
        if error and not failing:
            error = f"(recovered) {error}"
        if name in overdue:
            error = (
                f"OVERDUE: due {_ago(overdue[name], now)}, not run (frozen, or the status "
                "file cannot be written)"
            )
        if name in stuck:
            error = (
                f"STUCK: one step running since {iso(stuck[name])} ({_ago(stuck[name], now)}), "
                f"past its deadline of {float(task['deadline_s']):.0f} s"
            )
        lines.append(
            f"{name:<22} {task.get('runs', 0):>6} {task.get('failures', 0):>7}  "
            f"{_ago(task.get('last_success'), now):<14} {error[:100]}"
        )
    counters = [
        ("samples landed", "gpuledger_samples_landed_total"),
        ("jobs landed", "gpuledger_jobs_landed_total"),
        ("malformed lines skipped", "gpuledger_malformed_lines_total"),
        ("source errors", "gpuledger_source_errors_total"),
        ("findings written", "gpuledger_findings_total"),
        ("raw sample days pruned", "gpuledger_raw_days_pruned_total"),
        ("alerts sent", "gpuledger_alerts_sent_total"),
        ("alerts failed", "gpuledger_alerts_failed_total"),
    ]
    lines.append("")
    for label, name in counters:
        total = sum(v for _, v in _metric(status, name))
        lines.append(f"{label:<24} {int(total):>12,}")
    for labels, lag in _metric(status, "gpuledger_lag_seconds"):
        lines.append(f"lag behind live, {labels.get('cluster', '?'):<8} {lag:>10,.0f} s")
    for _, current in _metric(status, "gpuledger_marts_current_timestamp_seconds"):
        lines.append(f"{'marts current as of':<24} {_ago(current, now):>12}")
    if not running and now - written > 0:
        healthy = False
    if gone:
        healthy = False
    return "\n".join(lines), healthy
