"""Property: the health rules' hourly queries equal their definitions, written out in Python.

sql/detectors/gpu_health_hourly.sql: Hypothesis draws samples of a few GPUs (with and without a
UUID, models changing) over two hours, with MIG instances and duplicate landings at the same
sample time and nulls in every field. The definition: the rows of one GPU (cluster, node, UUID,
index) and sample time are one sample (maxima, bitwise or of the clock-event reasons, `or` of
the remap flags); its hours then count and aggregate those samples.

sql/detectors/gpu_ecc_trend_hourly.sql: a few GPUs' corrected-ECC counters over two hours, with
resets, moves between nodes and MIG repeats of a sample. The definition: along each GPU's
samples in time order, a step up is that many new errors and a step down (a reset) the count
after it; each hour sums the steps of its samples.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.rules import health, health_trend
from tests.detectors.rules.lake import CLUSTER, EMPTY, H100, at, connection
from tests.infra.examples import examples
from warehouse import queries

GPUS = [("g001", "GPU-a", 0), ("g001", None, 1), ("g002", "GPU-b", 0)]
MODELS = [H100, "NVIDIA A100-SXM4-80GB", None]
REASONS = [None, 0, 0x1, 0x4, 0x8, 0x20, 0x40, 0x80, 0x48]


def _maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values)


def health_sample(draw: st.DrawFn, ts: Any) -> dict[str, Any]:
    """A gpu_samples row of one of GPUS at `ts`, its health fields drawn (nulls included)."""
    node, uuid, index = draw(st.sampled_from(GPUS))
    return {
        "ts": ts,
        "cluster": CLUSTER,
        "node": node,
        "gpu_index": index,
        "gpu_uuid": uuid,
        "mig_instance": draw(_maybe(st.integers(1, 2))),
        "model": draw(st.sampled_from(MODELS)),
        "interval_s": float(draw(st.sampled_from([15, 30, 60]))),
        "gpu_util_pct": draw(_maybe(st.sampled_from([0.0, 5.0, 100.0]))),
        "sm_clock_mhz": draw(_maybe(st.sampled_from([900.0, 1400.0, 1980.0]))),
        "clock_event_reasons": draw(st.sampled_from(REASONS)),
        "temp_c": draw(_maybe(st.sampled_from([40.0, 85.0]))),
        "ecc_sbe_volatile": draw(_maybe(st.sampled_from([0.0, 3.0]))),
        "ecc_dbe_volatile": draw(_maybe(st.sampled_from([0.0, 1.0]))),
        "remap_pending": draw(_maybe(st.booleans())),
        "remap_failure": draw(_maybe(st.booleans())),
        "source": "test",
    }


@st.composite
def sample_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    # two hours, 5-minute times
    return [
        health_sample(draw, at(draw(st.integers(0, 23)) * 300))
        for _ in range(draw(st.integers(1, 40)))
    ]


def _max(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _min(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _any(values: list[Any]) -> bool | None:
    known = [v for v in values if v is not None]
    return any(known) if known else None


def _bits(values: list[Any]) -> int | None:
    known = [v for v in values if v is not None]
    if not known:
        return None
    out = 0
    for v in known:
        out |= v
    return out


def definition(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The hourly rows by (node, UUID, index, hour), from the definition."""
    times: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        times[(row["node"], row["gpu_uuid"], row["gpu_index"], row["ts"])].append(row)
    hours: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for (node, uuid, index, ts), same in times.items():
        merged = {
            "model": {r["model"] for r in same},
            "interval_s": _max([r["interval_s"] for r in same]),
            "reasons": _bits([r["clock_event_reasons"] for r in same]),
            "util": _max([r["gpu_util_pct"] for r in same]),
            "clock": _max([r["sm_clock_mhz"] for r in same]),
            "temp": _max([r["temp_c"] for r in same]),
            "sbe": _max([r["ecc_sbe_volatile"] for r in same]),
            "dbe": _max([r["ecc_dbe_volatile"] for r in same]),
            "pending": _any([r["remap_pending"] for r in same]),
            "failure": _any([r["remap_failure"] for r in same]),
        }
        hour = ts.replace(minute=0, second=0, microsecond=0)
        hours[(node, uuid, index, hour)].append(merged)
    out = {}
    for key, samples in hours.items():

        def has(s: dict[str, Any], mask: int) -> bool:
            return s["reasons"] is not None and s["reasons"] & mask != 0

        def busy(s: dict[str, Any]) -> bool:
            return s["util"] is not None and s["util"] > 0

        throttled = [s for s in samples if has(s, 232) and busy(s)]
        clocks = [s["clock"] for s in throttled if s["clock"] is not None]
        out[key] = {
            "models": set().union(*(s["model"] for s in samples)),
            "samples": len(samples),
            "interval_s": _max([s["interval_s"] for s in samples]),
            "thermal_samples": sum(has(s, 96) for s in samples),
            "hw_slowdown_samples": sum(has(s, 8) for s in samples),
            "power_brake_samples": sum(has(s, 128) for s in samples),
            "throttled_samples": sum(has(s, 232) for s in samples),
            "busy_samples": sum(busy(s) for s in samples),
            "throttled_busy_samples": len(throttled),
            "clock_throttled_mean": sum(clocks) / len(clocks) if clocks else None,
            "clock_busy_max": _max([s["clock"] for s in samples if busy(s)]),
            "temp_max": _max([s["temp"] for s in samples]),
            "sbe_max": _max([s["sbe"] for s in samples]),
            "dbe_min": _min([s["dbe"] for s in samples]),
            "dbe_max": _max([s["dbe"] for s in samples]),
            "remap_pending": bool(_any([s["pending"] for s in samples])),
            "remap_failure": bool(_any([s["failure"] for s in samples])),
        }
    return out


@settings(max_examples=examples(60), deadline=None)
@given(rows=sample_rows())
def test_the_hourly_rows_are_their_definition(rows):
    con = connection(EMPTY, gpu_samples=rows)
    got = queries.rows(con, health.HOURLY, since=at(0))
    want = definition(rows)

    assert len(got) == len(want)
    for row in got:
        expected = want[(row["node"], row["gpu_uuid"], row["gpu_index"], row["hour"])]
        assert row["cluster"] == CLUSTER
        models = expected.pop("models") - {None}
        assert row["model"] in models if models else row["model"] is None  # one of the hour's
        for column, value in expected.items():
            if isinstance(value, float):
                assert row[column] == pytest.approx(value), column
            else:
                assert row[column] == value, column


@st.composite
def counter_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    rows = []
    for uuid in ("GPU-a", "GPU-b"):
        times = draw(st.lists(st.integers(0, 23), min_size=1, max_size=12, unique=True))
        for t in sorted(times):
            row = {
                "ts": at(t * 300),
                "cluster": CLUSTER,
                "node": draw(st.sampled_from(["g001", "g002"])),  # moved between nodes
                "gpu_index": draw(st.sampled_from([0, None])),
                "gpu_uuid": uuid,
                "model": H100,
                "interval_s": 60.0,
                "ecc_sbe_volatile": float(draw(st.integers(0, 9))),  # up, flat or a reset
                "remap_pending": draw(_maybe(st.booleans())),
                "source": "test",
            }
            rows.append(row)
            if draw(st.booleans()):  # a MIG repeat of the device's fields
                rows.append(row | {"mig_instance": 1, "remap_pending": None})
    return rows


def counter_definition(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The hourly rows by (UUID, hour), from the definition."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for uuid in {r["gpu_uuid"] for r in rows}:
        previous = None
        for row in sorted((r for r in rows if r["gpu_uuid"] == uuid), key=lambda r: r["ts"]):
            value = row["ecc_sbe_volatile"]
            step = 0.0 if previous is None else value - previous
            new = value if step < 0 else step
            previous = value
            hour = row["ts"].replace(minute=0, second=0, microsecond=0)
            got = out.setdefault(
                (uuid, hour),
                {
                    "nodes": set(),
                    "indexes": set(),
                    "samples": 0,
                    "sbe_new": 0.0,
                    "sbe_max": value,
                    "pending": [],
                },
            )
            got["nodes"].add(row["node"])
            got["indexes"].add(row["gpu_index"])
            got["samples"] += 1
            got["sbe_new"] += new
            got["sbe_max"] = max(got["sbe_max"], value)
            got["pending"].append(row["remap_pending"])
    return out


@settings(max_examples=examples(60), deadline=None)
@given(rows=counter_rows())
def test_the_hourly_counter_steps_are_their_definition(rows):
    con = connection(EMPTY, gpu_samples=rows)
    got = queries.rows(con, health_trend.QUERY, since=at(0), precursor_xids=[63])
    want = counter_definition(rows)

    assert len(got) == len(want)
    for row in got:
        expected = want[(row["gpu_uuid"], row["hour"])]
        indexes = expected["indexes"] - {None}
        assert row["node"] in expected["nodes"]
        assert row["gpu_index"] in indexes if indexes else row["gpu_index"] is None
        assert row["samples"] == expected["samples"]
        assert row["sbe_new"] == pytest.approx(expected["sbe_new"])
        assert row["sbe_max"] == expected["sbe_max"]
        assert row["remap_pending"] == bool(_any(expected["pending"]))
        assert row["precursor_xids"] == 0
