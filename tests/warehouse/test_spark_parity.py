"""The Spark engine builds the same marts as DuckDB from the same sql/ files (DESIGN §6).

One PySpark session in local mode (Java 17) builds every mart of a small lake; the DuckDB
engine builds them on a copy; every mart must match row for row. Slow (Spark starts a JVM and
runs many small stages), so it is marked slow, and it runs in `make test`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

from app.pipeline import attribute, default_pipeline_config
from app.pipeline.settings import AttributeSettings
from collector.sim import SimConfig, simulate
from tests.infra.live import live_service
from tests.marts import rows as r
from tests.report.lake import assoc
from warehouse import layout
from warehouse.attribution import MART_ORDER, AttributionConfig, build_marts
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
    """Every mart of the contract (warehouse.schema.MARTS, not a list kept here), sorted by key."""
    con = connect(root)
    return {
        name: con.table(name).pl().sort(list(spec.key), nulls_last=True)
        for name, spec in MARTS.items()
    }


def partitions(root: Path) -> dict[str, set[str]]:
    """Every mart's partition folders (cluster=…/date=…, relative to the lake)."""
    return {
        name: {str(p.parent.relative_to(root)) for p in layout.table_files(root, name)}
        for name in MARTS
    }


def both_engines(
    spark,
    lake: Path,
    tmp_path: Path,
    config: AttributionConfig = AttributionConfig(),  # noqa: B008 (frozen)
) -> tuple[Path, Path]:
    """Build every mart of `lake` with DuckDB (the per-day pass, then the summary marts) and
    with Spark through `attribute --engine spark --spark-source URL`'s round; return the two
    lakes. Neither engine rewrites a raw file: each gives the samples their owners as it
    reads them.

    Spark reads a copy of the raw files under a file:// lake URL as it would under s3a://; it
    lands the marts in a lake folder that holds no raw table, as the local lake beside an
    object store would.
    """
    source = tmp_path / "source"
    shutil.copytree(lake, source)
    # a table folder with only a writer's temporary file in it reads as empty, not as an error
    hidden = source / "queues" / f"cluster={r.CLUSTER}" / "date=2024-03-01" / ".q.parquet"
    hidden.parent.mkdir(parents=True)
    hidden.write_bytes(b"PAR1")
    raw = raw_bytes(lake)
    build_marts(connect(lake), lake, config)
    assert raw_bytes(lake) == raw
    on_spark = tmp_path / "spark"
    pipeline = dataclasses.replace(default_pipeline_config(), attribute=AttributeSettings(config))
    end = dt.datetime(2024, 3, 2, tzinfo=dt.UTC)  # compaction's "now": nothing here to compact
    done = attribute(
        Lake.at(on_spark), pipeline, end, engine="spark", spark_source=source.resolve().as_uri()
    )
    assert set(done.counts) == set(MARTS)
    assert raw_bytes(source) == raw
    return lake, on_spark


def raw_bytes(lake: Path) -> dict[str, bytes]:
    """The bytes of every file of the raw tables, by path in the lake."""
    return {
        str(path.relative_to(lake)): path.read_bytes()
        for table in RAW_TABLES
        for path in layout.table_files(lake, table)
    }


def assert_same(duck: dict[str, pl.DataFrame], spark: dict[str, pl.DataFrame]) -> None:
    for name, frame in duck.items():
        assert_frame_equal(spark[name], frame, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)


def test_the_spark_engine_builds_every_mart_of_the_contract():
    # the parity test compares every mart of MARTS: each must be one the engines build
    assert [name for name, _ in MART_ORDER] == list(MARTS)


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


def test_the_views_a_query_reads_come_from_its_syntax_tree():
    # Spark computes a derived view before the first mart that reads it, and again only after a
    # mart the view reads is built: named in a comment is not read (job_gpu_intervals' header
    # mentions job_gpu_shares, which reads it)
    from warehouse.spark import _reads

    assert {"cluster_data_end", "job_gpus", "gpus"} <= _reads("views/job_gpu_intervals")
    assert "gpu_job_buckets" in _reads("views/cluster_data_end")
    assert "job_gpu_shares" not in _reads("views/job_gpu_intervals")
    assert {"job_gpu_shares", "job_usage", "usage_daily"} <= _reads("marts/fairness_weekly")


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
    # an activity of exactly the bound, stored as a float (1.00100004673 in double precision):
    # Spark compared it as a double and dropped it, DuckDB kept it
    r.land(
        lake,
        "gpu_samples",
        r.samples(range(0, 300, 30), node="g003", gpu_index=0, engine_active=1.001),
        batch_id="bound",
    )
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

    duck_lake, spark_lake = both_engines(spark, lake, tmp_path, config=config)
    duck, on_spark = marts(duck_lake), marts(spark_lake)

    # the hand-made samples landed without owners: both engines gave them theirs
    hand_made = pl.col("cluster") == r.CLUSTER
    assert duck["job_usage"].filter(hand_made).height == 6
    requeued = duck["job_outcomes"].filter(hand_made & pl.col("requeued")).sort("job_id")
    # jt's lost run [0, 100) on g002's GPU 1 shares it with j4, which holds g002 whole then
    assert requeued["gpu_h_lost_requeue"].to_list() == pytest.approx([300 / 3600, 50 / 3600])
    assert duck["job_usage"].filter(~hand_made)["cluster"].unique().to_list() == ["gpu farm/1"]
    assert duck["job_usage"].filter(~hand_made).height > 5
    assert duck["cluster_occupancy"].filter(hand_made).height > 0
    fairness = duck["fairness_weekly"].filter(hand_made)
    assert fairness.filter(pl.col("account") == "bio")["jobs"].to_list() == [0, 0]
    assert fairness["entitled_share"].drop_nulls().len() > 0
    assert duck["job_usage"].filter(hand_made)["kg_co2e"].drop_nulls().len() > 0
    # every mart has rows of both clusters to compare (none compared empty against empty)
    for name, frame in duck.items():
        assert frame["cluster"].n_unique() == 2, name
    assert_same(duck, on_spark)
    # the same partitions: the per-day pass's (cluster, date) folders, the summary marts' own
    assert partitions(spark_lake) == partitions(duck_lake)


@pytest.mark.live
@needs_spark
def test_after_a_spark_build_with_other_settings_duckdb_builds_every_day_again(spark, tmp_path):
    """Spark replaced the day partitions (600 s buckets here) where DuckDB's record still said
    them built from the same inputs: DuckDB's next run kept them and built its 300 s summary
    marts over them (32 GPUs allocated of 16). And a cluster whose samples left the lake kept
    its partitions in every mart Spark rebuilt "whole"."""
    lake = tmp_path / "lake"
    rows = r.mixed_lake()
    for table in ("jobs", "job_gpus", "gpus"):
        r.land(lake, table, rows[table])
    r.land(lake, "gpu_samples", rows["samples"])
    gone = r.samples(range(0, 600, 30), engine_active=0.5)
    r.land(lake, "gpu_samples", [row | {"cluster": "gone"} for row in gone], batch_id="gone")
    build_marts(connect(lake), lake, AttributionConfig())
    assert (lake / "gpu_job_buckets" / "cluster=gone").is_dir()
    shutil.rmtree(lake / "gpu_samples" / "cluster=gone")
    other = AttributeSettings(AttributionConfig(bucket_s=600))
    pipeline = dataclasses.replace(default_pipeline_config(), attribute=other)
    end = dt.datetime(2024, 3, 2, tzinfo=dt.UTC)

    attribute(Lake.at(lake), pipeline, end, engine="spark")

    for name in MARTS:
        assert not (lake / name / "cluster=gone").exists() or not list(
            (lake / name / "cluster=gone").rglob("*.parquet")
        ), name
    build_marts(connect(lake), lake, AttributionConfig())
    reference = tmp_path / "reference"
    for table in RAW_TABLES:
        if (lake / table).is_dir():
            shutil.copytree(lake / table, reference / table)
    build_marts(connect(reference), reference, AttributionConfig())
    assert_same(marts(reference), marts(lake))


@pytest.mark.live
@needs_spark
def test_a_lake_url_with_nothing_there_is_an_error_not_empty_marts(spark, tmp_path):
    """A mistyped --spark-source read as an empty lake: rc 0, every mart "built" with 0 rows."""
    from warehouse.spark import EmptySource, build_marts_on_spark

    missing = (tmp_path / "not-there").as_uri()
    with pytest.raises(EmptySource, match="no 'gpu_samples' or 'jobs' files there"):
        build_marts_on_spark(
            spark, tmp_path / "out", AttributionConfig().values(), MART_ORDER, source=missing
        )
    assert not layout.table_files(tmp_path / "out", "job_usage")
