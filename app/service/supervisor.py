"""The supervised loop behind `gpuledger run`: every task on its own cadence, in its own thread.

A task is one step of the pipeline (a source's collection, or attribute → detect → alert). A task
that raises is logged, counted and retried with exponential backoff; the others go on. `stop`
(set on SIGTERM/SIGINT) ends every task after the step it is in: steps land data through the
warehouse's atomic writes and transactional checkpoints, so stopping between steps leaves nothing
half-written, and the next start resumes from the checkpoints.

Every step has a deadline, `deadline_intervals` times its task's cadence. A step still running
past it is asked to stop (its context's stop event is set, which the sources and the pipeline
honour between windows and steps), its stack is logged, and the task counts as stuck: the
service is unhealthy (`healthy()`, `stuck()`, /healthz, `gpuledger status`) until it returns.
A thread cannot be killed: a step that never returns is for the liveness probe to end, by
restarting the service.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from app.service.metrics import Metrics
from warehouse.writer_lock import wait_limit

__all__ = ["Supervisor", "Task", "TaskContext", "TaskState"]

log = logging.getLogger("gpuledger.service")


class StepStopped(Exception):
    """A step that returned after it was asked to stop at its deadline: its work is partial."""


@dataclass(frozen=True, slots=True)
class TaskContext:
    """What a step is handed: the metrics to count into and the stop event to honour."""

    metrics: Metrics
    stop: threading.Event

    @contextmanager
    def linked_stop(self) -> Iterator[threading.Event]:
        """A private stop event for a library call that may set it itself (to end its own
        workers after a failure), set when the service stops; the service's event stays
        untouched by the call."""
        private = threading.Event()
        done = threading.Event()

        def relay() -> None:
            while not done.is_set():
                if self.stop.wait(0.2):
                    private.set()
                    return

        thread = threading.Thread(target=relay, name="gpuledger-stop-relay", daemon=True)
        thread.start()
        try:
            yield private
        finally:
            done.set()
            thread.join()


@dataclass(frozen=True, slots=True)
class Task:
    """One named step run every `every_s` seconds. `source` tasks count into source_errors."""

    name: str
    every_s: float
    step: Callable[[TaskContext], None]
    source: bool = True


@dataclass(slots=True)
class TaskState:
    """What the status file says about a task."""

    runs: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    last_success: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    next_run: float | None = None
    running_since: float | None = None  # when the step now running started; None: between
    deadline_s: float | None = None  # how long a step of it may run
    every_s: float | None = None  # its cadence: a step is due that long after the last


@dataclass
class Supervisor:
    """Run `tasks` until `stop` is set. `clock` and `wait` are seams for tests."""

    tasks: list[Task]
    metrics: Metrics
    stop: threading.Event = field(default_factory=threading.Event)
    clock: Callable[[], float] = time.time
    max_backoff_s: float = 300.0
    deadline_intervals: float = 30.0
    on_change: Callable[[dict[str, TaskState]], None] | None = None
    states: dict[str, TaskState] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _report_lock: threading.Lock = field(default_factory=threading.Lock)
    _status_error: str | None = None  # why the status file could not be written last
    # the running steps: task name -> (its stop event, its thread's id)
    _running: dict[str, tuple[threading.Event, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [t.name for t in self.tasks]
        if len(set(names)) != len(names):
            raise ValueError(f"task names must be unique: {names}")
        if self.deadline_intervals <= 0:
            raise ValueError(f"deadline_intervals must be above 0, got {self.deadline_intervals}")
        self.states = {
            t.name: TaskState(deadline_s=self.deadline_of(t), every_s=t.every_s) for t in self.tasks
        }

    def deadline_of(self, task: Task) -> float:
        """Seconds a step of `task` may run: `deadline_intervals` times its cadence."""
        return task.every_s * self.deadline_intervals

    def run_once(self, task: Task) -> bool:
        """Run one step of `task`, record its outcome; True when it succeeded."""
        # the step's own stop event: set when the service stops (by `run`) or at its deadline
        return self._run_step(task, TaskContext(self.metrics, threading.Event()))

    def _run_step(self, task: Task, ctx: TaskContext) -> bool:
        started = self.clock()
        with self._lock:
            self.states[task.name].running_since = started
            self._running[task.name] = (ctx.stop, threading.get_ident())
            if self.stop.is_set():
                ctx.stop.set()
        self._changed()  # the status file says it runs, and since when, should it never return
        try:
            # waiting for the lake's writer lock (a `gpuledger attribute` beside the service)
            # fails the round, naming the holder, well before the step would count as stuck
            with wait_limit(self.deadline_of(task) / 2):
                task.step(ctx)
            if ctx.stop.is_set() and not self.stop.is_set():
                # asked to stop at its deadline, it gave up part of its work: no success (a
                # Prometheus that never answered showed as a source pulled 0 s ago)
                raise StepStopped(
                    f"stopped at its deadline ({self.deadline_of(task):.0f} s) before it finished"
                )
        except Exception as exc:  # a failing source must not stop the others
            message = f"{type(exc).__name__}: {exc}"
            log.warning("task %s failed: %s", task.name, message)
            with self._lock:
                state = self.states[task.name]
                state.runs += 1
                state.failures += 1
                state.consecutive_failures += 1
                state.last_error, state.last_error_at = message, self.clock()
            self.metrics.inc("gpuledger_task_runs_total", task=task.name, outcome="error")
            if task.source:
                self.metrics.inc("gpuledger_source_errors_total", source=task.name)
            ok = False
        else:
            if ctx.stop.is_set():  # the service stops: the step was cut short, neither way
                ok = False
            else:
                with self._lock:
                    state = self.states[task.name]
                    state.runs += 1
                    state.consecutive_failures = 0
                    state.last_success = self.clock()
                self.metrics.inc("gpuledger_task_runs_total", task=task.name, outcome="ok")
                self.metrics.set(
                    "gpuledger_task_last_success_timestamp_seconds", self.clock(), task=task.name
                )
                ok = True
        finally:
            with self._lock:
                self.states[task.name].running_since = None
                self._running.pop(task.name, None)
            self.metrics.set("gpuledger_task_stuck", 0, task=task.name)
        self.metrics.set("gpuledger_task_duration_seconds", self.clock() - started, task=task.name)
        self.metrics.set(
            "gpuledger_task_consecutive_failures",
            self.states[task.name].consecutive_failures,
            task=task.name,
        )
        return ok

    def delay_after(self, task: Task) -> float:
        """Seconds to the next step: the cadence, doubled per consecutive failure (capped)."""
        failures = self.states[task.name].consecutive_failures
        if failures == 0:
            return task.every_s
        return float(min(self.max_backoff_s, task.every_s * 2 ** min(failures, 16)))

    def _loop(self, task: Task) -> None:
        while not self.stop.is_set():
            self.run_once(task)
            delay = self.delay_after(task)
            with self._lock:
                self.states[task.name].next_run = self.clock() + delay
            self._changed()
            self.stop.wait(delay)

    def _changed(self) -> None:
        if self.on_change is None:
            return
        with self._report_lock:  # one report at a time, each from a consistent snapshot
            with self._lock:
                snapshot = {name: replace(s) for name, s in self.states.items()}
            try:
                self.on_change(snapshot)
            except Exception as exc:  # the status file is best effort; never kill a task over it
                # one line for each new reason (a read-only lake logged a traceback at every
                # step); `gpuledger status --check` sees the file go stale
                # (an OSError's message names the attempt's temporary file: its errno is the
                # reason, the same at every step of a read-only or full lake)
                reason = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, OSError) and exc.errno is not None:
                    reason = f"{type(exc).__name__}: {exc.strerror}"
                if reason != self._status_error:
                    log.error("could not record the service status: %s", exc)
                self._status_error = reason
            else:
                self._status_error = None

    def run(self, join_timeout_s: float = 600.0) -> None:
        """Start every task's thread and block until `stop` is set and each finished its step."""
        self.metrics.set("gpuledger_up", 1)
        threads = [
            threading.Thread(target=self._loop, args=(t,), name=f"gpuledger-{t.name}", daemon=True)
            for t in self.tasks
        ]
        for thread in threads:
            thread.start()
        try:
            while not self.stop.wait(0.5):
                self.watch()
        finally:
            self.stop.set()
            with self._lock:
                for step_stop, _ in self._running.values():
                    step_stop.set()
            deadline = time.monotonic() + join_timeout_s
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            self.metrics.set("gpuledger_up", 0)
            self._changed()

    def stuck(self) -> dict[str, float]:
        """The tasks whose running step is past its deadline: name -> when that step started."""
        now = self.clock()
        with self._lock:
            return {
                name: s.running_since
                for name, s in self.states.items()
                if s.running_since is not None
                and s.deadline_s is not None
                and now - s.running_since > s.deadline_s
            }

    def watch(self) -> None:
        """Ask each step past its deadline to stop, and log what it is doing (once a step);
        `run` calls this twice a second."""
        stuck = self.stuck()
        newly = []
        for name, since in stuck.items():
            with self._lock:
                running = self._running.get(name)
            if running is None or running[0].is_set():
                continue  # returned meanwhile, or already told
            running[0].set()
            newly.append(name)
            frame = sys._current_frames().get(running[1])
            where = "".join(traceback.format_stack(frame)) if frame else "(no stack)"
            log.error(
                "task %s stuck: its step has run %.0f s, past its deadline of %.0f s; asked to "
                "stop, the service reports unhealthy until it returns. It is at:\n%s",
                name,
                self.clock() - since,
                self.states[name].deadline_s or 0.0,
                where,
            )
            self.metrics.set("gpuledger_task_stuck", 1, task=name)
        if newly:
            self._changed()

    def healthy(self, max_failures: int = 3) -> bool:
        """False when any task failed `max_failures` times in a row, or is stuck (`stuck`)."""
        if self.stuck():
            return False
        with self._lock:
            return all(s.consecutive_failures < max_failures for s in self.states.values())
