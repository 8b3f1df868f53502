"""The models' feature SQL on hand-made rows: hourly GPU health and the failures it predicts."""

from __future__ import annotations

from tests.detectors.rules.lake import CLUSTER, at, connection
from warehouse.queries import run


def sample(t_s, uuid="GPU-a", sbe=0, temp=40.0, reasons=0, mig=None, pending=False):
    return {
        "ts": at(t_s),
        "cluster": CLUSTER,
        "node": "n1",
        "gpu_index": 0,
        "gpu_uuid": uuid,
        "mig_instance": mig,
        "interval_s": 30.0,
        "ecc_sbe_volatile": sbe,
        "temp_c": temp,
        "clock_event_reasons": reasons,
        "remap_pending": pending,
        "source": "test",
    }


def event(t_s, kind, code=None, uuid="GPU-a"):
    return {
        "cluster": CLUSTER,
        "node": "n1",
        "gpu_uuid": uuid,
        "gpu_index": 0,
        "ts": at(t_s),
        "kind": kind,
        "code": code,
    }


def test_hourly_health_counts_sample_times_and_keeps_device_fields(tmp_path):
    con = connection(
        tmp_path,
        gpu_samples=[
            # a MIG GPU: two instances repeat the device's fields at each time
            sample(0, sbe=1, temp=40, mig=1),
            sample(0, sbe=1, temp=40, mig=2),
            sample(1800, sbe=3, temp=50, reasons=0x40, mig=1),
            sample(1800, sbe=3, temp=50, reasons=0x40, mig=2),
            sample(3600, sbe=4, pending=True, mig=1),  # the next hour
        ],
        gpu_events=[event(600, "xid", 13), event(700, "xid", 48), event(4000, "xid", 119)],
    )
    rows = run(con, "models/gpu_health_hourly").to_dicts()
    assert [(r["samples"], r["sbe_max"], r["remap_pending"], r["minor_xids"]) for r in rows] == [
        (2, 3, False, 1),  # XID 48 is what the model predicts, not a feature
        (1, 4, True, 1),
    ]
    assert rows[0]["temp_mean"] == 45.0
    assert rows[0]["throttle_frac"] == 0.5  # 0x40 thermal in half the samples


def test_failures_are_the_uncorrectable_events_once_per_instant(tmp_path):
    con = connection(
        tmp_path,
        gpu_events=[
            event(100, "xid", 94),
            event(100, "row_remap_failure"),
            event(200, "xid", 13),
            event(300, "thermal", 0x40),
            event(400, "ecc_dbe", 1),
        ],
    )
    rows = run(con, "models/gpu_failures").to_dicts()
    assert [(r["ts"], r["kinds"]) for r in rows] == [
        (at(100), "row_remap_failure, xid 94"),
        (at(400), "ecc_dbe 1"),
    ]
