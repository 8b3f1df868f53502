"""The weekly report's cluster frame (sql/report/cluster_frame.sql) on hand-made occupancy rows,
at the bucket widths a site may configure."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pytest

from warehouse import queries
from warehouse.schema import MARTS

T0 = dt.datetime(2024, 2, 26, tzinfo=dt.UTC)  # a Monday
WEEK_END = T0 + dt.timedelta(days=7)


def _con(
    width_s: int, hours: float, span: tuple[float, float] | None = None
) -> duckdb.DuckDBPyConnection:
    """Two GPUs for `hours`: one allocated (busy the first half), one unallocated, no queue;
    the samples span `span` (seconds after T0; default: the buckets' whole span)."""
    n = int(hours * 3600 / width_s)
    rows = [
        {
            "cluster": "della",
            "bucket": T0 + dt.timedelta(seconds=k * width_s),
            "gpus_total": 2.0,
            "gpus_allocated": 1.0,
            "gpus_active": 1.0 if k < n // 2 else 0.0,
            "gpus_idle_allocated": 0.0 if k < n // 2 else 1.0,
            "gpus_unallocated": 1.0,
            "gpus_unobserved": 0.0,
        }
        for k in range(n)
    ]
    con = duckdb.connect()
    con.register("cluster_occupancy", pa.Table.from_pylist(rows, MARTS["cluster_occupancy"].schema))
    first, last = span or (0.0, n * width_s)
    con.register(
        "gpu_job_buckets",
        pa.table(
            {
                "cluster": ["della"],
                "first_e": [T0.timestamp() + first],
                "last_end_e": [T0.timestamp() + last],
            }
        ),
    )
    con.execute(
        "CREATE TABLE jobs_latest (cluster VARCHAR, submit_ts TIMESTAMPTZ, start_ts TIMESTAMPTZ,"
        " end_ts TIMESTAMPTZ, gpus INTEGER, gpus_requested INTEGER)"
    )
    return con


@pytest.mark.parametrize("width_s", [60, 300, 600, 3600])
def test_gpu_hours_follow_the_width_the_marts_were_built_with(width_s):
    # The report passes the default 300 s whatever `[attribute] bucket_s` built: at 600 s every
    # figure was halved (the probe's 384.7 GPU-h read 192.7).
    [frame] = queries.run(
        _con(width_s, 4),
        "report/cluster_frame",
        cluster="della",
        week_start_e=T0.timestamp(),
        week_end_e=WEEK_END.timestamp(),
        bucket_s=300,
    ).to_dicts()
    assert frame["reported_gpu_h"] == pytest.approx(8.0)
    assert frame["allocated_gpu_h"] == pytest.approx(4.0)
    assert frame["active_gpu_h"] == pytest.approx(2.0)
    assert frame["idle_allocated_gpu_h"] == pytest.approx(2.0)
    assert frame["idle_gpu_h"] == pytest.approx(4.0)
    assert frame["planned_gpu_h"] == 0 and frame["unobserved_gpu_h"] == 0


def test_one_bucket_stands_for_the_given_width_and_no_bucket_for_nothing():
    one = dict(cluster="della", week_start_e=T0.timestamp(), week_end_e=WEEK_END.timestamp())
    [frame] = queries.run(
        _con(600, 600 / 3600), "report/cluster_frame", bucket_s=600, **one
    ).to_dicts()
    assert frame["reported_gpu_h"] == pytest.approx(2 * 600 / 3600)
    assert frame["buckets"] == 1
    [empty] = queries.run(
        _con(600, 1), "report/cluster_frame", **{**one, "cluster": "other"}, bucket_s=300
    ).to_dicts()
    assert empty["reported_gpu_h"] == 0 and empty["buckets"] == 0


def test_the_first_and_last_buckets_count_only_the_datas_seconds_in_them():
    # samples from 00:02:00 to 00:55:25: the first 5-minute bucket holds 180 s of data, the last
    # 25 s (cluster_occupancy averages each over those seconds); counted whole, the frame said
    # 1,538.7 GPU-hours reported where the GPUs were seen for 1,536.2
    frame = queries.run(
        _con(300, 1, span=(120.0, 3325.0)),
        "report/cluster_frame",
        cluster="della",
        week_start_e=T0.timestamp(),
        week_end_e=WEEK_END.timestamp(),
        bucket_s=300,
    ).row(0, named=True)
    seconds = 3325.0 - 120.0  # the data's span inside the hour's 12 buckets
    assert frame["reported_gpu_h"] == pytest.approx(2 * seconds / 3600)
    assert frame["allocated_gpu_h"] == pytest.approx(seconds / 3600)
