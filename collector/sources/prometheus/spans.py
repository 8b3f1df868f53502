"""Attribution hints and health events of one pivoted window (see `prometheus.pivot`).

`job_intervals` turns `hpc_job` / pod labels into `job_gpus` runs; `health_events` turns XID,
ECC DBE, row-remap and throttle-bit readings into `gpu_events` edges. Both work on the window's
sorted rows (`_Table`), per GPU, with numpy rather than a loop per sample.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pyarrow as pa

from collector.sources.dcgm_exporter.fields import METRIC_COLUMNS
from collector.sources.dcgm_exporter.rows import (
    CLOCK_HW_POWER_BRAKE,
    CLOCK_HW_SLOWDOWN,
    CLOCK_THERMAL,
    EXPORTER_LABEL,
    describe_clock_reasons,
)
from warehouse.schema import RAW_TABLES

if TYPE_CHECKING:
    from collector.sources.prometheus.pivot import _Table

__all__ = ["EVENT_COLUMNS", "health_events", "job_intervals"]

GPU_EVENTS: Final = RAW_TABLES["gpu_events"].schema
JOB_GPUS: Final = RAW_TABLES["job_gpus"].schema
TIMESTAMP: Final = JOB_GPUS.field("start_ts").type
# Health events are edges (a new XID, more DBEs, a throttle bit turning on), so the families
# behind these columns are pulled with a look-back that gives each GPU's state before the window.
EVENT_COLUMNS: Final = ("xid_last", "ecc_dbe_volatile", "remap_failure", "clock_event_reasons")
_COL_ID: Final = {c: i for i, c in enumerate(METRIC_COLUMNS)}
_THROTTLE_RULES: Final = (
    ("hw_slowdown", CLOCK_HW_SLOWDOWN),
    ("thermal", CLOCK_THERMAL),
    ("power_brake", CLOCK_HW_POWER_BRAKE),
)
_KIND_ORDER: Final = {
    k: i
    for i, k in enumerate(
        ("xid", "ecc_dbe", "row_remap_failure", "hw_slowdown", "thermal", "power_brake")
    )
}


def _ids(values: list[str]) -> np.ndarray:
    """Dense ids of `values` in first-seen order."""
    index: dict[str, int] = {}
    return np.array([index.setdefault(v, len(index)) for v in values], dtype=np.int64)


def job_intervals(
    t: _Table,
    cluster: str,
    intervals: np.ndarray,
    pairs: np.ndarray,
    jobs: list[Any],
    open_window: bool,
) -> pa.Table:
    """One interval per contiguous run of a job label on a GPU (`mapping = exporter-label`).

    A run ends where a sample of the GPU lacks the label or the GPU went unobserved for more
    than two intervals; it stands for [first ts, last ts + interval), cut at the GPU's next
    sample if that comes sooner (scrape jitter). In an open window a run
    still on the GPU's newest sample is a job still running: `end_ts` is null.
    """
    pairs = pairs[t.landing_rows[pairs[:, 0]]] if pairs.size else pairs.reshape(-1, 2)
    rows = np.flatnonzero(t.landing_rows)
    by_slot = rows[np.lexsort((t.row_ts[rows], t.row_slot[rows]))]
    pos = np.zeros(t.n_rows, dtype=np.int64)
    slot_sorted = t.row_slot[by_slot]
    starts = np.ones(by_slot.size, dtype=bool)
    starts[1:] = slot_sorted[1:] != slot_sorted[:-1]
    group_start = np.maximum.accumulate(np.where(starts, np.arange(by_slot.size), 0))
    pos[by_slot] = np.arange(by_slot.size) - group_start
    # the GPU's next sample ends a run even when it comes a little before ts + interval
    next_ts = np.full(t.n_rows, np.iinfo(np.int64).max, dtype=np.int64)
    follows = np.flatnonzero(~starts[1:])  # by_slot[k + 1] is the next row of by_slot[k]
    next_ts[by_slot[follows]] = t.row_ts[by_slot[follows + 1]]
    last_pos = np.zeros(max(len(t.long.slots), 1), dtype=np.int64)
    np.maximum.at(last_pos, slot_sorted, pos[by_slot])

    row, job = pairs[:, 0], pairs[:, 1]
    slot, ts = t.row_slot[row], t.row_ts[row]
    order = np.lexsort((ts, job, slot))
    row, job, slot, ts = row[order], job[order], slot[order], ts[order]
    span_ms = np.round(intervals[slot] * 1000.0).astype(np.int64)
    # where the GPU's host (or index) changes within the run (relabelled), a new interval
    # under the new one, as its samples are
    named = _names(t)[t.row_series[row]] if row.size else row
    new = np.ones(row.size, dtype=bool)
    new[1:] = (
        (slot[1:] != slot[:-1])
        | (job[1:] != job[:-1])
        | (pos[row[1:]] != pos[row[:-1]] + 1)
        | (ts[1:] - ts[:-1] > 2 * span_ms[1:])
        | (named[1:] != named[:-1])
    )
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, row.size - 1).astype(np.int64)[: first.size]
    running = open_window & (pos[row[last]] == last_pos[slot[last]])
    n = first.size
    data = {
        "cluster": pa.array([cluster] * n, pa.string()),
        "job_id": pa.array([jobs[j] for j in job[first]], pa.string()),
        "node": t.identity_column("node", pa.string(), row[first]),
        "gpu_index": t.identity_column("gpu_index", pa.int16(), row[first]),
        "gpu_uuid": t.identity_column("gpu_uuid", pa.string(), row[first]),
        "mig_instance": t.identity_column("mig_instance", pa.int16(), row[first]),
        "start_ts": pa.array(ts[first], pa.int64()).cast(TIMESTAMP),
        "end_ts": pa.array(
            np.minimum(ts[last] + span_ms[last], next_ts[row[last]]), pa.int64(), mask=running
        ).cast(TIMESTAMP),
        "mapping": pa.array([EXPORTER_LABEL] * n, pa.string()),
    }
    return pa.Table.from_arrays([data[f.name] for f in JOB_GPUS], schema=JOB_GPUS)


def _names(t: _Table) -> np.ndarray:
    """Per series, a number for the (node, GPU index) it names its GPU by."""
    ids: dict[tuple[object, object], int] = {}
    return np.array(
        [ids.setdefault((s.node, s.gpu_index), len(ids)) for s in t.long.series], dtype=np.int64
    )


def _edges(kind: str, value: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Where a health condition starts, given each reading and the one before (NaN: none)."""
    none = np.isnan(prev)
    edge: np.ndarray
    if kind == "xid_last":
        edge = (value != 0) & (none | (value != prev))
    elif kind == "ecc_dbe_volatile":
        edge = (value > 0) & (none | (value > prev))
    else:  # remap_failure
        edge = (value == 1.0) & (none | (prev != 1.0))
    return edge


def health_events(t: _Table, cluster: str, err_msg: list[str | None]) -> pa.Table:
    """Health events as edges, once per physical GPU (device fields repeat on MIG instances)."""
    uuid_ids = _ids([s.gpu_uuid for s in t.long.slots])
    out: list[tuple[int, int, int, str, int | None, str | None]] = []  # ts, rank, row, kind, ...
    for column in EVENT_COLUMNS:
        cell = t.cells.get(_COL_ID[column])
        if cell is None:
            continue
        dense, has, which = cell
        rows = np.flatnonzero(has)
        gpu, ts, rank = uuid_ids[t.row_slot[rows]], t.row_ts[rows], t.rank[t.row_slot[rows]]
        order = np.lexsort((rank, ts, gpu))
        rows, gpu, ts = rows[order], gpu[order], ts[order]
        first = np.ones(rows.size, dtype=bool)  # the first MIG instance per (GPU, ts)
        first[1:] = (gpu[1:] != gpu[:-1]) | (ts[1:] != ts[:-1])
        rows, gpu = rows[first], gpu[first]
        value = dense[rows]
        prev = np.full(rows.size, np.nan)
        same_gpu = gpu[1:] == gpu[:-1]
        prev[1:] = np.where(same_gpu, value[:-1], np.nan)
        landing = t.landing_rows[rows]
        if column == "clock_event_reasons":
            mask, before = value.astype(np.int64), np.nan_to_num(prev, nan=0).astype(np.int64)
            for kind, bits in _THROTTLE_RULES:
                hit = landing & ((mask & bits) != 0) & (np.isnan(prev) | ((before & bits) == 0))
                for r, m in zip(rows[hit], mask[hit], strict=True):
                    out.append(
                        (
                            int(t.row_ts[r]),
                            int(t.rank[t.row_slot[r]]),
                            int(r),
                            kind,
                            int(m),
                            describe_clock_reasons(int(m)),
                        )
                    )
            continue
        hit = landing & _edges(column, value, prev)
        for r, v in zip(rows[hit], value[hit], strict=True):
            code: int | None = int(v)
            if column == "xid_last":
                kind, detail = "xid", err_msg[which[r]] if which[r] >= 0 else None
            elif column == "ecc_dbe_volatile":
                kind, detail = "ecc_dbe", f"{code} volatile double-bit ECC error(s)"
            else:
                kind, code, detail = "row_remap_failure", None, "row remapping failed"
            out.append((int(t.row_ts[r]), int(t.rank[t.row_slot[r]]), int(r), kind, code, detail))
    out.sort(key=lambda e: (e[0], e[1], _KIND_ORDER[e[3]]))
    rows = np.array([e[2] for e in out], dtype=np.int64)
    data = {
        "cluster": pa.array([cluster] * len(out), pa.string()),
        "node": t.identity_column("node", pa.string(), rows),
        "gpu_uuid": t.identity_column("gpu_uuid", pa.string(), rows),
        "gpu_index": t.identity_column("gpu_index", pa.int16(), rows),
        "ts": pa.array([e[0] for e in out], pa.int64()).cast(TIMESTAMP),
        "kind": pa.array([e[3] for e in out], pa.string()),
        "code": pa.array([e[4] for e in out], pa.int64()),
        "detail": pa.array([e[5] for e in out], pa.string()),
    }
    return pa.Table.from_arrays([data[f.name] for f in GPU_EVENTS], schema=GPU_EVENTS)
