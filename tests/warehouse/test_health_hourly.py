"""The stored health hours (warehouse/health_hourly.py) are the hourly health query's rows over
the lake's samples as they are now, and a refresh computes only the days whose files changed.

Hypothesis draws samples of a few GPUs over three days (hours on both sides of midnight, MIG
instances, duplicate landings, nulls in every field, models changing), landed in a real lake in
several batches; after a refresh, the stored rows read by the rules' stored query equal
sql/detectors/gpu_health_hourly.sql run over every sample, and so do the health rules' findings.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.rules import RuleConfig, health
from detectors.rules.base import EPOCH, Window
from detectors.rules.run import detect_frame
from detectors.rules.thresholds import HealthThresholds
from tests.detectors.rules.lake import table
from tests.infra.examples import examples
from warehouse import layout, queries
from warehouse.connection import WarehouseConfig, connect
from warehouse.health_hourly import TABLE, refresh_health_hourly
from warehouse.writer import write_batch

T0 = dt.datetime(2026, 3, 1, 22, tzinfo=dt.UTC)  # 22:00: the draws reach into two more days
CLUSTER = "della"
GPUS = [("g001", "GPU-a", 0), ("g001", None, 1), ("g002", "GPU-b", 0)]
MODELS = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", None]
REASONS = [None, 0, 0x1, 0x8, 0x20, 0x40, 0x80, 0x48]
STORED = "detectors/gpu_health_hourly_stored"


def _maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values)


@st.composite
def batches(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """Batches of sample rows (each landed as one file per day it spans)."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        rows = []
        for _ in range(draw(st.integers(1, 25))):
            node, uuid, index = draw(st.sampled_from(GPUS))
            util = draw(_maybe(st.sampled_from([0.0, 5.0, 100.0])))
            rows.append(
                {
                    # 28 hours from 22:00 in 20-minute steps: three days, two midnights
                    "ts": T0 + dt.timedelta(minutes=20 * draw(st.integers(0, 83))),
                    "cluster": CLUSTER,
                    "node": node,
                    "gpu_index": index,
                    "gpu_uuid": uuid,
                    "mig_instance": draw(_maybe(st.integers(1, 2))),
                    "model": draw(st.sampled_from(MODELS)),
                    "interval_s": float(draw(st.sampled_from([15, 30, 60]))),
                    "gpu_util_pct": util,
                    "sm_clock_mhz": draw(_maybe(st.sampled_from([900.0, 1400.0, 1980.0]))),
                    "clock_event_reasons": draw(st.sampled_from(REASONS)),
                    "temp_c": draw(_maybe(st.sampled_from([40.0, 85.0]))),
                    "ecc_sbe_volatile": draw(_maybe(st.sampled_from([0, 3]))),
                    "ecc_dbe_volatile": draw(_maybe(st.sampled_from([0, 1]))),
                    "remap_pending": draw(_maybe(st.booleans())),
                    "remap_failure": draw(_maybe(st.booleans())),
                    "source": "test",
                }
            )
        out.append(rows)
    return out


def _land(root: Path, drawn: list[list[dict[str, Any]]]) -> None:
    for n, rows in enumerate(drawn):
        write_batch(root, "gpu_samples", table("gpu_samples", rows), f"batch-{n}")


def _sorted(frame: pl.DataFrame) -> list[dict[str, Any]]:
    keys = ["cluster", "node", "gpu_uuid", "gpu_index", "hour"]
    return frame.sort(keys, nulls_last=True).to_dicts()


def _whole_and_stored(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    con = connect(root)
    try:
        whole = queries.run(con, health.HOURLY, since=EPOCH)
        stored = queries.run(con, STORED, since=EPOCH)
    finally:
        con.close()
    return _sorted(whole), _sorted(stored)


def _same(stored: list[dict[str, Any]], whole: list[dict[str, Any]]) -> None:
    assert len(stored) == len(whole)
    for mine, theirs in zip(stored, whole, strict=True):
        # (a mean: the same samples' sum, perhaps taken in another order)
        mean, expected = mine.pop("clock_throttled_mean"), theirs.pop("clock_throttled_mean")
        assert mine == theirs
        assert mean == expected or mean == pytest.approx(expected, rel=1e-12)


@settings(max_examples=examples(15), deadline=None)
@given(drawn=batches())
def test_the_stored_hours_are_the_hourly_query_over_every_sample(tmp_path_factory, drawn):
    root = tmp_path_factory.mktemp("lake")
    _land(root, drawn)

    done = refresh_health_hourly(WarehouseConfig(root))

    days = {layout.partition_key(p) for p in layout.table_files(root, "gpu_samples")}
    assert set(done.built) == days
    whole, stored = _whole_and_stored(root)
    _same(stored, whole)
    # the rules read the same rows: the same findings from the stored hours as from the samples
    # (thresholds low enough that a drawn hour can make a finding)
    config = RuleConfig(health=HealthThresholds(throttle_min_share=0.01, throttle_min_hours=0.0))
    window = Window(now=T0 + dt.timedelta(days=3))
    con = connect(root)
    try:
        found = [
            detect_frame(con, config, window, health.RULES, stored=stored).sort("subject_id")
            for stored in (False, True)
        ]
    finally:
        con.close()
    assert found[0].drop("evidence").equals(found[1].drop("evidence"))


def _rows(day: int, hour: int, gpu: tuple[str, str | None, int] = GPUS[0]) -> list[dict[str, Any]]:
    node, uuid, index = gpu
    start = dt.datetime(2026, 3, day, hour, tzinfo=dt.UTC)
    return [
        {
            "ts": start + dt.timedelta(minutes=minute),
            "cluster": CLUSTER,
            "node": node,
            "gpu_index": index,
            "gpu_uuid": uuid,
            "model": MODELS[0],
            "interval_s": 30.0,
            "gpu_util_pct": 100.0,
            "sm_clock_mhz": 1400.0,
            "clock_event_reasons": 0x20,
            "source": "test",
        }
        for minute in range(0, 60, 10)
    ]


def test_a_refresh_computes_only_the_days_whose_files_changed(tmp_path):
    root = tmp_path / "lake"
    for day in (1, 2, 3):
        write_batch(root, "gpu_samples", table("gpu_samples", _rows(day, 12)), f"day-{day}")
    config = WarehouseConfig(root)
    first = refresh_health_hourly(config)
    assert len(first.built) == 3 and first.unchanged == 0

    again = refresh_health_hourly(config)
    assert again.built == () and again.removed == () and again.unchanged == 3

    # a late landing on day 2 (another GPU, another hour): that day alone is computed again
    write_batch(root, "gpu_samples", table("gpu_samples", _rows(2, 15, GPUS[2])), "late")
    late = refresh_health_hourly(config)
    assert [day for _, day in late.built] == [dt.date(2026, 3, 2)] and late.unchanged == 2
    whole, stored = _whole_and_stored(root)
    _same(stored, whole)
    assert len(stored) == 4
    # one file a partition, named by what it was computed from
    day2 = layout.partition_files(root, TABLE, (CLUSTER, dt.date(2026, 3, 2)))
    assert len(day2) == 1

    # day 1's samples pruned: its hours go with them
    shutil.rmtree(layout.partition_dir(root, "gpu_samples", CLUSTER, dt.date(2026, 3, 1)))
    pruned = refresh_health_hourly(config)
    assert [day for _, day in pruned.removed] == [dt.date(2026, 3, 1)] and pruned.built == ()
    whole, stored = _whole_and_stored(root)
    _same(stored, whole)
    assert {row["hour"].day for row in stored} == {2, 3}


def test_a_window_not_on_the_hour_reads_the_samples(tmp_path):
    root = tmp_path / "lake"
    write_batch(root, "gpu_samples", table("gpu_samples", _rows(1, 12)), "day-1")
    refresh_health_hourly(WarehouseConfig(root))
    # the stored hour 12:00 holds samples before 12:30; from the samples, only those after
    since = dt.datetime(2026, 3, 1, 12, 30, tzinfo=dt.UTC)
    window = Window(now=since + dt.timedelta(days=1), since=since)
    con = connect(root)
    try:
        stored = queries.run(con, STORED, since=since)
        whole = queries.run(con, health.HOURLY, since=since)
        found = detect_frame(con, RuleConfig(), window, health.RULES, stored=True)
        direct = detect_frame(con, RuleConfig(), window, health.RULES)
    finally:
        con.close()
    assert stored["samples"].to_list() == [] and whole["samples"].to_list() == [3]
    assert found.equals(direct)
