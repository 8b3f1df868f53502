"""The Spark engine builds the same marts as DuckDB from the same sql/ files (DESIGN §6).

One PySpark session in local mode (Java 17) builds every mart of a small lake; the DuckDB
engine builds them on a copy; every mart must match row for row. Slow (Spark starts a JVM and
runs many small stages), so it is marked slow, and it runs in `make test`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

from collector.sim import SimConfig, simulate
from tests.infra.live import live_service
from tests.marts import rows as r
from tests.report.lake import assoc
from warehouse import layout
from warehouse.attribution import MART_ORDER, AttributionConfig, build_marts, reattribute
from warehouse.connection import connect
from warehouse.emissions import CarbonIntensity, ClusterIntensity
from warehouse.lake import Lake
from warehouse.schema import MARTS, RAW_TABLES
from warehouse.spark import transpile

pytestmark = pytest.mark.slow


def _java() -> bool:
    try:
        return subprocess.run(["java", "-version"], capture_output=True).returncode == 0
    except OSError:
        return False


needs_spark = pytest.mark.skipif(not _java(), reason="PySpark needs a Java runtime (java -version)")


@pytest.fixture(scope="module")
@live_service
def spark():
    from warehouse.spark import spark_session

    session = spark_session("local[2]", app_name="gpuledger-parity")
    yield session
    session.stop()


def marts(root: Path) -> dict[str, pl.DataFrame]:
    con = connect(root)
    return {
        name: con.table(name).pl().sort(list(spec.key), nulls_last=True)
        for name, spec in MARTS.items()
    }


def both_engines(
    spark,
    lake: Path,
    tmp_path: Path,
    *,
    as_url: bool = False,
    config: AttributionConfig = AttributionConfig(),  # noqa: B008 (frozen)
) -> tuple[dict, dict]:
    """Attribute `lake`, then build its marts with DuckDB and (on a copy) with Spark.

    With `as_url`, Spark finds the raw files itself under a file:// lake URL, as it would
    under s3a://.
    """
    from warehouse.spark import build_marts_on_spark

    reattribute(connect(lake), lake)
    on_spark = tmp_path / "spark"
    shutil.copytree(lake, on_spark)
    build_marts(connect(lake), lake, config)
    source = on_spark.resolve().as_uri() if as_url else None
    build_marts_on_spark(
        spark, on_spark, config.values(), MART_ORDER, source=source, intensity=config.emissions
    )
    return marts(lake), marts(on_spark)


def assert_same(duck: dict[str, pl.DataFrame], spark: dict[str, pl.DataFrame]) -> None:
    for name, frame in duck.items():
        assert_frame_equal(spark[name], frame, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)


def test_transpiled_sql_keeps_times_exact():
    text = transpile(
        "SELECT epoch(ts) AS e, to_timestamp(floor(epoch(ts) / 300) * 300) AS b FROM t"
    )

    assert "UNIX_TIMESTAMP" not in text and "FROM_UNIXTIME" not in text
    assert "UNIX_MICROS(ts) / 1e6" in text and "TIMESTAMP_SECONDS(" in text


def test_a_distinct_window_count_becomes_the_size_of_a_set():
    # Spark has no DISTINCT window aggregate (sample_spans counts a GPU's sharers with one)
    text = transpile("SELECT count(DISTINCT j) OVER (PARTITION BY d, ts) AS k FROM t")

    assert text == "SELECT SIZE(COLLECT_SET(j) OVER (PARTITION BY d, ts)) AS k FROM t"


def spark_partitioned_copy(spark, source: Path, lake: Path) -> None:
    """The raw tables of `source` written into `lake` as a Spark job writes them with
    partitionBy("cluster", "date"): no cluster column in the files, its value in the folder."""
    for table in RAW_TABLES:
        files = layout.table_files(source, table)
        keys = [layout.partition_key(path) for path in files]
        parts = [
            pq.read_table(p).append_column(
                "date", pa.array([key[1]] * pq.read_metadata(p).num_rows)
            )
            for p, key in zip(files, keys, strict=True)
            if key is not None
        ]
        if parts:
            rows = pa.concat_tables(parts, promote_options="default").drop_columns(["_batch"])
            writer = spark.createDataFrame(rows).write.partitionBy("cluster", "date")
            writer.parquet(str(lake / table))


@pytest.mark.live
@needs_spark
def test_spark_reading_a_lake_url_builds_the_same_marts_as_duckdb(spark, tmp_path):
    """One lake, one Spark build (planning dominates on lakes this small): a simulated day of
    8 GPUs as a Spark job would write it (partitionBy cluster and date: the cluster's name
    'gpu farm/1' only in the escaped folder names), and beside it files of the lake's own
    writer: a hand-made cluster with the edge cases and a share tree. Spark finds the raw files
    itself under a file:// lake URL, as it would under s3a://."""
    lake = tmp_path / "lake"
    simulate(SimConfig(gpus=8, days=1, seed=3, cluster="gpu farm/1"), Lake.at(tmp_path / "sim"))
    spark_partitioned_copy(spark, tmp_path / "sim", lake)
    written = layout.table_files(lake, "gpu_samples")
    assert written and all("cluster" not in pq.read_schema(f).names for f in written)
    assert all("cluster=gpu farm%2F1" in str(f) for f in written)
    rows = r.mixed_lake()  # gaps, a duplicate, jitter, a shared GPU, a whole-node allocation
    r.land(lake, "gpu_samples", rows["samples"])
    r.land(lake, "jobs", rows["jobs"])
    r.land(lake, "job_gpus", rows["job_gpus"])
    r.land(lake, "gpus", rows["gpus"])
    r.land(lake, "gpu_events", [r.event(600, "xid", 79, gpu_index=1)])
    # Requeued jobs (job_outcomes' lost earlier runs): touching runs, and a trace's attempts.
    r.land(
        lake,
        "jobs",
        [
            r.job("jq", 400, 800, state="FAILED", requeues=1),
            r.job("jt", 0, 200, requeues=1),
        ],
        batch_id="requeues",
    )
    r.land(
        lake,
        "job_gpus",
        [
            r.job_gpu("jq", 100, 400, gpu_index=2),
            r.job_gpu("jq", 400, 800, gpu_index=2),
            r.job_gpu("jt", 0, 100, node="g002", gpu_index=1, mapping="trace"),
            r.job_gpu("jt", 150, 200, node="g002", gpu_index=1, mapping="trace"),
        ],
        batch_id="requeues",
    )
    # A share tree for fairness_weekly: physics has a user with jobs, bio none.
    r.land(
        lake,
        "associations",
        [
            assoc("root", None, None, None),
            assoc("physics", None, "root", 3),
            assoc("bio", None, "root", 1),
            assoc("physics", "alice", None, 1),
            assoc("bio", "bob", None, 1),
        ],
    )

    # [emissions]: an hourly value for the hand-made cluster's first hour, a default elsewhere
    hourly = ClusterIntensity(r.CLUSTER, csv="c.csv", hours=((int(r.at(0).timestamp()), 300.0),))
    intensity = CarbonIntensity(default_g_per_kwh=450.0, clusters=(hourly,))
    config = AttributionConfig(emissions=intensity)

    duck, on_spark = both_engines(spark, lake, tmp_path, as_url=True, config=config)

    hand_made = pl.col("cluster") == r.CLUSTER
    assert duck["job_usage"].filter(hand_made).height == 6
    requeued = duck["job_outcomes"].filter(hand_made & pl.col("requeued")).sort("job_id")
    assert requeued["gpu_h_lost_requeue"].to_list() == pytest.approx([300 / 3600, 100 / 3600])
    assert duck["job_usage"].filter(~hand_made)["cluster"].unique().to_list() == ["gpu farm/1"]
    assert duck["job_usage"].filter(~hand_made).height > 5
    assert duck["cluster_occupancy"].filter(hand_made).height > 0
    fairness = duck["fairness_weekly"].filter(hand_made)
    assert fairness.filter(pl.col("account") == "bio")["jobs"].to_list() == [0, 0]
    assert fairness["entitled_share"].drop_nulls().len() > 0
    assert duck["job_usage"].filter(hand_made)["kg_co2e"].drop_nulls().len() > 0
    assert_same(duck, on_spark)
