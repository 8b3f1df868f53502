"""Application throughput counters a training loop reports: samples, tokens and steps per job.

    from collector import throughput
    throughput.serve(9464)                      # optional: Prometheus text on 127.0.0.1:9464
    for batch in loader:
        ...
        throughput.report(samples=len(batch), tokens=batch.numel(), steps=1, params=n_params)

`params` (optional) is the trained model's parameter count, a gauge rather than a counter: with
it, `job_usage` gives the job's model FLOPs utilisation (MFU, 6 × params × tokens/s ÷ the GPUs'
peak). Callbacks for PyTorch Lightning, Hugging Face `Trainer` and a plain PyTorch loop that
call `report` for you are in `collector.throughput_callbacks`.

Counters are kept per job id and exposed two ways: (a) `serve(port)` starts a tiny HTTP endpoint
on 127.0.0.1 answering `/metrics` with `gpuledger_app_{samples,tokens,steps}_total{job_id=…}`
(and the gauge `gpuledger_app_model_params`) in Prometheus text format; (b) when a spool folder
is known, every `flush_every_s` seconds (and at exit) the current totals are written as one JSON
line per job into `<spool>/app_throughput/`, which the node agent (`gpuledger collect nvml`) lands
in the lake table `app_throughput`.

Each flush is a new file named `u<uid>-<node>.<reporter>.<ts>.<seq>.<random>.jsonl`: the
writer's uid (the agent refuses a file whose owner is not the uid it claims) and 128 random
bits, so nobody can guess another user's batch name to replace their rows. The agent lands
rows of a file owned by an ordinary user only for that user's own jobs (the lake's `jobs`).

Standard library only, so it can be imported by any training script without pulling in pyarrow,
torch or tensorflow. `report()` never raises for I/O trouble: a failed flush is logged and kept
for the next one. This module is an application-side edge: it reads the environment
(SLURM_JOB_ID, SLURM_ARRAY_JOB_ID/SLURM_ARRAY_TASK_ID, POD_NAMESPACE/POD_NAME, GPULEDGER_SPOOL).
"""

from __future__ import annotations

import atexit
import http.server
import json
import logging
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = [
    "DEFAULT_SPOOL",
    "claimed_uid",
    "INBOX",
    "RECORD_FIELDS",
    "MetricsServer",
    "ThroughputReporter",
    "default_reporter",
    "flush",
    "job_id_from_environment",
    "render_prometheus",
    "report",
    "serve",
]

logger = logging.getLogger(__name__)

INBOX: Final = "app_throughput"  # the spool sub-folder, and the lake table it lands in
DEFAULT_SPOOL: Final = Path("/var/spool/gpuledger")
DEFAULT_FLUSH_EVERY_S: Final = 30.0
SOURCE: Final = "app"
COUNTERS: Final = ("samples", "tokens", "steps")
RECORD_FIELDS: Final = (
    "job_id",
    "ts_ms",
    "node",
    "reporter",
    "samples_total",
    "tokens_total",
    "steps_total",
    "source",
    "model_params",
)
_HELP: Final = {
    "samples": "Samples (examples) processed, as reported by the application.",
    "tokens": "Tokens processed, as reported by the application.",
    "steps": "Optimizer steps taken, as reported by the application.",
}
PARAMS_METRIC: Final = "gpuledger_app_model_params"
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_CLAIM: Final = re.compile(r"u(\d{1,10})-")
UNKNOWN_JOB: Final = "unknown"


def claimed_uid(file_name: str) -> int | None:
    """The writer's uid a spool file's name claims (`u1000-…`), or None for a name without."""
    found = _CLAIM.match(file_name)
    return int(found.group(1)) if found else None


def job_id_from_environment(env: Mapping[str, str] | None = None) -> str | None:
    """The job this process belongs to, from the scheduler's environment variables.

    Slurm array task → `<SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID>` (the lake's id for array
    tasks); other Slurm jobs → SLURM_JOB_ID; Kubernetes → `<POD_NAMESPACE>/<POD_NAME>` (the id
    the exporter-label mapping uses), POD_NAME alone, or HOSTNAME (a pod's default host name).
    """
    env = os.environ if env is None else env
    array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    if env.get("SLURM_JOB_ID"):
        return env["SLURM_JOB_ID"]
    pod = env.get("POD_NAME") or (
        env.get("HOSTNAME") if env.get("KUBERNETES_SERVICE_HOST") else None
    )
    if pod:
        namespace = env.get("POD_NAMESPACE")
        return f"{namespace}/{pod}" if namespace else pod
    return None


def _spool_from_environment(env: Mapping[str, str]) -> Path | None:
    """GPULEDGER_SPOOL, else the agent's default spool when its inbox is there and writable."""
    if env.get("GPULEDGER_SPOOL"):
        return Path(env["GPULEDGER_SPOOL"])
    inbox = DEFAULT_SPOOL / INBOX
    return DEFAULT_SPOOL if inbox.is_dir() and os.access(inbox, os.W_OK | os.X_OK) else None


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def render_prometheus(
    totals: Mapping[str, Mapping[str, float]], params: Mapping[str, int] | None = None
) -> str:
    """Prometheus text exposition (format 0.0.4) of `{job_id: {counter: total}}`, and of the
    gauge `{job_id: model parameters}` where given."""
    lines: list[str] = []
    for counter in COUNTERS:
        name = f"gpuledger_app_{counter}_total"
        series = [
            (job, values[counter]) for job, values in sorted(totals.items()) if counter in values
        ]
        if not series:
            continue
        lines += [f"# HELP {name} {_HELP[counter]}", f"# TYPE {name} counter"]
        lines += [f'{name}{{job_id="{_escape_label(job)}"}} {_number(v)}' for job, v in series]
    if params:
        lines += [
            f"# HELP {PARAMS_METRIC} Parameters of the model trained, as reported by the "
            "application.",
            f"# TYPE {PARAMS_METRIC} gauge",
        ]
        lines += [
            f'{PARAMS_METRIC}{{job_id="{_escape_label(job)}"}} {n}'
            for job, n in sorted(params.items())
        ]
    return "\n".join(lines) + "\n" if lines else ""


@dataclass(slots=True)
class MetricsServer:
    """A running `/metrics` endpoint; `close()` stops it."""

    server: http.server.ThreadingHTTPServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class ThroughputReporter:
    """Counters per job id, with an optional Prometheus endpoint and spool (see module doc).

    Args:
        job_id: the default job id of `report()` (None: "unknown").
        spool: the node agent's spool folder; None: counters and endpoint only.
        clock: seconds since the epoch (injected in tests).
    """

    def __init__(
        self,
        job_id: str | None = None,
        *,
        spool: Path | None = None,
        node: str | None = None,
        reporter: str | None = None,
        flush_every_s: float = DEFAULT_FLUSH_EVERY_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.job_id = job_id
        self.spool = spool
        self.node = node or socket.gethostname().split(".")[0]
        self.reporter = reporter or str(os.getpid())
        self.flush_every_s = flush_every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._totals: dict[str, dict[str, float]] = {}
        self._params: dict[str, int] = {}
        self._dirty: set[str] = set()
        self._last_flush = clock()
        self._sequence = 0
        self._servers: list[MetricsServer] = []

    def report(
        self,
        samples: float | None = None,
        tokens: float | None = None,
        steps: float | None = None,
        job_id: str | None = None,
        params: int | None = None,
    ) -> None:
        """Add to the counters of `job_id` (default: this reporter's); flush when it is time.

        `params`: the model's parameter count (a gauge: the latest value given is kept).
        """
        job = job_id or self.job_id or UNKNOWN_JOB
        if params is not None and (
            isinstance(params, bool) or not isinstance(params, int) or params <= 0
        ):
            raise ValueError(f"params={params!r}: expected the model's parameter count, an int > 0")
        with self._lock:
            totals = self._totals.setdefault(job, {})
            for counter, value in zip(COUNTERS, (samples, tokens, steps), strict=True):
                if value is None:
                    continue
                if value < 0:
                    raise ValueError(f"{counter}={value!r}: counters only go up")
                totals[counter] = totals.get(counter, 0.0) + float(value)
            if params is not None:
                self._params[job] = params
            self._dirty.add(job)
            due = self.spool is not None and self._clock() - self._last_flush >= self.flush_every_s
        if due:
            self.flush()

    def totals(self) -> dict[str, dict[str, float]]:
        """A copy of the counters: `{job_id: {"samples": …, "tokens": …, "steps": …}}`."""
        with self._lock:
            return {job: dict(values) for job, values in self._totals.items()}

    def params(self) -> dict[str, int]:
        """The model parameter counts reported: `{job_id: params}`."""
        with self._lock:
            return dict(self._params)

    def render(self) -> str:
        """The counters in Prometheus text format."""
        return render_prometheus(self.totals(), self.params())

    def serve(self, port: int = 0, host: str = "127.0.0.1") -> MetricsServer:
        """Serve `/metrics` on `host:port` (0: any free port) from a daemon thread."""
        reporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                    self.send_error(404)
                    return
                body = reporter.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer((host, port), Handler)
        server.daemon_threads = True
        # a stop is noticed within 0.1 s (the default 0.5 s delays the training script's exit)
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="gpuledger-metrics",
            daemon=True,
        )
        thread.start()
        running = MetricsServer(server, thread)
        self._servers.append(running)
        return running

    def flush(self) -> Path | None:
        """Write the totals of every job reported since the last flush to the spool inbox.

        One JSON line per job, in a new file renamed into place (the agent never sees half a
        file). Returns the file, or None when there was nothing to write, no spool, or the
        write failed (logged; the jobs stay due for the next flush).
        """
        if self.spool is None:
            return None
        with self._lock:
            jobs = sorted(self._dirty)
            snapshot = {job: dict(self._totals.get(job, {})) for job in jobs}
            params = {job: self._params.get(job) for job in jobs}
            self._dirty.clear()
            now = self._clock()
            self._last_flush = now
            self._sequence += 1
            sequence = self._sequence
        if not jobs:
            return None
        ts_ms = int(now * 1000)
        lines = [
            json.dumps(
                {
                    "job_id": job,
                    "ts_ms": ts_ms,
                    "node": self.node,
                    "reporter": self.reporter,
                    **{f"{c}_total": snapshot[job].get(c) for c in COUNTERS},
                    "source": SOURCE,
                    "model_params": params[job],
                },
                separators=(",", ":"),
            )
            for job in jobs
        ]
        # whose it is, and a name nobody can guess (a guessed name could replace rows)
        unique = f"{self.node}.{self.reporter}.{ts_ms}.{sequence}.{secrets.token_hex(16)}"
        stem = f"u{os.getuid()}-" + _UNSAFE.sub("_", unique)
        inbox = self.spool / INBOX
        path = inbox / f"{stem}.jsonl"
        tmp = inbox / f".{stem}.tmp"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(tmp, flags, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            logger.warning("gpuledger throughput: cannot write %s: %s", path, exc)
            tmp.unlink(missing_ok=True)
            with self._lock:
                self._dirty.update(jobs)  # due again at the next flush
            return None
        return path

    def close(self) -> None:
        """Flush and stop any endpoint."""
        self.flush()
        for server in self._servers:
            server.close()
        self._servers.clear()


_default: ThroughputReporter | None = None
_default_lock = threading.Lock()


def default_reporter() -> ThroughputReporter:
    """The process-wide reporter, created from the environment on first use (flushed at exit)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ThroughputReporter(
                job_id_from_environment(), spool=_spool_from_environment(os.environ)
            )
            atexit.register(_default.flush)
        return _default


def report(
    samples: float | None = None,
    tokens: float | None = None,
    steps: float | None = None,
    job_id: str | None = None,
    params: int | None = None,
) -> None:
    """Add to this process's counters (see `ThroughputReporter.report`)."""
    default_reporter().report(
        samples=samples, tokens=tokens, steps=steps, job_id=job_id, params=params
    )


def serve(port: int = 0) -> MetricsServer:
    """Serve this process's counters for Prometheus on 127.0.0.1:`port` (0: any free port)."""
    return default_reporter().serve(port)


def flush() -> Path | None:
    """Write this process's counters to the spool now (also done every 30 s and at exit)."""
    return default_reporter().flush()
