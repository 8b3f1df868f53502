"""The marts agree with a brute-force reading of DESIGN §4 on random allocations and samples."""

from __future__ import annotations

import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.infra.examples import examples
from tests.marts import rows as r
from warehouse import queries
from warehouse.attribution import MART_ORDER, AttributionConfig
from warehouse.connection import connect, define_span_views, register_table

IDLE_BELOW = AttributionConfig().idle_below
# The marts job_usage is built from, in build order.
USAGE_MARTS = [
    (mart, query)
    for mart, query in MART_ORDER
    if mart in ("gpu_job_buckets", "job_gpu_daily", "job_usage")
]


@dataclass(frozen=True)
class Allocation:
    job_id: str
    gpu_index: int
    start: int  # seconds after T0
    end: int
    with_uuid: bool


@dataclass(frozen=True)
class Sample:
    gpu_index: int
    ts_ms: int  # milliseconds after T0
    interval_s: float
    engine_active: float | None
    gpu_util_pct: float | None


@st.composite
def lakes(draw) -> tuple[list[Allocation], list[Sample]]:
    """1-2 GPUs; on each, allocations back to back or with gaps; samples jittered, some missing."""
    allocations = []
    samples = []
    gpus = draw(st.integers(1, 2))
    for gpu_index in range(gpus):
        t = draw(st.integers(0, 60))
        for _ in range(draw(st.integers(0, 3))):
            gap = draw(st.sampled_from([0, 0, 30, draw(st.integers(1, 200))]))
            length = draw(st.integers(20, 300))
            allocations.append(
                Allocation(
                    job_id=draw(st.sampled_from("abcd")),
                    gpu_index=gpu_index,
                    start=t + gap,
                    end=t + gap + length,
                    with_uuid=draw(st.booleans()),
                )
            )
            t += gap + length
        interval_s = draw(st.sampled_from([10.0, 30.0]))
        half = int(interval_s * 1000) // 2 - 1
        for k in range(int((t + 60) // interval_s) + 1):
            if draw(st.integers(0, 9)) < 2:  # ~20 % of samples missing
                continue
            samples.append(
                Sample(
                    gpu_index=gpu_index,
                    ts_ms=int(k * interval_s * 1000) + draw(st.integers(-half, half) | st.just(0)),
                    interval_s=interval_s,
                    engine_active=draw(st.sampled_from([None, 0.0, 0.005, 0.3, 1.0])),
                    gpu_util_pct=draw(st.sampled_from([None, 0.0, 0.5, 40.0])),
                )
            )
    return allocations, samples


def f32(value: float | None) -> float | None:
    """The value as the lake stores it (float32), read back as a Python float."""
    return None if value is None else float(np.float32(value))


def brute_force(
    allocations: list[Allocation], samples: list[Sample]
) -> dict[str, tuple[float, float, float]]:
    """job_id -> (alloc_gpu_h, observed_gpu_h, idle_gpu_h), straight from DESIGN §4."""
    alloc_s: dict[str, float] = defaultdict(float)
    per_job_gpu: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for a in allocations:
        per_job_gpu[(a.job_id, a.gpu_index)].append((a.start, a.end))
    for (job_id, _), intervals in per_job_gpu.items():  # union of each job's intervals per GPU
        covered_end = None
        for start, end in sorted(intervals):
            if covered_end is None or start > covered_end:
                alloc_s[job_id] += end - start
                covered_end = end
            elif end > covered_end:
                alloc_s[job_id] += end - covered_end
                covered_end = end
    observed_s: dict[str, float] = defaultdict(float)
    idle_s: dict[str, float] = defaultdict(float)
    for gpu_index in {s.gpu_index for s in samples}:
        series = sorted((s for s in samples if s.gpu_index == gpu_index), key=lambda s: s.ts_ms)
        for i, s in enumerate(series):
            # A sample stands for [ts, next ts) if the next comes within 2 × interval,
            # else for its interval (the rest is unobserved).
            step_ms = series[i + 1].ts_ms - s.ts_ms if i + 1 < len(series) else None
            if step_ms is not None and step_ms <= 2 * s.interval_s * 1000:
                span = step_ms / 1000
            else:
                span = s.interval_s
            # It belongs to the job whose interval [start, end) on this GPU contains ts.
            owners = [
                a.job_id
                for a in allocations
                if a.gpu_index == gpu_index and a.start * 1000 <= s.ts_ms < a.end * 1000
            ]
            if not owners:
                continue
            owner = min(owners)
            # ... and stands for no time past the end of that job's allocation
            end = max(
                a.end
                for a in allocations
                if a.job_id == owner
                and a.gpu_index == gpu_index
                and a.start * 1000 <= s.ts_ms < a.end * 1000
            )
            span = min(span, end - s.ts_ms / 1000)
            observed_s[owner] += span
            engine, util = f32(s.engine_active), f32(s.gpu_util_pct)
            busy = engine if engine is not None else (util / 100 if util is not None else None)
            if busy is not None and busy < IDLE_BELOW:
                idle_s[owner] += span
    return {
        job_id: (alloc_s[job_id] / 3600, observed_s[job_id] / 3600, idle_s[job_id] / 3600)
        for job_id in alloc_s
    }


@pytest.fixture(scope="module")
def shared_con(tmp_path_factory):
    """One connection for every example (opening one costs more than the rest of an example)."""
    con = connect(tmp_path_factory.mktemp("empty"))
    define_span_views(con)  # gpu_job_buckets' SQL reads them, as in the per-day pass
    yield con
    con.close()


def job_usage(con, root: Path, sample_rows, allocation_rows) -> dict[str, tuple[float, ...]]:
    """Land the rows at `root`, attribute them, and run the mart SQL up to job_usage on `con`.

    The marts are the same queries `build_marts` runs, held as views instead of landed.
    """
    r.land(root, "gpu_samples", sample_rows)
    r.land(root, "job_gpus", allocation_rows)
    for table in ("gpu_samples", "job_gpus"):
        register_table(con, root, table)
    results = []  # the views read these Arrow tables: keep them alive until done
    config = AttributionConfig()
    for mart, query in USAGE_MARTS:
        results.append(queries.run_arrow(con, query, **config.params(query, con)))
        con.from_arrow(results[-1]).create_view(mart, replace=True)
    return {
        row["job_id"]: (row["alloc_gpu_h"], row["observed_gpu_h"], row["idle_gpu_h"])
        for row in r.fetch(con, "SELECT * FROM job_usage")
    }


@settings(max_examples=examples(25), deadline=None)
@given(lake=lakes())
def test_job_usage_matches_a_brute_force_reading_of_the_definitions(shared_con, lake):
    allocations, samples = lake
    sample_rows = [
        row
        for s in samples
        for row in r.samples(
            [s.ts_ms / 1000],
            gpu_index=s.gpu_index,
            interval_s=s.interval_s,
            engine_active=s.engine_active,
            gpu_util_pct=s.gpu_util_pct,
        )
    ]
    allocation_rows = [
        r.job_gpu(a.job_id, a.start, a.end, gpu_index=a.gpu_index, with_uuid=a.with_uuid)
        for a in allocations
    ]
    with tempfile.TemporaryDirectory() as folder:
        got = job_usage(shared_con, Path(folder), sample_rows, allocation_rows)

    expected = brute_force(allocations, samples)
    assert got.keys() == expected.keys()
    for job_id, values in expected.items():
        assert got[job_id] == pytest.approx(values, abs=1e-9), job_id
