"""Conservation: every GPU-second of the data's span is counted exactly once, somewhere.

Checked on a hand-made lake with gaps, a duplicate, jitter, a shared GPU and a GPU that never
reports, and on a small simulated lake. Expected totals are computed here from the raw samples
with polars (an independent implementation of DESIGN §4's spans), not by the mart SQL.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from collector.sim import SimConfig, simulate
from tests.marts import rows as r
from warehouse import queries
from warehouse.attribution import AttributionConfig, build_marts
from warehouse.connection import connect, define_span_views
from warehouse.lake import Lake

BUCKET_S = AttributionConfig().bucket_s


def raw_spans(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every sample time of each device and owner there, with its part of the span and gap, by
    DESIGN §4, computed in polars from gpu_samples (the owner, and the end of its allocation,
    by the allocation rule's SQL: the raw job_id is the source's). The owners at one time of a
    device (no owner counts as one) share its span and gap in equal parts; an owner's part
    stops at its allocation's end, the rest of it unobserved; a duplicate row counts once."""
    rows = con.sql(
        "SELECT DISTINCT cluster, coalesce(gpu_uuid, node || '/' || gpu_index) AS device, "
        "epoch_ms(ts) / 1000.0 AS t, CAST(interval_s AS DOUBLE) AS interval_s, job_id, "
        "epoch_ms(owner_end) / 1000.0 AS owner_end "
        "FROM owned_samples WHERE mig_instance IS NULL"
    ).pl()
    points = rows.group_by("cluster", "device", "t").agg(
        pl.col("interval_s").first(), sharers=pl.col("job_id").n_unique()
    )
    step = pl.col("t").shift(-1).over("cluster", "device", order_by="t") - pl.col("t")
    continuous = step.is_not_null() & (step <= 2 * pl.col("interval_s"))
    spans = points.with_columns(
        span_s=pl.when(continuous).then(step).otherwise(pl.col("interval_s")),
        gap_s=pl.when(step.is_not_null() & ~continuous)
        .then(step - pl.col("interval_s"))
        .otherwise(0.0),
    )
    held = pl.min_horizontal("span_s", (pl.col("owner_end") - pl.col("t")).clip(lower_bound=0))
    return (
        rows.select("cluster", "device", "t", "job_id", "owner_end")
        .unique()
        .join(spans, on=["cluster", "device", "t"])
        .with_columns(held=pl.when(pl.col("owner_end").is_null()).then("span_s").otherwise(held))
        .with_columns(
            span_s=pl.col("held") / pl.col("sharers"),
            gap_s=(pl.col("gap_s") + pl.col("span_s") - pl.col("held")) / pl.col("sharers"),
        )
        .drop("held", "owner_end")
    )


def assert_conserved(con: duckdb.DuckDBPyConnection) -> None:
    define_span_views(con)
    spans = raw_spans(con)
    assert spans.height > 0

    # 1. Per device, the spans and gaps of sample_spans tile [first ts, last ts + interval).
    tiled = con.sql(
        "SELECT cluster, device, sum(span_s + gap_s) AS covered, sum(span_s) AS observed "
        "FROM sample_spans GROUP BY ALL"
    ).pl()
    extent = spans.group_by("cluster", "device").agg(
        extent=(pl.col("t") + pl.col("interval_s")).sort_by("t").last() - pl.col("t").min(),
        observed_raw=pl.col("span_s").sum(),
    )
    both = tiled.join(extent, on=["cluster", "device"], how="full", coalesce=True)
    assert both.height == extent.height
    for row in both.iter_rows(named=True):
        assert row["covered"] == pytest.approx(row["extent"], abs=1e-6), row
        assert row["observed"] == pytest.approx(row["observed_raw"], abs=1e-6), row

    # 2. No sample counted for two jobs or lost: per job, job_usage's observed hours are the
    #    spans of the samples it owns; with the unowned ones they make up every observed hour.
    owned = spans.group_by("cluster", "job_id").agg(observed_h=pl.col("span_s").sum() / 3600)
    usage = con.sql("SELECT cluster, job_id, observed_gpu_h FROM job_usage").pl()
    expected = {
        (row["cluster"], row["job_id"]): row["observed_h"]
        for row in owned.iter_rows(named=True)
        if row["job_id"] is not None
    }
    got = {
        (row["cluster"], row["job_id"]): row["observed_gpu_h"]
        for row in usage.iter_rows(named=True)
        if row["observed_gpu_h"] > 0
    }
    assert got == pytest.approx(expected, abs=1e-9)
    unallocated_h = spans.filter(pl.col("job_id").is_null())["span_s"].sum() / 3600
    total_h = spans["span_s"].sum() / 3600
    assert usage["observed_gpu_h"].sum() + unallocated_h == pytest.approx(total_h, abs=1e-9)

    # 3. Occupancy: every bucket of the data's span has a row; allocated + unallocated +
    #    unobserved GPUs × width add up to gpus_total × span; allocated and unallocated
    #    GPU-seconds are exactly the owned and unowned spans.
    for cluster, per_cluster in spans.group_by("cluster"):
        first_e = per_cluster["t"].min()
        last_e = (
            per_cluster.group_by("device")
            .agg(end=(pl.col("t") + pl.col("interval_s")).max())["end"]
            .max()
        )
        occupancy = con.sql(
            "SELECT epoch(bucket) AS b, gpus_total, gpus_allocated, gpus_active, "
            "gpus_idle_allocated, gpus_unallocated, gpus_unobserved "
            "FROM cluster_occupancy WHERE cluster = $c ORDER BY bucket",
            params={"c": cluster[0]},
        ).pl()
        first_bucket = first_e // BUCKET_S * BUCKET_S
        assert occupancy["b"].to_list() == [
            first_bucket + i * BUCKET_S for i in range(occupancy.height)
        ]
        assert occupancy["b"][-1] < last_e <= occupancy["b"][-1] + BUCKET_S
        width = pl.min_horizontal(pl.col("b") + BUCKET_S, last_e) - pl.max_horizontal(
            pl.col("b"), first_e
        )
        sums = occupancy.select(
            accounted=(
                (pl.col("gpus_allocated") + pl.col("gpus_unallocated") + pl.col("gpus_unobserved"))
                * width
            ).sum(),
            capacity=(pl.col("gpus_total") * width).sum(),
            allocated_s=(pl.col("gpus_allocated") * width).sum(),
            split_s=((pl.col("gpus_active") + pl.col("gpus_idle_allocated")) * width).sum(),
            unallocated_s=(pl.col("gpus_unallocated") * width).sum(),
            total=pl.col("gpus_total").max(),
        ).row(0, named=True)
        span = last_e - first_e
        assert sums["capacity"] == pytest.approx(sums["total"] * span)
        assert sums["accounted"] == pytest.approx(sums["total"] * span)
        owned_s = per_cluster.filter(pl.col("job_id").is_not_null())["span_s"].sum()
        assert sums["allocated_s"] == pytest.approx(owned_s)
        assert sums["unallocated_s"] == pytest.approx(total_h * 3600 - owned_s)
        assert sums["split_s"] <= sums["allocated_s"] + 1e-6
        eps = 1e-9
        assert occupancy["gpus_unobserved"].min() >= -eps
        assert occupancy["gpus_allocated"].min() >= -eps
        assert occupancy["gpus_unallocated"].min() >= -eps
        assert (
            occupancy["gpus_allocated"] + occupancy["gpus_unallocated"] - occupancy["gpus_total"]
        ).max() <= eps

    # 4. The dashboard's headline numbers add up to the capacity.
    for row in queries.run(con, "dashboard/cluster_summary").iter_rows(named=True):
        parts = row["allocated_gpu_h"] + row["unallocated_gpu_h"] + row["unobserved_gpu_h"]
        assert parts == pytest.approx(row["capacity_gpu_h"])
        assert row["unobserved_gpu_h"] >= -1e-9
        assert 0 <= row["occupancy"] <= 1

    # 5. No day's observed GPU-hours exceed what was held that day (a sample that runs past
    #    midnight counts its part there on the next day), and the days add up to the jobs.
    days = con.sql(
        "SELECT cluster, date, account, user, alloc_gpu_h, observed_gpu_h, effective_gpu_h "
        "FROM usage_daily"
    ).pl()
    for row in days.iter_rows(named=True):
        assert row["observed_gpu_h"] <= row["alloc_gpu_h"] + 1e-9, row
        assert row["effective_gpu_h"] <= row["observed_gpu_h"] + 1e-9, row
    assert days["observed_gpu_h"].sum() == pytest.approx(usage["observed_gpu_h"].sum(), abs=1e-6)


def test_every_gpu_second_is_counted_once_on_a_hand_made_lake(tmp_path):
    con = r.build_lake(tmp_path, **r.mixed_lake())

    assert_conserved(con)
    # g002/1 never reports, so 4 GPUs, not 3.
    assert r.fetch(con, "SELECT DISTINCT gpus_total FROM cluster_occupancy") == [
        {"gpus_total": 4.0}
    ]


@pytest.fixture(scope="module")
def sim_lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sim")
    simulate(SimConfig(gpus=16, days=2, seed=3), Lake.at(root))
    build_marts(connect(root), root, AttributionConfig())
    return root


@pytest.mark.slow
def test_every_gpu_second_is_counted_once_on_a_simulated_lake(sim_lake):
    assert_conserved(connect(sim_lake))


@pytest.mark.slow
def test_the_simulators_job_labels_equal_the_allocation_rule(sim_lake):
    # The simulator labels each sample with its job as an exporter's hpc_job label would; the
    # owner the marts give it by the allocation rule is that label, for every sample.
    con = connect(sim_lake)
    columns = "cluster, gpu_uuid, mig_instance, ts, job_id"
    [(samples,)] = con.sql("SELECT count(*) FROM gpu_samples").fetchall()
    raw, owned = f"SELECT {columns} FROM gpu_samples", f"SELECT {columns} FROM owned_samples"
    differ = con.sql(f"({raw} EXCEPT ALL {owned}) UNION ALL ({owned} EXCEPT ALL {raw})").fetchall()

    assert samples > 0
    assert differ == []
