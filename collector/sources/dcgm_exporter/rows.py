"""Pivot per-series DCGM values into wide `gpu_samples` rows, `job_gpus` observations and events.

A dcgm-exporter series is one (metric, GPU, labels) triple; the contract wants one row per GPU
(or MIG instance) per sample time, and on a GPU shared by several jobs at once one row per
sharer (DESIGN §4). `WideRows` collects converted cells keyed by (ts, UUID, GPU_I_ID) and builds
the three Arrow tables with the contract's exact types. Used by the exporter scraper (one ts per
scrape); the Prometheus puller (many ts per query, `prometheus.pivot`) builds the same rows.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Final, TypeVar

import pyarrow as pa

from collector.sources.dcgm_exporter.fields import METRIC_COLUMNS, Series, Value
from warehouse.schema import RAW_TABLES

__all__ = [
    "CLOCK_HW_POWER_BRAKE",
    "CLOCK_HW_SLOWDOWN",
    "CLOCK_THERMAL",
    "EVENT_SOURCE",
    "EXPORTER_LABEL",
    "WideRows",
    "describe_clock_reasons",
    "job_of_pod",
    "observed_conditions",
    "sharer_of",
    "to_ms",
]

GPU_SAMPLES: Final = RAW_TABLES["gpu_samples"].schema
GPU_EVENTS: Final = RAW_TABLES["gpu_events"].schema
JOB_GPUS: Final = RAW_TABLES["job_gpus"].schema
EXPORTER_LABEL: Final = "exporter-label"  # job_gpus.mapping (DESIGN §3.3)

# clock_event_reasons bits that are health events (dcgm.md §2.3)
CLOCK_HW_SLOWDOWN: Final = 0x08
CLOCK_THERMAL: Final = 0x20 | 0x40  # SW thermal | HW thermal
CLOCK_HW_POWER_BRAKE: Final = 0x80
_CLOCK_BITS: Final = (
    (0x01, "gpu_idle"),
    (0x02, "clocks_setting"),
    (0x04, "power_cap"),
    (0x08, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)
_EVENT_RULES: Final = (
    ("hw_slowdown", CLOCK_HW_SLOWDOWN),
    ("thermal", CLOCK_THERMAL),
    ("power_brake", CLOCK_HW_POWER_BRAKE),
)
# The gpu_samples column each event kind is read from.
EVENT_SOURCE: Final = {
    "xid": "xid_last",
    "ecc_dbe": "ecc_dbe_volatile",
    "row_remap_failure": "remap_failure",
    "hw_slowdown": "clock_event_reasons",
    "thermal": "clock_event_reasons",
    "power_brake": "clock_event_reasons",
}


_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def to_ms(ts: dt.datetime) -> int:
    """Whole milliseconds since the epoch of an aware datetime (exact, no float rounding)."""
    return (ts - _EPOCH) // dt.timedelta(milliseconds=1)


def job_of_pod(namespace: str | None, pod: str) -> str:
    """The job id a Kubernetes pod is attributed under: `<namespace>/<pod>` (or the pod alone)."""
    return f"{namespace}/{pod}" if namespace else pod


def sharer_of(series: Series) -> str | None:
    """The job a labelled series reports for: its `hpc_job`, else its pod's job; None if neither."""
    if series.hpc_job is not None:
        return series.hpc_job
    if series.k8s_pod is not None:
        return job_of_pod(series.k8s_namespace, series.k8s_pod)
    return None


_L = TypeVar("_L")
_Pod = tuple[str | None, str, str | None]  # namespace, pod, container


def _single(labels: dict[_L, None]) -> _L | None:
    """The one label of a set, or None when it holds none or several."""
    return next(iter(labels)) if len(labels) == 1 else None


_NO_POD: Final[tuple[None, None, None]] = (None, None, None)


@dataclass(slots=True)
class _Sharer:
    """The labels one sharer's series carry on one GPU at one ts."""

    jobs: dict[str, None] = field(default_factory=dict)  # hpc_job labels, in first-seen order
    pods: dict[_Pod, None] = field(default_factory=dict)


@dataclass(slots=True)
class _Row:
    """One GPU (or MIG instance) at one ts: its identity, every copy of each value, its sharers."""

    series: Series
    # column → every copy, in arrival order: (priority, sharer, value); priority 0 = unlabelled
    copies: dict[str, list[tuple[int, str | None, Value]]] = field(default_factory=dict)
    jobs: dict[str, None] = field(default_factory=dict)  # hpc_job labels, in first-seen order
    pods: dict[_Pod, None] = field(default_factory=dict)
    sharers: dict[str, _Sharer] = field(default_factory=dict)
    err_msg: str | None = None

    @property
    def shared(self) -> bool:
        """Two or more jobs report this GPU at this ts (MPS, time-slicing)."""
        return len(self.sharers) > 1

    def value(self, column: str, sharer: str | None = None) -> tuple[int, Value] | None:
        """The (priority, value) that lands for `column` on the row of `sharer` (None: the row).

        The first unlabelled copy, else the sharer's own first copy, else the first copy of
        another sharer (dcgm-exporter copies the device's values to every sharer).
        """
        copies = self.copies.get(column)
        if not copies:
            return None
        best = min(copies, key=lambda c: c[0])  # the first of the lowest priority
        if sharer is not None and best[0] == 1:
            own = next((c for c in copies if c[1] == sharer), None)
            if own is not None:
                return own[0], own[2]
        return best[0], best[2]

    def conflicts(self) -> int:
        """Copies that disagree with the value landing on their row (same priority, other value).

        A shared GPU's sharers each land their own values (unless an unlabelled copy wins), so
        only disagreeing copies of one sharer count there.
        """
        n = 0
        for column, copies in self.copies.items():
            landed = self.value(column)
            assert landed is not None
            for priority, sharer, value in copies:
                if priority != landed[0]:
                    continue
                if self.shared and priority == 1:
                    own = self.value(column, sharer)
                    assert own is not None
                    n += value != own[1]
                else:
                    n += value != landed[1]
        return n


class WideRows:
    """Accumulate converted cells and build the contract tables.

    A GPU (or MIG instance) reported at one ts under two or more sharers — distinct jobs, from
    `hpc_job` labels or pods (job `<namespace>/<pod>`), as on a time-sliced or MPS GPU — gets one
    `gpu_samples` row per sharer, so the marts split its time among them (DESIGN §4); a GPU with
    one sharer or none keeps one row. Where one value is reported by several series (one per
    sharer, or device-level and per-sharer values side by side), the series without attribution
    labels wins on every row of the GPU (it is the device's own reading: in virtual-GPU mode the
    per-pod values beside it are shares of it); else each sharer's row takes its own series'
    value (dcgm-exporter copies the device's values to every sharer, so they agree; where they
    differ, e.g. per-process memory, each sharer keeps what was reported for it), and a sharer
    without one takes another sharer's. A copy that disagrees with the value landing on its row
    at the same rank is counted as `conflicting_duplicate` in `counts`.
    """

    def __init__(self, *, cluster: str, interval_s: float, source: str) -> None:
        self.cluster = cluster
        self.interval_s = interval_s
        self.source = source
        self._rows: dict[tuple[int, str, int | None], _Row] = {}

    def add(self, ts_ms: int, series: Series, column: str | None, value: Value | None) -> None:
        """Record `series` at `ts_ms`, with `value` for `column` when there is one.

        A null value (e.g. a sentinel) still records that the GPU was reported at `ts_ms`.
        """
        key = (ts_ms, series.gpu_uuid, series.mig_instance)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = _Row(series)
        sharer = sharer_of(series)
        if sharer is not None:
            own = row.sharers.get(sharer)
            if own is None:
                own = row.sharers[sharer] = _Sharer()
            if series.hpc_job is not None:
                row.jobs[series.hpc_job] = own.jobs[series.hpc_job] = None
            if series.k8s_pod is not None:
                pod = (series.k8s_namespace, series.k8s_pod, series.k8s_container)
                row.pods[pod] = own.pods[pod] = None
        if column == "xid_last" and series.err_msg is not None and row.err_msg is None:
            row.err_msg = series.err_msg
        if column is None or value is None:
            return
        priority = 0 if sharer is None else 1
        row.copies.setdefault(column, []).append((priority, sharer, value))

    @property
    def counts(self) -> Counter[str]:
        """Values that were not landed, by reason (`conflicting_duplicate`)."""
        n = sum(row.conflicts() for row in self._rows.values())
        return Counter({"conflicting_duplicate": n} if n else {})

    def __len__(self) -> int:
        """The number of GPUs (or MIG instances) × sample times recorded."""
        return len(self._rows)

    def _ordered(self) -> list[tuple[tuple[int, str, int | None], _Row]]:
        def order(item: tuple[tuple[int, str, int | None], _Row]) -> tuple[object, ...]:
            (ts_ms, uuid, gi), row = item
            index = row.series.gpu_index
            return (ts_ms, row.series.node, index is None, index or 0, uuid, gi is None, gi or 0)

        return sorted(self._rows.items(), key=order)

    def samples(self) -> pa.Table:
        """The `gpu_samples` rows with the contract's types: one per (ts, UUID, GPU_I_ID), or on a
        shared GPU one per sharer there (ordered by job id), with `job_id` set to the sharer.

        A GPU with one sharer or none leaves `job_id` null: owners come from `job_gpus` at
        attribution (DESIGN §4), where the labels are recorded too.
        """
        out: list[tuple[int, _Row, str | None]] = []
        for (ts_ms, _uuid, _gi), row in self._ordered():
            if row.shared:
                out.extend((ts_ms, row, sharer) for sharer in sorted(row.sharers))
            else:
                out.append((ts_ms, row, None))
        n = len(out)
        first = [row.series for _, row, _ in out]
        jobs: list[object] = []
        pods: list[tuple[str | None, str | None, str | None]] = []
        for _, row, sharer in out:
            labels = row if sharer is None else row.sharers[sharer]
            job = _single(labels.jobs)
            jobs.append(job)
            pod = _single(labels.pods)
            pods.append(_NO_POD if pod is None else pod)
        data: dict[str, list[object]] = {
            "ts": [ts for ts, _, _ in out],
            "cluster": [self.cluster] * n,
            "node": [s.node for s in first],
            "gpu_index": [s.gpu_index for s in first],
            "gpu_uuid": [s.gpu_uuid for s in first],
            "mig_profile": [s.mig_profile for s in first],
            "mig_instance": [s.mig_instance for s in first],
            "model": [s.model for s in first],
            "interval_s": [self.interval_s] * n,
            "job_id": [sharer for _, _, sharer in out],
            "k8s_namespace": [p[0] for p in pods],
            "k8s_pod": [p[1] for p in pods],
            "k8s_container": [p[2] for p in pods],
            "hpc_job": jobs,
            "source": [self.source] * n,
        }
        for column in METRIC_COLUMNS:
            data[column] = [
                cell[1] if (cell := row.value(column, sharer)) is not None else None
                for _, row, sharer in out
            ]
        arrays = [pa.array(data[f.name], type=f.type) for f in GPU_SAMPLES]
        return pa.Table.from_arrays(arrays, schema=GPU_SAMPLES)

    def job_gpus(self) -> pa.Table:
        """One `job_gpus` observation per (job label, GPU, ts): the span [ts, ts + interval_s).

        `hpc_job` labels give the job id as written; pod labels give `<namespace>/<pod>`.
        """
        span_ms = round(self.interval_s * 1000)
        out: dict[str, list[object]] = {f.name: [] for f in JOB_GPUS}
        for (ts_ms, uuid, gi), row in self._ordered():
            jobs = list(row.jobs) + [job_of_pod(ns, pod) for ns, pod, _ in row.pods]
            for job in dict.fromkeys(jobs):
                out["cluster"].append(self.cluster)
                out["job_id"].append(job)
                out["node"].append(row.series.node)
                out["gpu_index"].append(row.series.gpu_index)
                out["gpu_uuid"].append(uuid)
                out["mig_instance"].append(gi)
                out["start_ts"].append(ts_ms)
                out["end_ts"].append(ts_ms + span_ms)
                out["mapping"].append(EXPORTER_LABEL)
        arrays = [pa.array(out[f.name], type=f.type) for f in JOB_GPUS]
        return pa.Table.from_arrays(arrays, schema=JOB_GPUS)

    def events(self) -> pa.Table:
        """Health conditions present at each ts, one per physical GPU and kind (level, not edge).

        `xid` (non-zero last XID; code = XID), `ecc_dbe` (volatile DBE count > 0; code = count),
        `row_remap_failure`, and from clock_event_reasons `hw_slowdown` (0x8), `thermal`
        (0x20|0x40), `power_brake` (0x80) with code = the bitmask. Device-level fields repeat on
        every MIG instance, so each physical GPU is looked at once.
        """
        device: dict[tuple[int, str], dict[str, Value]] = {}
        who: dict[tuple[int, str], _Row] = {}
        for (ts_ms, uuid, _gi), row in self._ordered():
            merged = device.setdefault((ts_ms, uuid), {})
            who.setdefault((ts_ms, uuid), row)
            for column in ("xid_last", "ecc_dbe_volatile", "remap_failure", "clock_event_reasons"):
                if column not in merged and (cell := row.value(column)) is not None:
                    merged[column] = cell[1]
            if row.err_msg is not None and who[(ts_ms, uuid)].err_msg is None:
                who[(ts_ms, uuid)].err_msg = row.err_msg
        out: dict[str, list[object]] = {f.name: [] for f in GPU_EVENTS}

        def emit(key: tuple[int, str], kind: str, code: int | None, detail: str | None) -> None:
            row = who[key]
            out["cluster"].append(self.cluster)
            out["node"].append(row.series.node)
            out["gpu_uuid"].append(key[1])
            out["gpu_index"].append(row.series.gpu_index)
            out["ts"].append(key[0])
            out["kind"].append(kind)
            out["code"].append(code)
            out["detail"].append(detail)

        for key, values in device.items():
            xid = values.get("xid_last")
            if isinstance(xid, int) and not isinstance(xid, bool) and xid != 0:
                emit(key, "xid", xid, who[key].err_msg)
            dbe = values.get("ecc_dbe_volatile")
            if isinstance(dbe, int) and not isinstance(dbe, bool) and dbe > 0:
                emit(key, "ecc_dbe", dbe, f"{dbe} volatile double-bit ECC error(s)")
            if values.get("remap_failure") is True:
                emit(key, "row_remap_failure", None, "row remapping failed")
            reasons = values.get("clock_event_reasons")
            if isinstance(reasons, int) and not isinstance(reasons, bool):
                for kind, mask in _EVENT_RULES:
                    if reasons & mask:
                        emit(key, kind, reasons, describe_clock_reasons(reasons))
        arrays = [pa.array(out[f.name], type=f.type) for f in GPU_EVENTS]
        return pa.Table.from_arrays(arrays, schema=GPU_EVENTS)


def describe_clock_reasons(mask: int) -> str:
    """E.g. `clock_event_reasons=0x48 (hw_slowdown, hw_thermal)`."""
    names = [name for bit, name in _CLOCK_BITS if mask & bit]
    return f"clock_event_reasons={mask:#x} ({', '.join(names) or 'none'})"


def observed_conditions(samples: pa.Table) -> set[tuple[str, str]]:
    """(GPU UUID, event kind) pairs whose source field holds a value in `samples`.

    Only for these can the absence of an event mean the condition has cleared.
    """
    uuids = samples.column("gpu_uuid").to_pylist()
    out: set[tuple[str, str]] = set()
    for kind, column in EVENT_SOURCE.items():
        values = samples.column(column).to_pylist()
        out.update((u, kind) for u, v in zip(uuids, values, strict=True) if v is not None)
    return out
