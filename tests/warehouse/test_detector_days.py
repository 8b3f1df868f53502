"""What detect keeps of the samples a day at a time (warehouse/detector_days.py) gives what the
queries give over the lake's samples as they are now, and a refresh computes only the days whose
inputs changed.

Health hours: Hypothesis draws samples of a few GPUs over three days (hours on both sides of
midnight, MIG instances, duplicate landings, nulls in every field, models changing), landed in a
real lake in several batches; after a refresh, the stored rows read by the rules' stored query
equal sql/detectors/gpu_health_hourly.sql run over every sample, and so do the health rules'
findings. Bottleneck sums: jobs one after the other on three GPUs across two midnights (a burst
may start at a day's first sample after a gap at the day before's last), a whole-node job with
a GPU naming neither UUID nor index; each job's signals from the stored days equal those from
every owned sample.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.bottleneck import BottleneckThresholds, device_params, diagnose
from detectors.rules import RuleConfig, health, health_trend
from detectors.rules.base import EPOCH, Window
from detectors.rules.run import detect_frame
from detectors.rules.thresholds import HealthThresholds, HealthTrendThresholds
from tests.detectors.rules.lake import table
from tests.detectors.rules.test_health_sql_property import GPUS, MODELS, health_sample
from tests.infra.examples import examples
from tests.marts import rows as r
from warehouse import layout, queries
from warehouse.connection import WarehouseConfig, connect
from warehouse.detector_days import (
    BOTTLENECK_DEVICES,
    ECC_HOURS,
    HEALTH_HOURS,
    Refreshed,
    refresh,
)
from warehouse.writer import write_batch

T0 = dt.datetime(2026, 3, 1, 22, tzinfo=dt.UTC)  # 22:00: the draws reach into two more days
CLUSTER = "della"
STORED = "detectors/gpu_health_hourly_stored"
TABLE = HEALTH_HOURS.table


def refresh_health_hourly(config: WarehouseConfig) -> Refreshed:
    return refresh(config, HEALTH_HOURS, {"since": EPOCH})


@st.composite
def batches(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """Batches of sample rows (each landed as one file per day it spans)."""
    # 28 hours from 22:00 in 20-minute steps: three days, two midnights
    return [
        [
            health_sample(draw, T0 + dt.timedelta(minutes=20 * draw(st.integers(0, 83))))
            for _ in range(draw(st.integers(1, 25)))
        ]
        for _ in range(draw(st.integers(1, 3)))
    ]


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
    assert again.built == () and again.removed == 0 and again.unchanged == 3

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
    assert pruned.removed == 1 and pruned.built == () and pruned.outside == ()
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


@st.composite
def counters(draw: st.DrawFn) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """Corrected-ECC counters of two GPUs every 20 minutes over three days from 22:00 (times
    drawn: gaps across an hour and a midnight; values up, flat or reset; MIG repeats; another
    source's row of a time with another count; moves between nodes; an index or none), landed
    in batches, and precursor XIDs."""
    batches: list[list[dict[str, Any]]] = [[] for _ in range(draw(st.integers(1, 3)))]
    for uuid in ("GPU-a", "GPU-b"):
        times = draw(st.lists(st.integers(0, 83), min_size=1, max_size=30, unique=True))
        for t in sorted(times):
            row = {
                "ts": T0 + dt.timedelta(minutes=20 * t),
                "cluster": CLUSTER,
                "node": draw(st.sampled_from(["g001", "g002"])),
                "gpu_index": draw(st.sampled_from([0, None])),
                "gpu_uuid": uuid,
                "model": MODELS[0],
                "interval_s": 60.0,
                "ecc_sbe_volatile": draw(st.sampled_from([None, *range(0, 40, 3)])),
                "remap_pending": draw(st.sampled_from([None, False, True])),
                "source": "test",
            }
            batch = batches[draw(st.integers(0, len(batches) - 1))]
            batch.append(row)
            repeat = draw(st.sampled_from(["none", "mig", "other"]))
            if repeat == "mig":  # a MIG repeat of the device's fields
                batch.append(row | {"mig_instance": 1, "remap_pending": None})
            elif repeat == "other":  # another source's row of that time, with another count
                count = draw(st.sampled_from([None, *range(0, 40, 3)]))
                batch.append(row | {"ecc_sbe_volatile": count, "source": "other"})
    xids = [
        {
            "cluster": CLUSTER,
            "node": "g001",
            "gpu_uuid": draw(st.sampled_from(["GPU-a", "GPU-c"])),
            "gpu_index": 0,
            "ts": T0 + dt.timedelta(minutes=draw(st.integers(0, 28 * 60))),
            "kind": "xid",
            "code": draw(st.sampled_from([63, 79])),
        }
        for _ in range(draw(st.integers(0, 3)))
    ]
    return [b for b in batches if b], xids


@settings(max_examples=examples(15), deadline=None)
@given(drawn=counters(), since_h=st.sampled_from([None, 1, 2, 5, 26]))
def test_the_stored_ecc_hours_give_the_trend_querys_rows_over_every_sample(
    tmp_path_factory, drawn, since_h
):
    batches, xids = drawn
    root = tmp_path_factory.mktemp("lake")
    _land(root, batches)
    write_batch(root, "gpu_events", table("gpu_events", xids), "events")
    done = refresh(WarehouseConfig(root), ECC_HOURS, {})
    assert set(done.built) == {
        layout.partition_key(p) for p in layout.table_files(root, "gpu_samples")
    }
    # from the start, or from an hour within the data (its first sample then has no step)
    since = EPOCH if since_h is None else T0 + dt.timedelta(hours=since_h)
    params = {"since": since, "precursor_xids": list(health_trend.PRECURSOR_XIDS)}
    # thresholds low enough that a drawn climb warns
    config = RuleConfig(
        health_trend=HealthTrendThresholds(
            window_h=2, min_errors=1, baseline_mads=0.0, min_active_hours=1, accel_ratio=1.0
        )
    )
    window = Window(now=T0 + dt.timedelta(days=3), since=since)
    con = connect(root)
    try:
        whole = queries.run(con, health_trend.QUERY, **params)
        stored = queries.run(con, health_trend.QUERY_STORED, **params)
        found = [
            detect_frame(con, config, window, health_trend.RULES, stored=stored)
            for stored in (False, True)
        ]
    finally:
        con.close()
    keys = ["cluster", "gpu_uuid", "hour"]
    assert stored.sort(keys).to_dicts() == whole.sort(keys).to_dicts()
    assert found[0].sort("subject_id").equals(found[1].sort("subject_id"))


def test_the_ecc_step_into_a_day_comes_from_the_day_before(tmp_path):
    root = tmp_path / "lake"
    # 5 errors by 23:50, 8 by 00:10 (3 new, counted at 00:00), reset to 2 at 00:40 (2 new)
    counter = [(dt.datetime(2026, 3, 1, 23, 50), 5), (dt.datetime(2026, 3, 2, 0, 10), 8),
               (dt.datetime(2026, 3, 2, 0, 40), 2)]  # fmt: skip
    for n, (ts, sbe) in enumerate(counter):
        row = _rows(1, 12)[0] | {"ts": ts.replace(tzinfo=dt.UTC), "ecc_sbe_volatile": sbe}
        write_batch(root, "gpu_samples", table("gpu_samples", [row]), f"b{n}")
    assert len(refresh(WarehouseConfig(root), ECC_HOURS, {}).built) == 2
    # an XID whose code is past INTEGER (the contract's int64 allows it): no precursor, no error
    event = {"cluster": CLUSTER, "node": "g001", "gpu_uuid": GPUS[0][1], "gpu_index": 0,
             "ts": counter[0][0].replace(tzinfo=dt.UTC), "kind": "xid", "code": 2**40}  # fmt: skip
    write_batch(root, "gpu_events", table("gpu_events", [event]), "events")
    params = {"since": EPOCH, "precursor_xids": [63]}
    con = connect(root)
    try:
        hours = queries.rows(con, health_trend.QUERY_STORED, **params)
    finally:
        con.close()
    assert [(h["hour"].hour, h["samples"], h["sbe_new"]) for h in hours] == [(23, 1, 0), (0, 2, 5)]
    assert [h["precursor_xids"] for h in hours] == [0, 0]


BUSY = [None, 0.0, 0.005, 0.05, 0.2, 0.3, 0.9]
HOUR = 3600


@st.composite
def owned_lakes(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Samples of three GPUs of node g001 every 30 min over three days from 20:00 (times drawn),
    each GPU held by two jobs one after the other (split at a drawn time), and a job on GPUs 0
    and 1 at the end; node g002 held whole by one job, with a GPU naming neither UUID nor
    index. Busy values drawn, gaps and bursts included."""
    samples: list[dict[str, Any]] = []
    job_gpus: list[dict[str, Any]] = []
    span = 52 * HOUR  # 20:00 on day 1 to midnight on day 3

    def sampled(node: str, gpu_index: int | None, **fields: Any) -> list[dict[str, Any]]:
        times = draw(
            st.lists(st.integers(0, span // 1800 - 1), min_size=1, max_size=40, unique=True)
        )
        busy = draw(st.lists(st.sampled_from(BUSY), min_size=len(times), max_size=len(times)))
        return [
            row | fields
            for row in r.samples(
                [20 * HOUR + t * 1800 for t in times],
                node=node,
                gpu_index=gpu_index,
                interval_s=float(draw(st.sampled_from([30, 60]))),
                engine_active=busy,
            )
        ]

    for gpu in range(3):
        samples += sampled("g001", gpu)
        split = 20 * HOUR + draw(st.integers(1, 95)) * 1800
        end = 20 * HOUR + (span - 4 * HOUR if gpu < 2 else span)
        job_gpus += [r.job_gpu(f"a{gpu}", 20 * HOUR, split, gpu_index=gpu)]
        job_gpus += [r.job_gpu(f"b{gpu}", split, end, gpu_index=gpu)]
    wide_start = 20 * HOUR + span - 4 * HOUR
    job_gpus += [r.job_gpu("wide", wide_start, 20 * HOUR + span, gpu_index=g) for g in (0, 1)]
    samples += sampled("g002", 0) + sampled("g002", None, gpu_uuid=None)
    job_gpus += [
        r.job_gpu("node", 20 * HOUR, 20 * HOUR + span, node="g002", gpu_index=None, with_uuid=False)
    ]
    return samples, job_gpus


def _signals(con: Any, *, stored: bool) -> dict[str, dict[str, Any]]:
    found = pl.from_arrow(diagnose(con, None, BottleneckThresholds(), stored=stored))
    assert isinstance(found, pl.DataFrame)
    return {row["job_id"]: row for row in found.to_dicts()}


@settings(max_examples=examples(15), deadline=None)
@given(lake=owned_lakes())
def test_each_jobs_signals_from_the_stored_days_are_those_of_all_its_samples(
    tmp_path_factory, lake
):
    samples, job_gpus = lake
    root = tmp_path_factory.mktemp("lake")
    write_batch(root, "gpu_samples", r.table("gpu_samples", samples), "samples")
    write_batch(root, "job_gpus", r.table("job_gpus", job_gpus), "allocations")
    done = refresh(WarehouseConfig(root), BOTTLENECK_DEVICES, device_params(BottleneckThresholds()))
    assert done.built

    con = connect(root)
    try:
        whole = _signals(con, stored=False)
        stored = _signals(con, stored=True)
    finally:
        con.close()
    assert set(stored) == set(whole)
    for job_id, expected in whole.items():
        for column, value in expected.items():
            got = stored[job_id][column]
            if isinstance(value, float):
                assert got == pytest.approx(value, rel=1e-12), (job_id, column)
            else:
                assert got == value, (job_id, column)


def test_a_burst_across_midnight_counts_and_new_allocations_compute_their_days_again(tmp_path):
    root = tmp_path / "lake"
    # GPU 0: a gap sample at 23:50 on day 1, a burst at 00:00 on day 2 (a burst across midnight)
    times = [23 * HOUR + 50 * 60, 24 * HOUR]
    samples = r.samples(times, engine_active=[0.02, 0.9])
    write_batch(root, "gpu_samples", r.table("gpu_samples", samples), "samples")
    write_batch(root, "job_gpus", r.table("job_gpus", [r.job_gpu("j", 0, None)]), "first")
    config, params = WarehouseConfig(root), device_params(BottleneckThresholds())
    assert len(refresh(config, BOTTLENECK_DEVICES, params).built) == 2
    assert refresh(config, BOTTLENECK_DEVICES, params).unchanged == 2

    con = connect(root)
    try:
        signals = _signals(con, stored=True)["j"]
        assert signals["bursts_per_h"] == pytest.approx(1 / (60 / HOUR))  # 1 in 2 × 30 s
        assert signals == _signals(con, stored=False)["j"]
    finally:
        con.close()

    # the job's allocation ends at 00:00: the day 2 sample has no owner; day 1's rows stay
    ended = r.job_gpu("j", 0, 24 * HOUR)  # landed again as the same batch: it replaces it
    write_batch(root, "job_gpus", r.table("job_gpus", [ended]), "first")
    again = refresh(config, BOTTLENECK_DEVICES, params)
    assert {day.day for _, day in again.built} >= {2}
    con = connect(root)
    try:
        assert _signals(con, stored=True)["j"]["samples"] == 1
        assert _signals(con, stored=False)["j"]["samples"] == 1
    finally:
        con.close()


def _put(root: Path, folder: Path, rows: list[dict[str, Any]], drop: tuple[str, ...] = ()) -> None:
    """Rows written as another tool writes them, in `folder` under gpu_samples."""
    batch = table("gpu_samples", rows).drop_columns(list(drop))
    (root / "gpu_samples" / folder).mkdir(parents=True, exist_ok=True)
    pq.write_table(batch, root / "gpu_samples" / folder / "part-0.parquet")


def test_a_hive_folder_named_otherwise_than_the_lake_would_is_kept_once(tmp_path):
    # Spark's partitionBy writes cluster 'gpu farm' as cluster=gpu%20farm (the lake: gpu_farm)
    root = tmp_path / "lake"
    rows = [row | {"cluster": "gpu farm"} for row in _rows(1, 12)]
    _put(root, Path("cluster=gpu%20farm/date=2026-03-01"), rows, drop=("cluster",))
    config = WarehouseConfig(root)
    assert len(refresh_health_hourly(config).built) == 1
    for _ in range(2):
        again = refresh_health_hourly(config)
        assert again.built == () and again.unchanged == 1 and again.removed == 0
        whole, stored = _whole_and_stored(root)
        _same(stored, whole)
        assert [row["cluster"] for row in stored] == ["gpu farm"]


def test_samples_where_the_days_cannot_hold_them_are_said_and_not_kept(tmp_path):
    root = tmp_path / "lake"
    write_batch(root, "gpu_samples", table("gpu_samples", _rows(1, 12)), "day-1")
    config = WarehouseConfig(root)
    assert refresh_health_hourly(config).outside == ()
    # another tool's file in day 1's folder holding a sample of day 2
    _put(root, Path(f"cluster={CLUSTER}/date=2026-03-01"), _rows(2, 0)[:1])
    misfiled = refresh_health_hourly(config)
    assert misfiled.outside == (f"the files of {CLUSTER} 2026-03-01 hold samples of another day",)
    assert layout.table_files(root, TABLE) == []  # nothing kept for that day
    # and a file outside the cluster=/date= folders
    (root / "gpu_samples" / f"cluster={CLUSTER}" / "date=2026-03-01" / "part-0.parquet").rename(
        root / "gpu_samples" / f"cluster={CLUSTER}" / "loose.parquet"
    )
    loose = refresh_health_hourly(config)
    assert loose.outside == ("1 gpu_samples file(s) outside the cluster=/date= folders",)


def test_a_day_that_gives_no_rows_is_not_computed_again(tmp_path):
    # samples without a corrected-ECC counter (dcgm-exporter's default counters leave it out)
    # and no job: the ECC hours and the bottleneck sums of both days are empty
    root = tmp_path / "lake"
    for day in (1, 2):
        write_batch(root, "gpu_samples", table("gpu_samples", _rows(day, 12)), f"day-{day}")
    config = WarehouseConfig(root)
    params = device_params(BottleneckThresholds())
    for store, store_params in ((ECC_HOURS, {}), (BOTTLENECK_DEVICES, params)):
        first = refresh(config, store, store_params)
        assert len(first.built) == 2 and first.outside == ()
        again = refresh(config, store, store_params)
        assert again.built == () and again.unchanged == 2 and again.removed == 0
    con = connect(root)
    try:
        ecc = {"since": EPOCH, "precursor_xids": [63]}
        assert queries.rows(con, health_trend.QUERY_STORED, **ecc) == []
        assert queries.rows(con, health_trend.QUERY, **ecc) == []
    finally:
        con.close()
    # a counter lands on day 2: that day alone is computed again, and gives its hour
    counted = [row | {"ecc_sbe_volatile": 4} for row in _rows(2, 15)]
    write_batch(root, "gpu_samples", table("gpu_samples", counted), "late")
    late = refresh(config, ECC_HOURS, {})
    assert [day for _, day in late.built] == [dt.date(2026, 3, 2)]
    # one file a day: day 1's empty one, day 2's rows (its empty file gone)
    assert [layout.partition_key(p)[1].day for p in layout.table_files(root, "gpu_ecc_hourly")] == [
        1,
        2,
    ]
    con = connect(root)
    try:
        stored = queries.rows(con, health_trend.QUERY_STORED, **ecc)
    finally:
        con.close()
    assert [(row["hour"].hour, row["samples"]) for row in stored] == [(15, 6)]


def test_a_days_files_holding_several_clusters_are_said_and_not_kept(tmp_path):
    root = tmp_path / "lake"
    write_batch(root, "gpu_samples", table("gpu_samples", _rows(1, 12)), "day-1")
    # another tool's file in della's folder of day 1, holding another cluster's samples too
    other = [row | {"cluster": "zeta"} for row in _rows(1, 13)]
    _put(root, Path(f"cluster={CLUSTER}/date=2026-03-01"), other)
    done = refresh_health_hourly(WarehouseConfig(root))
    assert done.outside == (f"the files of {CLUSTER} 2026-03-01 hold samples of several clusters",)
    assert layout.table_files(root, TABLE) == []


def test_the_stored_bottleneck_rows_are_read_with_the_thresholds_they_were_made_with(tmp_path):
    root = tmp_path / "lake"
    con = connect(root)
    try:
        with pytest.raises(ValueError, match="default thresholds"):
            diagnose(con, None, BottleneckThresholds(gap_below=0.2), stored=True)
    finally:
        con.close()


def test_two_sample_folders_of_one_clusters_day_are_said_and_not_kept_over_each_other(tmp_path):
    # the lake's own folder for cluster 'gpu farm' (gpu_farm) and another tool's (gpu%20farm)
    root = tmp_path / "lake"
    ours = [row | {"cluster": "gpu farm"} for row in _rows(1, 12)]
    write_batch(root, "gpu_samples", table("gpu_samples", ours), "ours")
    theirs = [row | {"cluster": "gpu farm"} for row in _rows(1, 14, GPUS[2])]
    _put(root, Path("cluster=gpu%20farm/date=2026-03-01"), theirs, drop=("cluster",))
    config = WarehouseConfig(root)
    for _ in range(2):
        done = refresh_health_hourly(config)
        assert done.outside == ("two sample folders hold gpu farm's 2026-03-01",)
        # the one kept is whole: the other's rows were not written over it
        assert len(layout.table_files(root, TABLE)) == 1
