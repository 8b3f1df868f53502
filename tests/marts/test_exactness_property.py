"""Every mart equals a brute-force Python reading of DESIGN §4, on random lakes that cross
midnight (so the per-day partitions and their seams are exercised), built by the real pipeline.

Allocations: back-to-back jobs, gaps, overlapping steps of one job, running jobs (no end), MIG
instances, allocations without a UUID, a second job sharing a GPU (whose allocated time is then
split between the jobs holding it). Samples: jitter, lost
scrapes, exact duplicates, GPUs whose samples carry no UUID, shared GPUs reported one row per
sharer (each carrying its job) or one unlabelled row, landed out of order in several batches.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.infra.examples import examples
from tests.marts import rows as r
from warehouse.attribution import AttributionConfig, build_marts
from warehouse.connection import connect

IDLE_BELOW = AttributionConfig().idle_below
BASE_S = 86400 - 240  # four minutes before midnight: every lake spans two UTC days


@dataclass(frozen=True)
class Slot:
    """A GPU or MIG instance, and whether its samples carry the UUID."""

    node: str
    gpu_index: int
    mig_instance: int | None
    sample_uuid: bool

    @property
    def device(self) -> str:
        return (
            r.uuid_of(self.node, self.gpu_index)
            if self.sample_uuid
            else f"{self.node}/{self.gpu_index}"
        )


SLOTS = (
    Slot("g001", 0, None, True),
    Slot("g001", 1, None, False),  # samples without UUID: matched by node and index
    Slot("g002", 0, 1, True),  # two MIG instances of one GPU, sampled together
    Slot("g002", 0, 2, True),
)


@dataclass(frozen=True)
class Allocation:
    job_id: str
    slot: Slot
    start: float  # seconds after T0
    end: float | None  # None: still running
    with_uuid: bool


@dataclass(frozen=True)
class Sample:
    slot: Slot
    ts_ms: int  # milliseconds after T0
    interval_s: float
    engine_active: float | None
    gpu_util_pct: float | None
    job_id: str | None = None  # the sharer this row reports for, as its source stamped it


@st.composite
def lakes(draw) -> tuple[list[Allocation], list[Sample], int]:
    allocations: list[Allocation] = []
    samples: list[Sample] = []
    slots = draw(st.lists(st.sampled_from(SLOTS[:3]), min_size=1, max_size=3, unique=True))
    if SLOTS[2] in slots:
        slots.append(SLOTS[3])
    mig_times: list[tuple[int, float]] | None = None
    for slot in slots:
        t = BASE_S + draw(st.integers(0, 60))
        uuid_of_job: dict[str, bool] = {}
        for _ in range(draw(st.integers(0, 3))):
            job_id = draw(st.sampled_from("abcd"))
            with_uuid = uuid_of_job.setdefault(job_id, draw(st.booleans()))
            gap = draw(st.sampled_from([0, 0, 30, draw(st.integers(1, 200))]))
            length = draw(st.integers(20, 300))
            allocations.append(Allocation(job_id, slot, t + gap, t + gap + length, with_uuid))
            if draw(st.integers(0, 4)) == 0:  # a second step of the same job, overlapping
                back = draw(st.integers(0, length))
                allocations.append(
                    Allocation(
                        job_id, slot, t + gap + length - back, t + gap + length + 40, with_uuid
                    )
                )
                length += 40
            t += gap + length
        if allocations and allocations[-1].slot == slot and draw(st.booleans()):
            last = allocations.pop()  # the last job is still running
            allocations.append(Allocation(last.job_id, slot, last.start, None, last.with_uuid))
        if draw(st.booleans()):  # job e shares the GPU (MPS, time-slicing) a while
            start = BASE_S + draw(st.integers(0, 400))
            allocations.append(
                Allocation(
                    "e", slot, start, start + draw(st.integers(30, 300)), draw(st.booleans())
                )
            )
        if slot.mig_instance == 2 and mig_times is not None:
            times = mig_times  # both instances of one GPU report at the same times
        else:
            interval_s = draw(st.sampled_from([10.0, 30.0]))
            half = int(interval_s * 1000) // 2 - 1
            times = []
            for k in range(int((t - BASE_S + 60) // interval_s) + 1):
                if draw(st.integers(0, 9)) < 2:  # ~20 % of scrapes lost
                    continue
                jitter = draw(st.integers(-half, half) | st.just(0))
                times.append((int((BASE_S + k * interval_s) * 1000) + jitter, interval_s))
            if slot.mig_instance == 1:
                mig_times = times
        per_sharer = draw(st.booleans())  # the exporter's one series per sharer, or one row
        for ts_ms, interval_s in times:
            sharers = sorted(set(owners_of(slot, ts_ms, allocations)))
            for job_id in sharers if per_sharer and len(sharers) > 1 else [None]:
                sample = Sample(
                    slot,
                    ts_ms,
                    interval_s,
                    draw(st.sampled_from([None, 0.0, 0.005, 0.3, 1.0])),
                    draw(st.sampled_from([None, 0.0, 0.5, 1.0, 40.0])),  # 1 % is the idle line
                    job_id,
                )
                samples.append(sample)
                if draw(st.integers(0, 19)) == 0:
                    samples.append(sample)  # an exact duplicate
    batches = draw(st.integers(1, 3))
    return allocations, draw(st.permutations(samples)), batches


def f32(value: float | None) -> float | None:
    """The value as the lake stores it (float32), read back as a Python float."""
    return None if value is None else float(np.float32(value))


def owners_of(slot: Slot, ts_ms: int, allocations: list[Allocation]) -> list[str]:
    """Jobs whose interval on this GPU (and MIG instance) contains `ts_ms` (DESIGN §4)."""
    found = []
    for a in allocations:
        same_gpu = a.slot.node == slot.node and a.slot.gpu_index == slot.gpu_index
        same_instance = a.slot.mig_instance in (None, slot.mig_instance)
        if (
            same_gpu
            and same_instance
            and a.start * 1000 <= ts_ms
            and (a.end is None or ts_ms < a.end * 1000)
        ):
            found.append(a.job_id)
    return found


def owner_end(job_id: str, slot: Slot, ts_ms: int, allocations: list[Allocation]) -> float | None:
    """The end of `job_id`'s allocation on this GPU containing `ts_ms` (the latest, where its
    steps overlap; None while one runs): its samples stand for no time past it (DESIGN §4)."""
    ends = [
        a.end
        for a in allocations
        if a.job_id == job_id
        and a.slot.node == slot.node
        and a.slot.gpu_index == slot.gpu_index
        and a.slot.mig_instance in (None, slot.mig_instance)
        and a.start * 1000 <= ts_ms
        and (a.end is None or ts_ms < a.end * 1000)
    ]
    return None if None in ends else max(ends)


def owners(s: Sample, allocations: list[Allocation]) -> list[str | None]:
    """The jobs a row belongs to: the sharer it carries if that job claims it, else every job
    that claims it (one unlabelled row on a shared GPU stands once for each), else none."""
    claims = owners_of(s.slot, s.ts_ms, allocations)
    if s.job_id in claims:
        return [s.job_id]
    return sorted(set(claims)) or [None]


@dataclass(frozen=True)
class Part:
    """One job's (or no job's) part of one device at one sample time."""

    sample: Sample  # its row (duplicates are exact copies)
    rows: int  # rows it reported, duplicates included
    span: float  # the device's span, in seconds
    sharers: int  # distinct owners at this time (no job counts as one)
    share: float  # 1 / the MIG instances of the GPU reporting at this time


def parts(allocations: list[Allocation], samples: list[Sample]) -> dict[str | None, list[Part]]:
    """Per owner, its parts of every device time: the device's span (to its next sample time
    if that comes within 2 × interval_s, else interval_s; never past the owner's allocation
    end) split among the distinct owners."""
    instances: dict[tuple, set] = defaultdict(set)
    for s in samples:
        if s.slot.mig_instance is not None:
            instances[(s.slot.device, s.ts_ms)].add(s.slot.mig_instance)
    series: dict[tuple, dict[int, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        series[(s.slot.device, s.slot.mig_instance)][s.ts_ms].append(s)
    found: dict[str | None, list[Part]] = defaultdict(list)
    for points in series.values():
        times = sorted(points)
        for i, ts_ms in enumerate(times):
            rows = points[ts_ms]
            step = (times[i + 1] - ts_ms) / 1000 if i + 1 < len(times) else None
            span = step if step is not None and step <= 2 * rows[0].interval_s else None
            by_owner: dict[str | None, list[Sample]] = defaultdict(list)
            for s in rows:
                for job_id in owners(s, allocations):
                    by_owner[job_id].append(s)
            for job_id, own in by_owner.items():
                mig = rows[0].slot.mig_instance
                share = 1.0 if mig is None else 1 / len(instances[(rows[0].slot.device, ts_ms)])
                # rows of one owner at one time are exact duplicates: one row's interval
                interval = f32(own[0].interval_s) if span is None else span
                end = None if job_id is None else owner_end(job_id, own[0].slot, ts_ms, allocations)
                if end is not None:
                    interval = min(interval, max(end - ts_ms / 1000, 0.0))
                found[job_id].append(Part(own[0], len(own), interval, len(by_owner), share))
    return found


def held(allocations: list[Allocation], samples: list[Sample]) -> dict[tuple, list[tuple]]:
    """Per device (node, GPU index, MIG instance): (job, start, end) of each allocation on it,
    an allocation still running held to the data's end (nothing where there is no data)."""
    data_end = max((s.ts_ms / 1000 + f32(s.interval_s) for s in samples), default=None)
    found: dict[tuple, list[tuple]] = defaultdict(list)
    for a in allocations:
        end = a.end if a.end is not None else (data_end if data_end is not None else a.start)
        device = (a.slot.node, a.slot.gpu_index, a.slot.mig_instance)
        found[device].append((a.job_id, a.start, max(a.start, end)))
    return found


def union_s(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals."""
    total, covered = 0.0, None
    for start, end in sorted(intervals):
        if covered is None or start > covered:
            total += end - start
            covered = end
        elif end > covered:
            total += end - covered
            covered = end
    return total


def split_alloc(allocations: list[Allocation], samples: list[Sample]) -> tuple[dict, set]:
    """Per job its allocated seconds, and the jobs whose allocation was split: on each device,
    every stretch between two consecutive starts or ends goes in equal parts to the distinct
    jobs holding the device over it (a job's own overlapping steps hold it once)."""
    alloc_s: dict[str, float] = defaultdict(float)
    split: set[str] = set()
    for intervals in held(allocations, samples).values():
        for job_id, _, _ in intervals:
            alloc_s[job_id] += 0.0
        times = sorted({t for _, start, end in intervals for t in (start, end)})
        for lo, hi in zip(times, times[1:], strict=False):
            jobs = {job_id for job_id, start, end in intervals if start <= lo and hi <= end}
            for job_id in jobs:
                alloc_s[job_id] += (hi - lo) / len(jobs)
            if len(jobs) > 1:
                split |= jobs
    return alloc_s, split


def brute_force(allocations: list[Allocation], samples: list[Sample]) -> tuple[dict, dict]:
    """Per job (alloc, observed, active, idle, effective GPU-h, samples, shared); per day
    observed GPU-h, a span that runs past midnight cut there. A shared GPU's span, and its
    allocated time, go to its sharers in equal parts (DESIGN §4)."""
    alloc_s, split = split_alloc(allocations, samples)
    used: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0])
    daily: dict[dt.date, float] = defaultdict(float)
    shared: set[str] = set(split)
    for job_id, found in parts(allocations, samples).items():
        if job_id is None:
            continue
        for part in found:
            s = part.sample
            span = part.span / part.sharers
            row = used[job_id]
            engine, util = f32(s.engine_active), f32(s.gpu_util_pct)
            busy = engine if engine is not None else (util / 100 if util is not None else None)
            idle = busy is not None and busy < IDLE_BELOW
            row[0] += span
            row[1] += 0 if idle else span
            row[2] += span if idle else 0
            row[3] += (busy or 0.0) * span
            row[4] += part.rows
            # the day's part of the span: what runs past midnight counts on the next day
            ts = s.ts_ms / 1000
            midnight = (ts // 86400 + 1) * 86400
            past = max(ts + part.span - midnight, 0.0) / part.sharers
            daily[r.at(ts).date()] += span - past
            daily[r.at(midnight).date()] += past
            if part.sharers > 1:
                shared.add(job_id)
    jobs = {
        job_id: (
            alloc_s[job_id] / 3600,
            *(value / 3600 for value in used[job_id][:4]),
            used[job_id][4],
            job_id in shared,
        )
        for job_id in set(alloc_s) | set(used)
    }
    return jobs, {day: seconds / 3600 for day, seconds in daily.items()}


def land(root: Path, allocations: list[Allocation], samples: list[Sample], batches: int) -> None:
    sample_rows = []
    for s in samples:
        [row] = r.samples(
            [s.ts_ms / 1000],
            job_id=s.job_id,
            node=s.slot.node,
            gpu_index=s.slot.gpu_index,
            interval_s=s.interval_s,
            engine_active=s.engine_active,
            gpu_util_pct=s.gpu_util_pct,
            mig_instance=s.slot.mig_instance,
        )
        row["gpu_uuid"] = row["gpu_uuid"] if s.slot.sample_uuid else None
        sample_rows.append(row)
    for b in range(batches):  # out of order, in several files per day
        r.land(root, "gpu_samples", sample_rows[b::batches], batch_id=f"b{b}")
    r.land(
        root,
        "job_gpus",
        [
            r.job_gpu(
                a.job_id,
                a.start,
                a.end,
                node=a.slot.node,
                gpu_index=a.slot.gpu_index,
                with_uuid=a.with_uuid,
                mig_instance=a.slot.mig_instance,
            )
            for a in allocations
        ],
    )


@settings(
    max_examples=examples(20, check=2),  # each example builds a lake (~0.6 s)
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(lake=lakes())
def test_every_mart_matches_a_brute_force_reading_of_the_definitions(lake):
    allocations, samples, batches = lake
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        land(root, allocations, samples, batches)
        con = connect(root)
        build_marts(con, root, AttributionConfig())
        usage = {row["job_id"]: row for row in r.fetch(con, "SELECT * FROM job_usage")}
        device_alloc = r.fetch(
            con,
            "SELECT device, sum((end_e - start_e) * gpus * share) AS s FROM job_gpu_shares "
            "GROUP BY device",
        )
        device_intervals = r.fetch(con, "SELECT device, start_e, end_e FROM job_gpu_intervals")
        daily = r.fetch(
            con,
            "SELECT date, sum(observed_gpu_h) AS h, sum(alloc_gpu_h) AS alloc FROM usage_daily "
            "GROUP BY date",
        )
        [(occupancy_h,)] = con.sql(
            "SELECT coalesce(sum(gpus_allocated * (least(epoch(bucket) + 300, e) "
            "- greatest(epoch(bucket), f)) / 3600), 0) FROM cluster_occupancy, "
            "(SELECT min(first_e) AS f, max(last_end_e) AS e FROM gpu_job_buckets)"
        ).fetchall()

    jobs, per_day = brute_force(allocations, samples)
    assert usage.keys() == jobs.keys()
    for job_id, (alloc, observed, active, idle, effective, count, shared) in jobs.items():
        row = usage[job_id]
        got = (row["alloc_gpu_h"], row["observed_gpu_h"], row["active_gpu_h"], row["idle_gpu_h"])
        assert got == pytest.approx((alloc, observed, active, idle), abs=1e-9), job_id
        assert row["effective_gpu_h"] == pytest.approx(effective, abs=1e-6), job_id
        assert row["samples"] == count, job_id
        assert row["shared"] == shared, job_id
    got_days = {row["date"]: row["h"] for row in daily if row["h"]}
    assert got_days == pytest.approx({d: h for d, h in per_day.items() if h}, abs=1e-9)
    for row in daily:  # no day's observed time exceeds what the jobs held that day
        assert row["h"] <= row["alloc"] + 1e-9, row
    # the jobs' allocated time on a device never exceeds the union of their intervals there
    # (the device's own time): it is that union, split
    unions: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for row in device_intervals:
        unions[row["device"]].append((row["start_e"], row["end_e"]))
    for row in device_alloc:
        assert row["s"] <= union_s(unions[row["device"]]) + 1e-6, row["device"]
        assert row["s"] == pytest.approx(union_s(unions[row["device"]]), abs=1e-6)
    total_union = sum(
        union_s([(start, end) for _, start, end in intervals])
        for intervals in held(allocations, samples).values()
    )
    assert sum(row["alloc_gpu_h"] for row in usage.values()) <= total_union / 3600 + 1e-9
    # occupancy: over all buckets, the allocated GPU-hours are the owned samples' spans, each
    # MIG instance counted as its share of one GPU, each shared GPU once
    assert occupancy_h == pytest.approx(allocated_gpu_h(allocations, samples), abs=1e-9)


def allocated_gpu_h(allocations: list[Allocation], samples: list[Sample]) -> float:
    """Σ span × share of every owned device time, in GPU-hours (share: 1 / MIG instances
    reporting at that ts), each physical GPU counted once however many jobs share it."""
    found = parts(allocations, samples)
    owned = (p for job_id, items in found.items() if job_id is not None for p in items)
    return sum(p.span / p.sharers * p.share for p in owned) / 3600
