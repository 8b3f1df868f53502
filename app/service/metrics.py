"""gpuledger's own metrics, in Prometheus' text exposition format (no client library needed).

Every metric the service exposes is declared in `METRICS` with its type and help text, so the
`/metrics` page documents itself and a typo in a metric name fails loudly instead of creating a
new series.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping

__all__ = ["METRICS", "Metrics", "escape_label", "sample_value"]

# name → (type, help)
METRICS: dict[str, tuple[str, str]] = {
    "gpuledger_task_runs_total": ("counter", "Task runs by outcome (ok, error)."),
    "gpuledger_task_last_success_timestamp_seconds": (
        "gauge",
        "Unix time of the task's last successful run.",
    ),
    "gpuledger_task_duration_seconds": ("gauge", "Duration of the task's last run."),
    "gpuledger_task_consecutive_failures": ("gauge", "Failed runs in a row (0 when healthy)."),
    "gpuledger_task_stuck": (
        "gauge",
        "1 while the task's step runs past its deadline (service.step_deadline_intervals).",
    ),
    "gpuledger_source_errors_total": ("counter", "Errors raised by a source, by source."),
    "gpuledger_samples_landed_total": ("counter", "GPU sample rows landed in the lake."),
    "gpuledger_jobs_landed_total": ("counter", "Job versions landed in the lake."),
    "gpuledger_malformed_lines_total": (
        "counter",
        "Input lines or records skipped as malformed, by source.",
    ),
    "gpuledger_lag_seconds": (
        "gauge",
        "How far the newest landed GPU sample is behind now, by cluster.",
    ),
    "gpuledger_marts_current_timestamp_seconds": (
        "gauge",
        "Unix time up to which the marts reflect everything landed (freshness: time() - this).",
    ),
    "gpuledger_findings_total": ("counter", "Findings written by detect."),
    "gpuledger_raw_days_pruned_total": (
        "counter",
        "Days whose raw GPU samples were deleted by retention (retention.raw_days).",
    ),
    "gpuledger_alerts_sent_total": ("counter", "Alert messages delivered."),
    "gpuledger_alerts_failed_total": ("counter", "Alert deliveries that failed for now."),
    "gpuledger_up": ("gauge", "1 while the service loop runs."),
}

Labels = tuple[tuple[str, str], ...]


def escape_label(value: str) -> str:
    """A label value as the text exposition format quotes it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def sample_value(value: float) -> str:
    """A sample's value as the text exposition format writes it (NaN, +Inf, -Inf)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if value != int(value) else str(int(value))


class Metrics:
    """A thread-safe registry of the counters and gauges in `METRICS`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[Labels, float]] = {}

    @staticmethod
    def _key(name: str, labels: Mapping[str, str]) -> Labels:
        if name not in METRICS:
            raise KeyError(f"undeclared metric {name!r}")
        return tuple(sorted((k, str(v)) for k, v in labels.items()))

    def inc(self, name: str, value: float = 1.0, **labels: str) -> None:
        """Add `value` (≥ 0) to a counter."""
        key = self._key(name, labels)
        if METRICS[name][0] != "counter" or value < 0:
            raise ValueError(f"{name!r} is not a counter, or {value!r} < 0")
        with self._lock:
            series = self._values.setdefault(name, {})
            series[key] = series.get(key, 0.0) + value

    def set(self, name: str, value: float, **labels: str) -> None:
        """Set a gauge."""
        key = self._key(name, labels)
        if METRICS[name][0] != "gauge":
            raise ValueError(f"{name!r} is not a gauge")
        with self._lock:
            self._values.setdefault(name, {})[key] = float(value)

    def get(self, name: str, **labels: str) -> float:
        """The current value (0 when the series was never touched)."""
        key = self._key(name, labels)
        with self._lock:
            return self._values.get(name, {}).get(key, 0.0)

    def snapshot(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """Every series: {name: [(labels, value), ...]} (for the status file)."""
        with self._lock:
            return {
                name: [(dict(labels), value) for labels, value in sorted(series.items())]
                for name, series in sorted(self._values.items())
            }

    def render(self) -> str:
        """The exposition text served at /metrics."""
        lines: list[str] = []
        for name, series in self.snapshot().items():
            kind, help_text = METRICS[name]
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            for labels, value in series:
                inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
                lines.append(
                    f"{name}{{{inner}}} {sample_value(value)}"
                    if inner
                    else f"{name} {sample_value(value)}"
                )
        return "\n".join(lines) + "\n"
