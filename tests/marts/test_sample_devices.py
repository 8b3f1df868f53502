"""The devices of the samples, numbered once (sql/views/sample_devices.sql): what the per-day
pass sorts and groups by instead of the key columns' strings; and the samples the per-day pass
cannot use (naming no GPU, no span, dated after tomorrow), left out and said."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.marts import rows as r
from warehouse.connection import connect, define_span_views
from warehouse.partitions import sample_days


def devices(con) -> dict[tuple, dict]:
    """sample_devices' rows by (node, gpu_index, gpu_uuid, mig_instance, model)."""
    define_span_views(con)
    return {
        (row["node"], row["gpu_index"], row["gpu_uuid"], row["mig_instance"], row["model"]): row
        for row in r.fetch(con, "SELECT * FROM sample_devices")
    }


def test_each_device_and_each_set_of_key_values_it_carries_gets_its_number(tmp_path):
    rows = [
        *r.samples([0, 30], node="g001", gpu_index=0),
        *r.samples([0, 30], node="g001", gpu_index=1),
        # the same UUID reported from another node (a moved card): one device, two variants
        *r.samples([60], node="g009", gpu_index=1, gpu_uuid=r.uuid_of("g001", 1)),
        # a GPU cut into two MIG instances: two devices, one physical GPU
        *r.samples([0, 30], node="g002", gpu_index=0, mig_instance=1),
        *r.samples([0, 30], node="g002", gpu_index=0, mig_instance=2),
        # no UUID: the device is its node and index
        *r.samples([0, 30], node="g003", gpu_index=4, gpu_uuid=None),
        # no UUID and no index: a device with no name (its MIG instances cannot be counted)
        *r.samples([0], node="g004", gpu_index=None, gpu_uuid=None, mig_instance=1),
    ]
    r.land(tmp_path, "gpu_samples", rows)
    found = devices(connect(tmp_path))
    model = "NVIDIA H100 80GB HBM3"
    a = found[("g001", 0, r.uuid_of("g001", 0), None, model)]
    b = found[("g001", 1, r.uuid_of("g001", 1), None, model)]
    moved = found[("g009", 1, r.uuid_of("g001", 1), None, model)]
    mig1 = found[("g002", 0, r.uuid_of("g002", 0), 1, model)]
    mig2 = found[("g002", 0, r.uuid_of("g002", 0), 2, model)]
    bare = found[("g003", 4, None, None, model)]
    nameless = found[("g004", None, None, 1, model)]

    assert len(found) == 7  # one row per set of key values
    assert len({row["variant_id"] for row in found.values()}) == 7
    # a device's number follows its UUID (else node and index) and MIG instance only
    assert moved["device_id"] == b["device_id"] != a["device_id"]
    assert moved["gpu_id"] == b["gpu_id"]
    assert len({a["device_id"], b["device_id"], mig1["device_id"], mig2["device_id"]}) == 4
    assert len({row["device_id"] for row in found.values()}) == 6
    # MIG instances share their physical GPU's number
    assert mig1["gpu_id"] == mig2["gpu_id"] != a["gpu_id"]
    assert (mig1["device"], mig1["device_node"], mig1["device_index"]) == (
        r.uuid_of("g002", 0),
        None,
        None,
    )
    assert (bare["device"], bare["device_node"], bare["device_index"]) == ("g003/4", "g003", 4)
    assert nameless["device"] is None and nameless["gpu_id"] is None
    assert nameless["device_id"] is not None


def test_samples_naming_no_gpu_are_left_out_of_the_marts_and_said(tmp_path, caplog):
    # a lake another tool wrote: on node g002 a GPU reported with neither UUID nor index (three
    # samples at 0, 30, 60 s), beside a GPU named as usual; the node is held whole by one job
    named = r.samples([0, 30, 60], node="g002", gpu_index=0)
    nameless = r.samples([0, 30, 60], node="g002", gpu_index=None, gpu_uuid=None)
    jobs = [r.job("node", 0, 90, gpus=2)]
    job_gpus = [r.job_gpu("node", 0, 90, node="g002", gpu_index=None, with_uuid=False)]
    with caplog.at_level("WARNING"):
        r.build_lake(tmp_path / "both", samples=named + nameless, jobs=jobs, job_gpus=job_gpus)
    r.build_lake(tmp_path / "named", samples=named, jobs=jobs, job_gpus=job_gpus)

    assert "3 sample(s) name neither a GPU UUID nor a GPU index" in caplog.text
    both, alone = r.marts_by_key(tmp_path / "both"), r.marts_by_key(tmp_path / "named")
    assert both.keys() == alone.keys()
    for mart, frame in alone.items():
        assert both[mart].equals(frame), mart
    assert alone["job_usage"]["observed_gpu_h"].to_list() == [pytest.approx(90 / 3600)]


def test_samples_whose_interval_is_no_span_stand_for_no_time_and_are_said(tmp_path, caplog):
    # another tool's file: GPU 1's interval NaN, infinite, negative or 0 (the project's writer
    # lands such values as they are); they stand for no time, and are said
    good = r.samples([0, 30, 60], node="g002", gpu_index=0, engine_active=0.5)
    broken = [
        row | {"interval_s": bad}
        for row, bad in zip(
            r.samples([0, 30, 60, 90], node="g002", gpu_index=1, engine_active=0.5),
            (float("nan"), float("inf"), -30.0, 0.0),
            strict=True,
        )
    ]
    jobs = [r.job("node", 0, 120, gpus=2)]
    job_gpus = [r.job_gpu("node", 0, 120, node="g002", gpu_index=None, with_uuid=False)]
    with caplog.at_level("WARNING"):
        r.build_lake(tmp_path / "broken", samples=good + broken, jobs=jobs, job_gpus=job_gpus)
    r.build_lake(tmp_path / "good", samples=good, jobs=jobs, job_gpus=job_gpus)

    assert "4 sample(s) have no usable interval_s" in caplog.text
    got, want = r.marts_by_key(tmp_path / "broken"), r.marts_by_key(tmp_path / "good")
    usage = ["observed_gpu_h", "active_gpu_h", "idle_gpu_h", "effective_gpu_h", "energy_kwh"]
    assert got["job_usage"].select(usage).equals(want["job_usage"].select(usage))
    assert got["job_usage"]["observed_gpu_h"].to_list() == [pytest.approx(90 / 3600)]


def test_samples_dated_after_tomorrow_are_left_out_and_said(tmp_path, caplog):
    # two samples from a node whose clock says 2200: taken as data, the end of the data (every
    # rule's "now") would be 2200 and the summary marts would span every bucket up to it
    named = r.samples(range(0, 600, 30), engine_active=0.5)
    future = [
        row | {"ts": row["ts"].replace(year=2200)} for row in r.samples([0, 30], engine_active=0.5)
    ]
    jobs, job_gpus = [r.job("1", 0, 600)], [r.job_gpu("1", 0, 600)]
    with caplog.at_level("WARNING"):
        r.build_lake(tmp_path / "both", samples=named + future, jobs=jobs, job_gpus=job_gpus)
    r.build_lake(tmp_path / "now", samples=named, jobs=jobs, job_gpus=job_gpus)

    assert "1 day(s) of samples dated after tomorrow (della 2200-03-01) left out" in caplog.text
    both, alone = r.marts_by_key(tmp_path / "both"), r.marts_by_key(tmp_path / "now")
    assert both.keys() == alone.keys()
    for mart, frame in alone.items():
        assert both[mart].equals(frame), mart
    # once the day comes (or the day before it), it is a day like any other
    for today in (dt.date(2200, 2, 28), dt.date(2200, 3, 1)):
        assert len(sample_days(tmp_path / "both", today=today)) == 2
    assert len(sample_days(tmp_path / "both", today=dt.date(2200, 2, 27))) == 1


def test_a_figure_that_is_no_number_is_unknown(tmp_path):
    # another tool's file: one sample's engine activity NaN, another's power infinite, another's
    # energy counter NaN, another's interval NaN; each is unknown (as null), where one NaN made
    # every sum it reached NaN (the job's effective GPU-hours, every account's share of the
    # cluster's)
    nan, inf = float("nan"), float("inf")
    times = list(range(0, 600, 30))
    energy = [1000.0 * i for i in range(len(times))]
    clean = r.samples(times, engine_active=0.5, power_w=300.0, energy_j=energy)
    broken = [dict(row) for row in clean]
    broken[3]["engine_active"], broken[5]["power_w"], broken[7]["energy_j"] = nan, inf, nan
    broken[9]["interval_s"] = nan  # the file's only one: its statistics do not bound it
    unknown = [dict(row) for row in clean]
    unknown[3]["engine_active"], unknown[5]["power_w"], unknown[7]["energy_j"] = None, None, None
    unknown[9]["interval_s"] = 0.0  # (stands for no time too; the writer refuses a null)
    jobs, job_gpus = [r.job("1", 0, 600)], [r.job_gpu("1", 0, 600)]
    r.build_lake(tmp_path / "broken", samples=broken, jobs=jobs, job_gpus=job_gpus)
    r.build_lake(tmp_path / "null", samples=unknown, jobs=jobs, job_gpus=job_gpus)

    got, want = r.marts_by_key(tmp_path / "broken"), r.marts_by_key(tmp_path / "null")
    assert got.keys() == want.keys()
    for mart, frame in want.items():
        assert got[mart].equals(frame), mart
    # the sample before the one without an interval stands for its 30 s; that one for none
    assert want["job_usage"]["effective_gpu_h"].to_list() == [pytest.approx(18 * 30 * 0.5 / 3600)]


def test_a_figure_outside_what_it_can_be_is_unknown(tmp_path):
    # another tool's file: a busy of 1.23 and -0.2, a utilisation of 250 %, a negative power
    # and memory: each unknown, as null (the job's effective GPU-hours exceeded those it held,
    # and its report said "busy 123%"); a hair over 1 (rounding) stays
    times = list(range(0, 600, 30))
    clean = r.samples(times, engine_active=0.5, gpu_util_pct=50.0, power_w=300.0, fb_used_mib=1e3)
    broken = [dict(row) for row in clean]
    broken[1]["engine_active"], broken[2]["engine_active"] = 1.23, -0.2
    broken[3]["gpu_util_pct"], broken[4]["power_w"], broken[5]["fb_used_mib"] = 250.0, -100.0, -1.0
    broken[6]["engine_active"] = 1.0004  # (kept)
    unknown = [dict(row) for row in clean]
    unknown[1]["engine_active"], unknown[2]["engine_active"] = None, None
    unknown[3]["gpu_util_pct"], unknown[4]["power_w"], unknown[5]["fb_used_mib"] = None, None, None
    unknown[6]["engine_active"] = 1.0004
    jobs, job_gpus = [r.job("1", 0, 600)], [r.job_gpu("1", 0, 600)]
    r.build_lake(tmp_path / "broken", samples=broken, jobs=jobs, job_gpus=job_gpus)
    r.build_lake(tmp_path / "null", samples=unknown, jobs=jobs, job_gpus=job_gpus)

    got, want = r.marts_by_key(tmp_path / "broken"), r.marts_by_key(tmp_path / "null")
    assert got.keys() == want.keys()
    for mart, frame in want.items():
        assert got[mart].equals(frame), mart
    [job] = want["job_usage"].to_dicts()
    assert job["effective_gpu_h"] <= job["alloc_gpu_h"]


def test_samples_in_another_days_folder_are_said(tmp_path, caplog):
    """Another tool's file in day 1's folder holding samples of day 2: no partition built reads
    them (each day's are built from its own folder), and nothing said so."""
    lake = tmp_path / "lake"
    r.land(lake, "gpu_samples", r.samples(range(0, 600, 30), engine_active=0.5))
    r.land(tmp_path / "other", "gpu_samples", r.samples(range(86400, 86400 + 300, 30)))
    [stray] = (tmp_path / "other").rglob("*.parquet")
    [day_folder] = {path.parent for path in (lake / "gpu_samples").rglob("*.parquet")}
    stray.rename(day_folder / "another-tool.parquet")
    assert "date=2024-03-02" not in str(day_folder)

    with caplog.at_level("WARNING"):
        r.build_lake(lake)

    assert "10 sample(s) in its files are dated another day (UTC)" in caplog.text


def test_sample_files_outside_the_layout_are_left_out_and_said(tmp_path, caplog):
    # another tool's file straight under gpu_samples/: attribute said the days were up to
    # date, every job observed nothing, and only `detect` mentioned the file
    import pyarrow as pa
    import pyarrow.parquet as pq

    from warehouse.schema import TABLES

    rows = r.samples(range(0, 600, 30), engine_active=0.5)
    r.land(tmp_path, "gpu_samples", rows[:2])
    loose = pa.Table.from_pylist(rows, schema=TABLES["gpu_samples"].schema)
    pq.write_table(loose, tmp_path / "gpu_samples" / "loose.parquet")
    with caplog.at_level("WARNING"):
        r.build_lake(tmp_path, jobs=[r.job("1", 0, 600)], job_gpus=[r.job_gpu("1", 0, 600)])

    assert "1 gpu_samples file(s) outside the cluster=<name>/date=<YYYY-MM-DD> folders" in (
        caplog.text
    )


@pytest.mark.parametrize("interval", [1e8, 60000.0])
def test_an_interval_above_an_hour_is_no_sampling_step(tmp_path, caplog, interval):
    # another tool's file: the last sample of a running job's GPU stood for 1e8 s, and the data
    # ended in 2030 (a 1-GPU job "held" 27,790 GPU-hours); or milliseconds for seconds (60,000
    # for a 60 s scrape), and a GPU whose samples stop at 6 h was observed 22.65 h
    times = list(range(0, 600, 30))
    good = r.samples(times, engine_active=0.5)
    odd = [dict(row) for row in good]
    odd[-1]["interval_s"] = interval
    jobs, job_gpus = [r.job("1", 0, None)], [r.job_gpu("1", 0, None)]
    with caplog.at_level("WARNING"):
        r.build_lake(tmp_path / "odd", samples=odd, jobs=jobs, job_gpus=job_gpus)
    r.build_lake(tmp_path / "good", samples=good[:-1], jobs=jobs, job_gpus=job_gpus)

    assert "1 sample(s) have no usable interval_s" in caplog.text
    got, want = r.marts_by_key(tmp_path / "odd"), r.marts_by_key(tmp_path / "good")
    assert got["job_usage"]["alloc_gpu_h"].to_list() == want["job_usage"]["alloc_gpu_h"].to_list()
    assert got["job_usage"]["observed_gpu_h"].to_list() == [pytest.approx(570 / 3600)]
