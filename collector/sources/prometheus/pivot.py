"""Turn Prometheus range-vector results (JSON lists) into `gpu_samples`, `gpu_events`, `job_gpus`.

Vectorised end to end: each series' `[[ts, "value"], ...]` list is split once (`zip`), values are
parsed by Arrow's string→float cast and checked with numpy, and the long (series, ts) elements
are pivoted to one wide row per (ts, UUID, GPU_I_ID) — per sharer on a shared GPU — by sorting
keys, never by a Python loop per sample. Names, units and validity come from
`dcgm_exporter.fields` (both exporter generations); the checks mirror
`dcgm_exporter.fields.convert` exactly (tests/prometheus compares them value by value).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa

# The range table and blank constants are private to dcgm_fields; reading them here keeps one
# source of truth for validity (see the parity test in tests/prometheus/test_pivot.py).
from collector.sources.dcgm_exporter.fields import (
    _FLOAT32_MAX,
    _FP64_BLANK,
    _INT32_BLANK,
    _RANGE,
    FIELDS,
    METRIC_COLUMNS,
    FieldSpec,
    Series,
    identify,
    read_number,
)
from collector.sources.dcgm_exporter.rows import job_of_pod, sharer_of
from collector.sources.prometheus.blocks import SeriesBlock
from collector.sources.prometheus.spans import EVENT_COLUMNS, health_events, job_intervals
from warehouse.schema import RAW_TABLES

__all__ = [
    "DEFAULT_INTERVAL_S",
    "TargetLabels",
    "EVENT_COLUMNS",
    "LOOKBACK_MS",
    "SOURCE",
    "WindowRows",
    "pivot_window",
]

SOURCE: Final = "prometheus"
GPU_SAMPLES: Final = RAW_TABLES["gpu_samples"].schema
TIMESTAMP: Final = GPU_SAMPLES.field("ts").type
LOOKBACK_MS: Final = 5 * 60_000  # Prometheus' own staleness horizon
DEFAULT_INTERVAL_S: Final = 15.0  # a window with one sample per GPU has no spacing to measure

_COLS: Final = METRIC_COLUMNS
_COL_ID: Final = {c: i for i, c in enumerate(_COLS)}
_EVENT_IDS: Final = np.array([_COL_ID[c] for c in EVENT_COLUMNS])


def _kind(column: str) -> str:
    t = GPU_SAMPLES.field(column).type
    return "bool" if pa.types.is_boolean(t) else "int" if pa.types.is_integer(t) else "float"


_KIND: Final = tuple(_kind(c) for c in _COLS)
_INT_MAX: Final = tuple(
    float((1 << (GPU_SAMPLES.field(c).type.bit_width - 1)) - 1) if k == "int" else np.inf
    for c, k in zip(_COLS, _KIND, strict=True)
)
_LOW: Final = np.array([_RANGE.get(c, (0.0, _FLOAT32_MAX))[0] for c in _COLS])
_HIGH: Final = np.array(
    [min(_RANGE.get(c, (0.0, _FLOAT32_MAX))[1], m) for c, m in zip(_COLS, _INT_MAX, strict=True)]
)
_WHOLE: Final = np.array([k != "float" for k in _KIND])  # int and bool columns take integers
# Per-element outcome of the value checks, in `dcgm_exporter.fields` reason names.
_REASONS: Final = (
    "",
    "not_finite",
    "sentinel",
    "zero_means_unsupported",
    "out_of_range",
    "not_a_number",
)
_OK, _NOT_FINITE, _SENTINEL, _ZERO, _RANGE_BAD, _NAN_TOKEN = range(6)


@dataclass(frozen=True, slots=True)
class WindowRows:
    """The three contract tables one window yields, and skipped or nulled values by reason."""

    samples: pa.Table
    events: pa.Table
    job_gpus: pa.Table
    counts: Counter[str]
    spacing_s: float | None = None  # median spacing of the window's samples; None: unmeasured


def _instance_host(labels: Mapping[str, str]) -> str | None:
    """The host of Prometheus' `instance` target label: the node when a series has no host label."""
    instance = labels.get("instance", "")
    host = instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance
    return host.strip("[]") or None


@dataclass(slots=True)
class _Long:
    """A window's samples in long form: per series lists, per element arrays (`sid` → series)."""

    series: list[Series]
    specs: list[FieldSpec]
    slot: list[int]
    slots: list[Series]  # the first series seen for each (UUID, GPU_I_ID)
    ts_ms: np.ndarray
    raw: np.ndarray
    unreadable: np.ndarray
    sid: np.ndarray
    counts: Counter[str]


def _parse_values(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Value strings as float64 (Arrow's cast reads NaN and ±Inf) and which were not numbers."""
    try:
        raw = np.asarray(values.cast(pa.float64()))
        return raw, np.zeros(raw.size, dtype=bool)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    # only after Arrow refused the column (Prometheus never writes such tokens)
    parsed = [read_number(s) for s in values.to_pylist()]
    raw = np.array([np.nan if isinstance(p, str) else p for p in parsed], dtype=np.float64)
    unreadable = np.array([isinstance(p, str) and p != "not_finite" for p in parsed], dtype=bool)
    return raw, unreadable


TargetLabels = Mapping[str, Mapping[str, frozenset[str]]]
# Kubernetes labels that a scrape target (ServiceMonitor, pod SD) also sets on every series.
_TARGET_POD_LABELS: Final = frozenset(
    {"namespace", "pod", "container", "pod_namespace", "pod_name", "container_name"}
)


def _own_labels(labels: dict[str, str], targets: TargetLabels) -> dict[str, str]:
    """`labels` without the pod labels its scrape target put there (they name the exporter's
    own pod: with `honor_labels: false` the exporter's are renamed `exported_*`, and a GPU no
    pod holds keeps the target's)."""
    target = targets.get(labels.get("instance", ""))
    if not target:
        return labels
    return {
        k: v
        for k, v in labels.items()
        if not (k in _TARGET_POD_LABELS and v in target.get(k, frozenset()))
    }


def _collect(
    blocks: Iterable[SeriesBlock], start_ms: int, end_ms: int, targets: TargetLabels
) -> _Long:
    counts: Counter[str] = Counter()
    series: list[Series] = []
    specs: list[FieldSpec] = []
    slot_of: list[int] = []
    slot_ids: dict[tuple[str, int | None], int] = {}
    slots: list[Series] = []
    ts_parts: list[np.ndarray] = []
    sid_parts: list[np.ndarray] = []
    raw_parts: list[np.ndarray] = []
    bad_parts: list[np.ndarray] = []
    for block in blocks:
        spec = FIELDS.get(block.family)
        n = len(block.labels)
        if n == 0:
            continue
        ts_ms = np.round(block.ts_s * 1000.0).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(block.lengths)])
        sid_of = np.full(n, -1, dtype=np.int64)
        # series sorted by labels: "the first copy wins" must not depend on response order
        for i in sorted(range(n), key=lambda i: sorted(block.labels[i].items())):
            labels = _own_labels(block.labels[i], targets) if targets else block.labels[i]
            found = "unknown_metric" if spec is None else identify(labels, _instance_host(labels))
            if isinstance(found, str):  # counted for the samples that would have landed
                own = ts_ms[offsets[i] : offsets[i + 1]]
                counts[found] += int(((own >= start_ms) & (own < end_ms)).sum())
                continue
            assert spec is not None
            key = (found.gpu_uuid, found.mig_instance)
            if key not in slot_ids:
                slot_ids[key] = len(slots)
                slots.append(found)
            sid_of[i] = len(series)
            series.append(found)
            specs.append(spec)
            slot_of.append(slot_ids[key])
        sid = np.repeat(sid_of, block.lengths)
        keep = sid >= 0
        if not keep.any():
            continue
        raw, bad = _parse_values(block.values)
        ts_parts.append(ts_ms[keep])
        sid_parts.append(sid[keep])
        raw_parts.append(raw[keep])
        bad_parts.append(bad[keep])

    def cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)

    return _Long(
        series=series,
        specs=specs,
        slot=slot_of,
        slots=slots,
        ts_ms=cat(ts_parts, np.int64),
        raw=cat(raw_parts, np.float64),
        unreadable=cat(bad_parts, np.bool_),
        sid=cat(sid_parts, np.int64),
        counts=counts,
    )


def _check(
    raw: np.ndarray, col: np.ndarray, mul: np.ndarray, div: np.ndarray, zero_null: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`read_number` + `scale` on arrays: (value in the column's unit, reason code; 0 = valid)."""
    reason = np.zeros(raw.size, dtype=np.int8)
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(raw)
        whole = raw == np.floor(raw)
        blank = (np.abs(raw) >= _FP64_BLANK) | (
            (raw >= _INT32_BLANK.start) & (raw < _INT32_BLANK.stop) & whole
        )
        value = raw * mul / div  # the same float operations as `scale`: identical results
        in_range = (value >= _LOW[col]) & (value <= _HIGH[col])
        in_range &= ~_WHOLE[col] | (value == np.floor(value))
    reason[~in_range] = _RANGE_BAD
    reason[zero_null & (raw == 0)] = _ZERO
    reason[blank] = _SENTINEL
    reason[~finite] = _NOT_FINITE
    return value, reason


def _first_per_row(
    row: np.ndarray, priority: np.ndarray, seq: np.ndarray
) -> tuple[np.ndarray, int]:
    """Element chosen per row (best priority, then first series) and how many copies disagreed."""
    order = np.lexsort((seq, priority, row))
    rows = row[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = rows[1:] != rows[:-1]
    return order[first], int(first.size - first.sum())


def _single_label(group: np.ndarray, label: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group the one label id its elements carry (-1: none, or several)."""
    has = label >= 0
    group, label = group[has], label[has]
    low = np.full(n_groups, np.iinfo(np.int64).max)
    high = np.full(n_groups, -1, dtype=np.int64)
    np.minimum.at(low, group, label)
    np.maximum.at(high, group, label)
    return np.where(low == high, high, -1)


class _Table:
    """Builds one window's tables from the long elements (see `pivot_window`).

    A row is one GPU (or MIG instance) at one ts. A shared row — two or more sharers (jobs, by
    `sharer_of`) report the GPU at that ts — lands as one sub-row per sharer (`sub_row`,
    `sub_sharer`, ordered by row, then by the sharer's job id), whose cells are `sub_cells`.
    """

    def __init__(
        self,
        long: _Long,
        cluster: str,
        start_ms: int,
        end_ms: int,
        sharer_of_series: np.ndarray,
        sharer_rank: np.ndarray,
    ) -> None:
        self.long, self.cluster, self.start_ms = long, cluster, start_ms
        n_series = len(long.series)
        col_s = np.array([_COL_ID[s.column] for s in long.specs], dtype=np.int64)
        col = col_s[long.sid]
        in_window = (long.ts_ms >= start_ms) & (long.ts_ms < end_ms)
        lookback = (long.ts_ms >= start_ms - LOOKBACK_MS) & (long.ts_ms < start_ms)
        keep = np.flatnonzero(in_window | (lookback & np.isin(col, _EVENT_IDS)))
        sid = long.sid[keep]
        self.col = col[keep]
        self.ts = long.ts_ms[keep]
        self.value, reason = _check(
            long.raw[keep],
            self.col,
            np.array([s.multiply for s in long.specs])[sid] if n_series else np.empty(0),
            np.array([s.divide for s in long.specs])[sid] if n_series else np.empty(0),
            np.array([s.zero_is_null for s in long.specs], dtype=bool)[sid]
            if n_series
            else np.empty(0, bool),
        )
        reason[long.unreadable[keep]] = _NAN_TOKEN
        landing = in_window[keep]
        for code, n in enumerate(np.bincount(reason[landing], minlength=len(_REASONS))):
            if code != _OK and n:
                long.counts[_REASONS[code]] += int(n)
        self.valid = reason == _OK
        self.sid = sid
        series = long.series
        self.priority = (
            np.array(
                [0 if s.hpc_job is None and s.k8s_pod is None else 1 for s in series], dtype=np.int8
            )[sid]
            if n_series
            else np.empty(0, np.int8)
        )
        slot = np.array(long.slot, dtype=np.int64)[sid] if n_series else np.empty(0, np.int64)
        n_slots = max(len(long.slots), 1)
        self.rank = self._slot_rank()
        rows, self.row = np.unique(self.ts * n_slots + self.rank[slot], return_inverse=True)
        self.row = self.row.reshape(-1)
        self.row_ts = rows // n_slots
        self.row_slot = np.argsort(self.rank)[rows % n_slots] if rows.size else rows
        self.n_rows = rows.size
        # the series each row's GPU is named by: the first reporting it at that ts (a GPU
        # relabelled in the window, its UUID on a new host, has each row under its own host)
        self.row_series = np.full(self.n_rows, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(self.row_series, self.row, sid)
        self.landing_rows = self.row_ts >= start_ms
        self.sharer = sharer_of_series[sid] if n_series else np.empty(0, np.int64)
        self._split_sharers(sharer_rank)
        self.cells: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.sub_cells: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for c in np.unique(self.col[self.valid]):
            mine = np.flatnonzero(self.valid & (self.col == c))
            chosen, copies = _first_per_row(self.row[mine], self.priority[mine], sid[mine])
            chosen = mine[chosen]
            dense = np.full(self.n_rows, np.nan)
            dense[self.row[chosen]] = self.value[chosen]
            has = np.zeros(self.n_rows, dtype=bool)
            has[self.row[chosen]] = True
            which = np.full(self.n_rows, -1, dtype=np.int64)
            which[self.row[chosen]] = sid[chosen]
            self.cells[int(c)] = (dense, has, which)
            own = self._sub_values(int(c), mine, chosen) if self.sub_row.size else None
            if copies:
                self._count_conflicts(mine, chosen, own)

    def _split_sharers(self, rank: np.ndarray) -> None:
        """Find the shared rows and their sub-rows, one per (row, sharer), and each element's."""
        labelled = np.flatnonzero(self.sharer >= 0)
        row, key = self.row[labelled], rank[self.sharer[labelled]]
        low = np.full(self.n_rows, np.iinfo(np.int64).max)
        high = np.full(self.n_rows, -1, dtype=np.int64)
        np.minimum.at(low, row, key)
        np.maximum.at(high, row, key)
        self.shared_rows = (high >= 0) & (low != high)
        # sharing is rare: only the elements of shared rows are grouped
        mine = labelled[self.shared_rows[row]]
        width = max(rank.size, 1)
        pair = self.row[mine] * width + rank[self.sharer[mine]]
        subs, sub_of = np.unique(pair, return_inverse=True)
        self.sub_row = subs // width
        self.sub_sharer = np.argsort(rank)[subs % width] if subs.size else subs
        self.sub_of = np.full(self.row.size, -1, dtype=np.int64)
        self.sub_of[mine] = sub_of.reshape(-1)

    def _sub_values(self, c: int, mine: np.ndarray, chosen: np.ndarray) -> np.ndarray:
        """Fill `sub_cells[c]`; return the element each sub-row's sharer reported first (-1).

        A sub-row takes its row's value where that is an unlabelled (device-level) series',
        else its sharer's own first value, else (the sharer reported none) the row's.
        """
        dense, has, _ = self.cells[c]
        theirs = mine[self.sub_of[mine] >= 0]
        first, _ = _first_per_row(self.sub_of[theirs], self.priority[theirs], self.sid[theirs])
        first = theirs[first]
        own = np.full(self.sub_row.size, -1, dtype=np.int64)
        own[self.sub_of[first]] = first
        device = np.zeros(self.n_rows, dtype=bool)
        device[self.row[chosen]] = self.priority[chosen] == 0
        take = (own >= 0) & ~device[self.sub_row]
        values = dense[self.sub_row]
        values[take] = self.value[own[take]]
        self.sub_cells[c] = (values, has[self.sub_row] | take)
        return np.where(take, own, -1)

    def _slot_rank(self) -> np.ndarray:
        """Row order of `WideRows`: node, GPU index, UUID, MIG instance."""

        def key(i: int) -> tuple[object, ...]:
            s = self.long.slots[i]
            idx, gi = s.gpu_index, s.mig_instance
            return (s.node, idx is None, idx or 0, s.gpu_uuid, gi is None, gi or 0)

        order = sorted(range(len(self.long.slots)), key=key)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank

    def _count_conflicts(
        self, mine: np.ndarray, chosen: np.ndarray, own: np.ndarray | None
    ) -> None:
        """Copies of a landing value with the priority of the value landing on their (sub-)row
        but another value; `own`: per sub-row the element it takes instead of its row's (-1)."""
        best = np.full(self.n_rows, -1, dtype=np.int64)
        best[self.row[chosen]] = chosen
        winner = best[self.row[mine]]
        if own is not None:
            sub = self.sub_of[mine]
            instead = np.where(sub >= 0, own[sub], -1)
            winner = np.where(instead >= 0, instead, winner)
        clash = (winner != mine) & (self.priority[mine] == self.priority[winner])
        clash &= self.value[mine] != self.value[winner]
        clash &= self.landing_rows[self.row[mine]]
        self.long.counts["conflicting_duplicate"] += int(clash.sum())

    # ---------------------------------------------------------------- per GPU and per row

    def identity_column(self, name: str, type_: pa.DataType, rows: np.ndarray) -> pa.Array:
        """One identity attribute (node, GPU index, model …) of each row's GPU, as the series
        that reported it at the row's ts names it (`row_series`): not the first series of the
        window's, which put up to a window of a relabelled GPU's rows under its old host."""
        per_series = pa.array([getattr(s, name) for s in self.long.series], type_)
        if not rows.size:
            return pa.array([], type_)
        return per_series.take(pa.array(self.row_series[rows]))

    def spacing(self) -> tuple[np.ndarray, np.ndarray]:
        """The gaps (s) between each GPU's consecutive landing rows, and the GPU of each gap."""
        rows = np.flatnonzero(self.landing_rows)
        order = rows[np.lexsort((self.row_ts[rows], self.row_slot[rows]))]
        slot, ts = self.row_slot[order], self.row_ts[order]
        same = slot[1:] == slot[:-1]
        return (ts[1:] - ts[:-1])[same] / 1000.0, slot[1:][same]

    def intervals_s(self, fixed: float | None, fallback: float | None = None) -> np.ndarray:
        """Seconds each GPU's rows stand for: `fixed`, else the median spacing of its rows, else
        the window's median spacing, else `fallback` (the spacing an earlier window measured),
        else DEFAULT_INTERVAL_S."""
        n_slots = len(self.long.slots)
        if fixed is not None:
            return np.full(n_slots, fixed)
        gaps, gap_slot = self.spacing()
        unmeasured = DEFAULT_INTERVAL_S if fallback is None else fallback
        out = np.full(n_slots, float(np.median(gaps)) if gaps.size else unmeasured)
        by_slot = np.argsort(gap_slot, kind="stable")
        gaps, bounds = gaps[by_slot], np.searchsorted(gap_slot[by_slot], np.arange(n_slots + 1))
        for s in range(n_slots):  # one median per GPU
            if bounds[s + 1] > bounds[s]:
                out[s] = np.median(gaps[bounds[s] : bounds[s + 1]])
        # a scrape interval is configured in whole seconds (tenths below 2 s); jitter is noise
        return np.where(out >= 2.0, np.round(out), np.round(out, 1))

    def labels_per_row(self, label_of_series: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row the one label id its series carry (-1: none or several); all (row, id) pairs."""
        label = label_of_series[self.sid] if self.sid.size else self.sid
        single = _single_label(self.row, label, self.n_rows)
        has = label >= 0
        row, label = self.row[has], label[has]
        # rows holding several labels (a shared GPU) are few: list their pairs exactly
        mixed = single[row] < 0
        alone = np.flatnonzero(single >= 0)
        pairs = np.concatenate(
            [np.stack([alone, single[alone]], axis=1), _unique_pairs(row[mixed], label[mixed])]
        )
        return single, pairs

    def sub_labels(self, label_of_series: np.ndarray) -> np.ndarray:
        """Per sub-row the one label id its sharer's series carry (-1: none or several)."""
        label = label_of_series[self.sid] if self.sid.size else self.sid
        mine = self.sub_of >= 0
        return _single_label(self.sub_of[mine], label[mine], self.sub_row.size)


def _unique_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distinct (a, b) pairs of two non-negative int arrays, sorted, as an (n, 2) array."""
    if a.size == 0:
        return np.empty((0, 2), dtype=np.int64)
    width = int(b.max()) + 1
    key = np.unique(a.astype(np.int64) * width + b)
    return np.stack([key // width, key % width], axis=1)


def _ids(values: Sequence[object]) -> tuple[np.ndarray, list[Any]]:
    """Dense ids of `values` (None → -1) and the distinct values in first-seen order."""
    index: dict[object, int] = {}
    ids = [-1 if v is None else index.setdefault(v, len(index)) for v in values]
    return np.array(ids, dtype=np.int64), list(index)


def _lookup(ids: np.ndarray, names: Sequence[str | None]) -> pa.Array:
    """`names[id]` per id as a string array; -1 (and a None name) is null."""
    indices = pa.array(np.maximum(ids, 0).astype(np.int32), mask=ids < 0)
    return pa.DictionaryArray.from_arrays(indices, pa.array(list(names), pa.string())).cast(
        pa.string()
    )


def _metric_array(column: str, dense: np.ndarray, has: np.ndarray) -> pa.Array:
    type_ = GPU_SAMPLES.field(column).type
    kind = _KIND[_COL_ID[column]]
    if kind == "bool":
        return pa.array(dense == 1.0, pa.bool_(), mask=~has)
    if kind == "int":
        return pa.array(np.where(has, dense, 0).astype(np.int64), pa.int64(), mask=~has).cast(type_)
    numpy_type = np.float32 if type_ == pa.float32() else np.float64
    return pa.array(dense.astype(numpy_type), type_, mask=~has)


def _samples(
    t: _Table,
    cluster: str,
    intervals: np.ndarray,
    jobs: list[Any],
    hpc: tuple[np.ndarray, list[Any], np.ndarray],
    pods: tuple[np.ndarray, list[Any], np.ndarray],
) -> pa.Table:
    """The landing rows, a shared row as one row per sharer (`job_id` set to it), in order.

    `hpc`, `pods`: each row's single label id, the labels, and each series' label id.
    """
    plain = np.flatnonzero(t.landing_rows & ~t.shared_rows)
    subs = np.flatnonzero(t.landing_rows[t.sub_row])
    out_row = np.concatenate([plain, t.sub_row[subs]])
    out_sub = np.concatenate([np.full(plain.size, -1, dtype=np.int64), subs])
    order = np.lexsort((out_sub, out_row))  # sub-rows are numbered in their sharers' order
    rows, sub = out_row[order], out_sub[order]
    is_sub = sub >= 0
    n = rows.size

    def per_row(row_values: np.ndarray, sub_values: np.ndarray) -> np.ndarray:
        """Each output row's value: its sub-row's on a shared row, else its row's."""
        if not sub_values.size:
            out: np.ndarray = row_values[rows]
        else:
            out = np.where(is_sub, sub_values[np.maximum(sub, 0)], row_values[rows])
        return out

    data: dict[str, pa.Array] = {
        "ts": pa.array(t.row_ts[rows], pa.int64()).cast(TIMESTAMP),
        "cluster": pa.array([cluster] * n, pa.string()),
        "node": t.identity_column("node", pa.string(), rows),
        "gpu_index": t.identity_column("gpu_index", pa.int16(), rows),
        "gpu_uuid": t.identity_column("gpu_uuid", pa.string(), rows),
        "mig_profile": t.identity_column("mig_profile", pa.string(), rows),
        "mig_instance": t.identity_column("mig_instance", pa.int16(), rows),
        "model": t.identity_column("model", pa.string(), rows),
        "interval_s": pa.array(intervals[t.row_slot[rows]].astype(np.float32), pa.float32()),
        "job_id": _lookup(per_row(np.full(t.n_rows, -1, dtype=np.int64), t.sub_sharer), jobs),
        "source": pa.array([SOURCE] * n, pa.string()),
    }
    data["hpc_job"] = _lookup(per_row(hpc[0], t.sub_labels(hpc[2])), hpc[1])
    pod, triples = per_row(pods[0], t.sub_labels(pods[2])), pods[1]
    for i, column in enumerate(("k8s_namespace", "k8s_pod", "k8s_container")):
        data[column] = _lookup(pod, [t[i] for t in triples])
    for column in _COLS:
        cell = t.cells.get(_COL_ID[column])
        if cell is not None:
            shared = t.sub_cells.get(_COL_ID[column], (np.empty(0), np.empty(0, dtype=bool)))
            dense, has = per_row(cell[0], shared[0]), per_row(cell[1], shared[1])
            data[column] = _metric_array(column, dense, has)
    arrays = [data[f.name] if f.name in data else pa.nulls(n, f.type) for f in GPU_SAMPLES]
    return pa.Table.from_arrays(arrays, schema=GPU_SAMPLES)


def pivot_window(
    blocks: Iterable[SeriesBlock],
    *,
    cluster: str,
    start_ms: int,
    end_ms: int,
    open_window: bool = False,
    interval_s: float | None = None,
    targets: TargetLabels | None = None,
    fallback_interval_s: float | None = None,
) -> WindowRows:
    """Pivot one window's query results (one block per family) into the contract's tables.

    Samples with `start_ms <= ts < end_ms` land, one row per (ts, UUID, GPU_I_ID): families
    scraped together share the ts. A GPU reported at one ts under two or more sharers (distinct
    `hpc_job` labels or pods: MPS, time-slicing) lands one row per sharer instead, with `job_id`
    set to it, as `dcgm_exporter.rows.WideRows` builds them (its docstring says which values each
    row takes); one sharer or none leaves `job_id` null. Earlier samples (the look-back of
    `EVENT_COLUMNS` families) only tell the state before the window. A row stands for
    `interval_s`, else the median spacing of its GPU's samples here, else of the window's, else
    `fallback_interval_s` (a window holding one scrape per GPU, e.g. the last one before the
    exporters stopped, has no spacing of its own). `open_window`: the window
    reaches the present, so a job label on a GPU's newest sample is a job still running.
    `targets`: per `instance`, the labels its scrape target adds (from `up`); pod labels equal to
    them are dropped.
    """
    long = _collect(blocks, start_ms, end_ms, targets or {})
    series = long.series
    hpc_ids, hpc_names = _ids([s.hpc_job for s in series])
    pod_ids, pod_triples = _ids(
        [
            None if s.k8s_pod is None else (s.k8s_namespace, s.k8s_pod, s.k8s_container)
            for s in series
        ]
    )
    # job_gpus: `hpc_job` as written, a pod as <namespace>/<pod>, in one id space
    job_names = list(dict.fromkeys([*hpc_names, *(job_of_pod(ns, p) for ns, p, _ in pod_triples)]))
    job_of = {name: i for i, name in enumerate(job_names)}
    sharers = np.array(
        [-1 if (job := sharer_of(s)) is None else job_of[job] for s in series], dtype=np.int64
    )
    rank = np.empty(len(job_names), dtype=np.int64)
    rank[sorted(range(len(job_names)), key=job_names.__getitem__)] = np.arange(len(job_names))
    t = _Table(long, cluster, start_ms, end_ms, sharers, rank)
    hpc_single, hpc_pairs = t.labels_per_row(hpc_ids)
    pod_single, pod_pairs = t.labels_per_row(pod_ids)
    remap_hpc = np.array([job_of[n] for n in hpc_names], dtype=np.int64)
    remap_pod = np.array([job_of[job_of_pod(ns, p)] for ns, p, _ in pod_triples], dtype=np.int64)
    pairs = _unique_pairs(
        np.concatenate([hpc_pairs[:, 0], pod_pairs[:, 0]]),
        np.concatenate([remap_hpc[hpc_pairs[:, 1]], remap_pod[pod_pairs[:, 1]]]),
    )
    intervals = t.intervals_s(interval_s, fallback_interval_s)
    gaps, _ = t.spacing()
    return WindowRows(
        samples=_samples(
            t,
            cluster,
            intervals,
            job_names,
            (hpc_single, hpc_names, hpc_ids),
            (pod_single, pod_triples, pod_ids),
        ),
        events=health_events(t, cluster, [s.err_msg for s in series]),
        job_gpus=job_intervals(t, cluster, intervals, pairs, job_names, open_window),
        counts=+long.counts,
        spacing_s=float(np.median(gaps)) if gaps.size else None,
    )
