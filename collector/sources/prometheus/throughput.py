"""Application throughput counters pulled from Prometheus, pivoted to `app_throughput` rows.

A cluster configures one PromQL series selector per counter (`samples`, `tokens`, `steps`), e.g.
`tokens=gpuledger_app_tokens_total` (what `collector.throughput` exposes) or a training job's
own `train_samples_total{team="nlp"}`, and the label that names the job (`job_id`, `hpc_job`,
`slurm_job_id`, `pod`). Each window's raw samples arrive like the DCGM families' (a range
selector in an instant query, one `SeriesBlock` per counter named after it) and become one row
per (job, reporter, ts): the reporter is the series' `instance` (else a hash of its labels), the
node its `Hostname`/`hostname` label (else the `instance` host). Counters scraped together share
the ts, so they share a row.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa

from collector.errors import ConfigError
from collector.sources.dcgm_exporter.rows import job_of_pod
from collector.sources.prometheus.blocks import SeriesBlock
from warehouse.schema import RAW_TABLES

__all__ = [
    "COUNTERS",
    "DEFAULT_JOB_LABEL",
    "ThroughputRows",
    "parse_throughput_query",
    "pivot_throughput",
    "validate_throughput",
]

APP_THROUGHPUT: Final = RAW_TABLES["app_throughput"].schema
TIMESTAMP: Final = APP_THROUGHPUT.field("ts").type
SOURCE: Final = "prometheus"
COUNTERS: Final = ("samples", "tokens", "steps")
PARAMS: Final = "model_params"  # a gauge: the model's parameter count (gpuledger_app_model_params)
NAMES: Final = (*COUNTERS, PARAMS)
DEFAULT_JOB_LABEL: Final = "job_id"
_LABEL_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HOST_LABELS: Final = ("Hostname", "hostname")


@dataclass(frozen=True, slots=True)
class ThroughputRows:
    """One window's `app_throughput` rows and what was skipped, by reason."""

    table: pa.Table
    counts: Counter[str]


def parse_throughput_query(text: str) -> tuple[str, str]:
    """`NAME=SELECTOR` → (name, selector); raises ConfigError for anything else."""
    name, sep, selector = text.partition("=")
    name, selector = name.strip(), selector.strip()
    if not sep or not selector:
        raise ConfigError(
            f"throughput query {text!r}: expected NAME=SELECTOR, "
            "e.g. tokens=gpuledger_app_tokens_total"
        )
    return name, selector


def validate_throughput(queries: Iterable[tuple[str, str]], job_label: str) -> None:
    """Names among NAMES (the counters and model_params), each once; plain series selectors
    (no range, no braces mismatch)."""
    seen: set[str] = set()
    for name, selector in queries:
        if name not in NAMES:
            raise ConfigError(f"throughput query name {name!r} must be one of {', '.join(NAMES)}")
        if name in seen:
            raise ConfigError(f"throughput query {name!r} given twice")
        seen.add(name)
        if not selector.strip() or "[" in selector or selector.count("{") != selector.count("}"):
            raise ConfigError(
                f"throughput query {name}={selector!r}: give a series selector without a range, "
                'e.g. gpuledger_app_samples_total or train_samples_total{team="nlp"}'
            )
    if not _LABEL_NAME.fullmatch(job_label):
        raise ConfigError(f"throughput job label {job_label!r} is not a Prometheus label name")


def _host(labels: Mapping[str, str]) -> str | None:
    for name in _HOST_LABELS:
        if labels.get(name):
            return labels[name]
    instance = labels.get("instance", "")
    host = instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance
    return host.strip("[]") or None


def _reporter(labels: Mapping[str, str]) -> str:
    if labels.get("instance"):
        return labels["instance"]
    text = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__")
    return "labels-" + hashlib.sha1(text.encode()).hexdigest()[:12]


def _job(labels: Mapping[str, str], job_label: str) -> str | None:
    job = labels.get(job_label) or None
    if job is not None and job_label == "pod":  # the id job_gpus gives a pod
        job = job_of_pod(labels.get("namespace"), job)
    return job


def pivot_throughput(
    blocks: Iterable[SeriesBlock],
    *,
    cluster: str,
    start_ms: int,
    end_ms: int,
    job_label: str = DEFAULT_JOB_LABEL,
) -> ThroughputRows:
    """One row per (job, reporter, ts) with `start_ms <= ts < end_ms`, a column per counter.

    `blocks[i].family` is the counter's name (`samples`, `tokens`, `steps`) or `model_params`
    (the gauge of the model's parameter count). Skipped, by reason (counted in samples that
    would have landed): `no_job_label` (the series lacks `job_label`), `not_finite`/
    `not_a_number` values, `not_a_parameter_count` (a `model_params` value that is not a whole
    number > 0), `duplicate_series` (a second series of one counter for the same job, reporter
    and ts: the first in label order wins).
    """
    counts: Counter[str] = Counter()
    rows: dict[tuple[str, str, int], dict[str, float]] = {}
    nodes: dict[tuple[str, str, int], str | None] = {}
    for block in blocks:
        if block.family not in NAMES:
            raise ValueError(f"block {block.family!r} is not a throughput counter")
        column = PARAMS if block.family == PARAMS else f"{block.family}_total"
        offsets = np.concatenate([[0], np.cumsum(block.lengths)]).astype(np.int64)
        ts_all = np.round(block.ts_s * 1000.0).astype(np.int64)
        for i in sorted(range(len(block.labels)), key=lambda i: sorted(block.labels[i].items())):
            labels = block.labels[i]
            ts = ts_all[offsets[i] : offsets[i + 1]]
            inside = np.flatnonzero((ts >= start_ms) & (ts < end_ms)) + offsets[i]
            if inside.size == 0:
                continue
            job = _job(labels, job_label)
            if job is None:
                counts["no_job_label"] += int(inside.size)
                continue
            reporter, node = _reporter(labels), _host(labels)
            texts = block.values.take(pa.array(inside)).to_pylist()
            for k, text in zip(inside.tolist(), texts, strict=True):
                try:
                    value = float(text)
                except ValueError:
                    counts["not_a_number"] += 1
                    continue
                if not np.isfinite(value):
                    counts["not_finite"] += 1
                    continue
                if column == PARAMS and not (value.is_integer() and 0 < value < 2**63):
                    counts["not_a_parameter_count"] += 1
                    continue
                key = (job, reporter, int(ts_all[k]))
                row = rows.setdefault(key, {})
                if column in row:
                    counts["duplicate_series"] += 1
                    continue
                row[column] = value
                nodes.setdefault(key, node)
    keys = sorted(rows)
    data: dict[str, pa.Array] = {
        "cluster": pa.array([cluster] * len(keys), pa.string()),
        "job_id": pa.array([k[0] for k in keys], pa.string()),
        "ts": pa.array([k[2] for k in keys], pa.int64()).cast(TIMESTAMP),
        "node": pa.array([nodes[k] for k in keys], pa.string()),
        "reporter": pa.array([k[1] for k in keys], pa.string()),
        "source": pa.array([SOURCE] * len(keys), pa.string()),
        PARAMS: pa.array(
            [None if PARAMS not in rows[k] else int(rows[k][PARAMS]) for k in keys], pa.int64()
        ),
    }
    for name in COUNTERS:
        column = f"{name}_total"
        data[column] = pa.array([rows[k].get(column) for k in keys], pa.float64())
    arrays = [data[f.name].cast(f.type) for f in APP_THROUGHPUT]
    return ThroughputRows(pa.Table.from_arrays(arrays, schema=APP_THROUGHPUT), +counts)
