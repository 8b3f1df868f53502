"""The lake's figures in Prometheus' text exposition format (version 0.0.4).

Every metric is declared in `METRICS` (type, labels, help), so the page documents itself, the
docs list is checked against it, and a series with an undeclared name or label set fails loudly.
Cardinality is bounded: label values come from clusters, accounts, partitions, detectors,
severities, recommendation kinds and sources, and per-job series only from running jobs, at
most `max_job_series` per cluster (`gpuledger_running_jobs_not_exported` counts the rest).
GPU time is in GPU-seconds, Prometheus' base unit (`promtool check metrics` refuses hours):
divide by 3600 for GPU-hours, as the shipped dashboards do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.serve.figures import Figures
from app.serve.settings import ServeSettings
from app.service.metrics import escape_label, sample_value

__all__ = ["METRICS", "Metric", "render_metrics"]

UNKNOWN = "unknown"  # the label value of an account, partition or user the lake does not know
USAGE = ("cluster", "account", "partition", "window")
JOB = ("cluster", "job_id", "user", "account", "partition")


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric family: its type, its label names (in order) and its help line."""

    kind: str
    labels: tuple[str, ...]
    help: str


METRICS: dict[str, Metric] = {
    # per cluster, account and partition, over the last day and week of the data
    "gpuledger_allocated_gpu_seconds": Metric(
        "gauge", USAGE, "GPU time held by jobs over the window ending at the end of the data."
    ),
    "gpuledger_observed_gpu_seconds": Metric(
        "gauge", USAGE, "Allocated GPU time covered by samples over the window."
    ),
    "gpuledger_idle_gpu_seconds": Metric(
        "gauge", USAGE, "Allocated GPU time observed idle (busy < idle threshold) over the window."
    ),
    "gpuledger_effective_gpu_seconds": Metric(
        "gauge", USAGE, "Busy-weighted GPU time (sum of busy x interval) over the window."
    ),
    # occupancy now
    "gpuledger_cluster_gpus": Metric(
        "gauge",
        ("cluster", "state"),
        "GPUs by state over the last complete bucket of the data (active, idle: allocated "
        "but idle, unallocated, unobserved); the states add up to the total.",
    ),
    "gpuledger_fleet_gpus": Metric(
        "gauge", ("cluster",), "GPUs in the cluster (inventory, or the devices seen if more)."
    ),
    "gpuledger_running_jobs": Metric(
        "gauge", ("cluster", "account", "partition"), "Jobs running at the end of the data."
    ),
    "gpuledger_allocated_gpus": Metric(
        "gauge",
        ("cluster", "account", "partition"),
        "GPUs held by the jobs running at the end of the data.",
    ),
    # per running job (capped)
    "gpuledger_job_gpus": Metric(
        "gauge",
        (*JOB, "state"),
        "A running job's GPUs by state over the last complete bucket: busy (active more than "
        "idle), idle, unobserved; they add up to its GPUs.",
    ),
    "gpuledger_job_allocated_gpu_seconds": Metric(
        "gauge", JOB, "GPU time a running job has held so far."
    ),
    "gpuledger_job_idle_gpu_seconds": Metric(
        "gauge", JOB, "GPU time a running job has held idle so far."
    ),
    "gpuledger_job_effective_gpu_seconds": Metric(
        "gauge", JOB, "Busy-weighted GPU time of a running job so far."
    ),
    "gpuledger_job_at_stake_gpu_seconds": Metric(
        "gauge", JOB, "GPU time at stake in the running job's open findings (0: none)."
    ),
    "gpuledger_job_running_seconds": Metric(
        "gauge", JOB, "How long a running job has run, up to the end of the data."
    ),
    "gpuledger_job_gpu_info": Metric(
        "gauge",
        ("cluster", "job_id", "node", "gpu"),
        "1 for each GPU (node, index as dcgm-exporter's `gpu` label) a running job holds: "
        "join DCGM_FI_* series on Hostname and gpu.",
    ),
    "gpuledger_running_jobs_not_exported": Metric(
        "gauge",
        ("cluster",),
        "Running jobs left out of the per-job series by serve.max_job_series.",
    ),
    # findings and recommendations
    "gpuledger_findings_open": Metric(
        "gauge", ("cluster", "detector", "severity"), "Open findings (span not ended)."
    ),
    "gpuledger_findings_open_at_stake_gpu_seconds": Metric(
        "gauge", ("cluster", "detector", "severity"), "GPU time at stake in the open findings."
    ),
    "gpuledger_recommendations": Metric(
        "gauge", ("cluster", "kind"), "Current recommendations (newest version of each)."
    ),
    "gpuledger_recommendations_expected_gain_gpu_seconds": Metric(
        "gauge", ("cluster", "kind"), "GPU time the current recommendations expect to save."
    ),
    # freshness
    "gpuledger_data_end_timestamp_seconds": Metric(
        "gauge", ("cluster",), "Unix time of the end of the cluster's data (the figures' now)."
    ),
    "gpuledger_source_newest_timestamp_seconds": Metric(
        "gauge",
        ("cluster", "kind", "source"),
        "Unix time of the newest row a source landed (kind: gpu_samples or jobs).",
    ),
    "gpuledger_source_behind_seconds": Metric(
        "gauge",
        ("cluster", "kind", "source"),
        "How far a source's newest row is behind the end of the cluster's data.",
    ),
    # the server itself
    "gpuledger_serve_computed_timestamp_seconds": Metric(
        "gauge", (), "Unix time (wall clock) the figures were last read from the lake."
    ),
    "gpuledger_serve_compute_duration_seconds": Metric(
        "gauge", (), "How long the last reading of the figures took."
    ),
    "gpuledger_serve_refresh_failed": Metric(
        "gauge", (), "1 when the last reading of the lake failed (the figures are older)."
    ),
}

Sample = tuple[tuple[str, ...], float]


def _label(value: Any) -> str:
    return UNKNOWN if value is None or value == "" else str(value)


def _rows(frame: Any) -> Iterable[dict[str, Any]]:
    return frame.iter_rows(named=True)  # type: ignore[no-any-return]


def _summed(samples: list[Sample]) -> list[Sample]:
    """`samples` of an additive family with the values of equal label sets added, in the order
    first seen: rows the SQL keeps apart (an account null, empty or named `unknown`) share
    the label `_label` gives them, and Prometheus keeps one sample per series and scrape."""
    totals: dict[tuple[str, ...], float] = {}
    for labels, value in samples:
        totals[labels] = totals.get(labels, 0.0) + value
    return list(totals.items())


def _family(name: str, samples: Iterable[Sample]) -> list[str]:
    metric = METRICS[name]
    lines = [f"# HELP {name} {metric.help}", f"# TYPE {name} {metric.kind}"]
    for values, value in samples:
        if len(values) != len(metric.labels):
            raise ValueError(f"{name}: labels {metric.labels!r}, got values {values!r}")
        inner = ",".join(
            f'{key}="{escape_label(v)}"' for key, v in zip(metric.labels, values, strict=True)
        )
        lines.append(
            f"{name}{{{inner}}} {sample_value(value)}" if inner else f"{name} {sample_value(value)}"
        )
    return lines


def _usage(figures: Figures, settings: ServeSettings) -> dict[str, list[Sample]]:
    window_label = {seconds: label for label, seconds in settings.windows_s}
    out: dict[str, list[Sample]] = {}
    columns = {
        "gpuledger_allocated_gpu_seconds": "allocated_gpu_h",
        "gpuledger_observed_gpu_seconds": "observed_gpu_h",
        "gpuledger_idle_gpu_seconds": "idle_gpu_h",
        "gpuledger_effective_gpu_seconds": "effective_gpu_h",
    }
    for row in _rows(figures.usage):
        labels = (
            row["cluster"],
            _label(row["account"]),
            _label(row["partition"]),
            window_label.get(row["window_s"], f"{row['window_s']}s"),
        )
        for name, column in columns.items():
            out.setdefault(name, []).append((labels, float(row[column]) * 3600.0))
    return {name: _summed(samples) for name, samples in out.items()}


def _occupancy(figures: Figures) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {}
    states = {
        "active": "gpus_active",
        "idle": "gpus_idle_allocated",
        "unallocated": "gpus_unallocated",
        "unobserved": "gpus_unobserved",
    }
    for row in _rows(figures.occupancy):
        for state, column in states.items():
            out.setdefault("gpuledger_cluster_gpus", []).append(
                ((row["cluster"], state), float(row[column] or 0.0))
            )
        out.setdefault("gpuledger_fleet_gpus", []).append(
            ((row["cluster"],), float(row["gpus_total"] or 0.0))
        )
    for row in _rows(figures.running):
        labels = (row["cluster"], _label(row["account"]), _label(row["partition"]))
        out.setdefault("gpuledger_running_jobs", []).append((labels, float(row["running_jobs"])))
        out.setdefault("gpuledger_allocated_gpus", []).append(
            (labels, float(row["allocated_gpus"]))
        )
    for name in ("gpuledger_running_jobs", "gpuledger_allocated_gpus"):
        if name in out:
            out[name] = _summed(out[name])
    return out


def _jobs(figures: Figures) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {}
    exported: dict[str, int] = {}
    running: dict[str, int] = {}
    for row in _rows(figures.running):  # every running job, before the cap
        running[row["cluster"]] = running.get(row["cluster"], 0) + int(row["running_jobs"])
    seconds = {
        "gpuledger_job_allocated_gpu_seconds": "allocated_gpu_h",
        "gpuledger_job_idle_gpu_seconds": "idle_gpu_h",
        "gpuledger_job_effective_gpu_seconds": "effective_gpu_h",
        "gpuledger_job_at_stake_gpu_seconds": "gpu_h_at_stake",
    }
    for row in _rows(figures.jobs):
        cluster = row["cluster"]
        exported[cluster] = exported.get(cluster, 0) + 1
        labels = (
            cluster,
            row["job_id"],
            _label(row["user"]),
            _label(row["account"]),
            _label(row["partition"]),
        )
        busy, idle, gpus = int(row["gpus_busy"]), int(row["gpus_idle"]), int(row["gpus"])
        for state, value in (("busy", busy), ("idle", idle), ("unobserved", gpus - busy - idle)):
            out.setdefault("gpuledger_job_gpus", []).append(((*labels, state), float(value)))
        for name, column in seconds.items():
            out.setdefault(name, []).append((labels, float(row[column]) * 3600.0))
        out.setdefault("gpuledger_job_running_seconds", []).append(
            (labels, max(float(row["running_s"]), 0.0))
        )
        for slot in row["gpu_slots"]:
            out.setdefault("gpuledger_job_gpu_info", []).append(
                ((cluster, row["job_id"], slot["node"], str(slot["gpu_index"])), 1.0)
            )
    clusters = {row["cluster"] for row in _rows(figures.occupancy)} | set(running)
    out["gpuledger_running_jobs_not_exported"] = [
        ((cluster,), float(running.get(cluster, 0) - exported.get(cluster, 0)))
        for cluster in sorted(clusters)
    ]
    return out


def _findings(figures: Figures) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {}
    for row in _rows(figures.findings):
        labels = (row["cluster"], row["detector"], row["severity"])
        out.setdefault("gpuledger_findings_open", []).append((labels, float(row["findings"])))
        out.setdefault("gpuledger_findings_open_at_stake_gpu_seconds", []).append(
            (labels, float(row["gpu_h_at_stake"]) * 3600.0)
        )
    for row in _rows(figures.recommendations):
        kind = (row["cluster"], row["kind"])
        out.setdefault("gpuledger_recommendations", []).append(
            (kind, float(row["recommendations"]))
        )
        out.setdefault("gpuledger_recommendations_expected_gain_gpu_seconds", []).append(
            (kind, float(row["expected_gain_gpu_h"]) * 3600.0)
        )
    return out


def _freshness(figures: Figures) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {}
    ends: dict[str, float] = {}
    for row in _rows(figures.freshness):
        labels = (row["cluster"], row["kind"], row["source"])
        out.setdefault("gpuledger_source_newest_timestamp_seconds", []).append(
            (labels, row["newest_ts"].timestamp())
        )
        out.setdefault("gpuledger_source_behind_seconds", []).append(
            (labels, float(row["behind_s"] or 0.0))
        )
        if row["data_end"] is not None:
            ends[row["cluster"]] = row["data_end"].timestamp()
    out["gpuledger_data_end_timestamp_seconds"] = [
        ((cluster,), end) for cluster, end in sorted(ends.items())
    ]
    return out


def render_metrics(
    figures: Figures | None,
    settings: ServeSettings,
    *,
    server: Mapping[str, float] | None = None,
) -> str:
    """The exposition text: every declared family (HELP and TYPE even with no series), its
    series sorted. `figures` None (nothing read yet): only the server's own gauges. `server`:
    values of the gpuledger_serve_* gauges by name."""
    samples: dict[str, list[Sample]] = {}
    if figures is not None:
        for part in (
            _usage(figures, settings),
            _occupancy(figures),
            _jobs(figures),
            _findings(figures),
            _freshness(figures),
        ):
            samples.update(part)
    for name, value in (server or {}).items():
        samples[name] = [((), float(value))]
    lines: list[str] = []
    for name in METRICS:
        lines += _family(name, sorted(samples.get(name, [])))
    return "\n".join(lines) + "\n"
