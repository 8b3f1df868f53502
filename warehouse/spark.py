"""The Spark runner: the same sql/ files, transpiled from DuckDB's dialect by sqlglot, on PySpark.

`build_marts_on_spark` reads the lake's raw tables with Spark (local mode here, a cluster via
`master`), defines the derived views and builds every mart of `MART_ORDER` from the shipped SQL,
then lands each mart in the lake through the warehouse writer, so the files are laid out exactly
as the DuckDB engine lays them out. PySpark is an optional extra (`gpuledger[spark]`).

The sample-level marts (DuckDB's per-day pass, warehouse/partitions.py) are built by the same
queries over every sample at once, which is what a day's partition plus the next day's first
samples stand for there, and land in the same (cluster, date) partitions. Raw files are never
rewritten, here or at a URL (object storage): Spark gives the samples their owners by the
allocation rule as it reads them (sql/attribution/sample_owners.sql), as the per-day pass does.
Each derived view a mart reads and each mart is computed once (a local checkpoint), so a later
mart reads rows, not the whole plan behind them again.

Where sqlglot's DuckDB → Spark translation would change a result, the syntax tree is adjusted
here, not the SQL: `epoch(ts)` becomes microsecond-exact (Spark's UNIX_TIMESTAMP truncates to the
second), `to_timestamp(seconds)` becomes TIMESTAMP_SECONDS (FROM_UNIXTIME formats a string) and
`quantile_cont` becomes Spark's exact PERCENTILE. Spark inlines every CTE and view where it is
used, so a mart query should read each of its inputs once, as sql/marts/fairness_weekly.sql does.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import sql
from warehouse import layout
from warehouse.emissions import CarbonIntensity, intensity_schema, intensity_table
from warehouse.errors import WarehouseError
from warehouse.schema import MARTS, RAW_TABLES
from warehouse.writer_lock import writer_step

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "SparkUnavailable",
    "build_marts_on_spark",
    "spark_session",
    "transpile",
]

logger = logging.getLogger(__name__)

# The views every mart query may read, defined from shipped SQL in this order.
DERIVED_VIEWS = (
    ("jobs_latest", "views/jobs_latest"),
    ("sample_devices", "views/sample_devices"),
    ("sample_steps", "views/sample_steps"),
    ("sample_spans", "views/sample_spans"),
    ("cluster_data_end", "views/cluster_data_end"),
    ("job_gpu_intervals", "views/job_gpu_intervals"),
    ("job_gpu_shares", "views/job_gpu_shares"),
    ("job_co2e_hourly", "views/job_co2e_hourly"),
)
# Views computed once (a local checkpoint) before the first mart that reads them, rather than
# planned inside every mart: job_gpu_shares reads job_gpu_intervals from four places, and planned
# inside fairness_weekly (which reads it directly and through job_usage, job_outcomes and
# usage_daily) it ran the 2 GiB driver heap out of memory. Each is small (a row per job, per
# allocation piece or per job-hour); sample_spans (a row per sample, read by one mart) is not.
# As the DuckDB engine's summary build computes job_gpu_intervals and job_gpu_shares once.
COMPUTED_VIEWS = frozenset(
    {"jobs_latest", "job_gpu_intervals", "job_gpu_shares", "job_co2e_hourly"}
)
REFERENCE_FILES = {"gpu_models": "gpu_models.csv", "xid_classes": "xid_classes.csv"}
# The allocation rule of DESIGN §4 (the DuckDB engine's per-day pass applies it too).
SAMPLE_OWNERS = "attribution/sample_owners"


class PrunedDays(WarehouseError):
    """The lake's raw samples of some days were pruned: only their derived partitions hold
    their figures, which a Spark build (from raw samples) would replace."""


class SparkUnavailable(WarehouseError):
    """PySpark (or the Java runtime it needs) is not installed."""


class SparkFailed(WarehouseError):
    """Spark could not start, or stopped the build: its reason, in one line."""


class EmptySource(WarehouseError):
    """The lake URL Spark was told to read holds neither samples nor scheduler records."""


@contextlib.contextmanager
def _one_line(what: str) -> Iterator[None]:
    """Turn an error of PySpark or of its Java side into SparkFailed: `what` and the first
    line of the reason (a Java stack trace or a Python one was dozens of lines, for a master
    nobody listens at, no Java, or an object store without its connector)."""
    try:
        yield
    except WarehouseError:
        raise
    except Exception as exc:
        if type(exc).__module__.split(".")[0] not in ("pyspark", "py4j"):
            raise
        java = getattr(exc, "java_exception", None)
        text = str(java) if java is not None else str(exc)
        reason = next((line.strip() for line in text.splitlines() if line.strip()), repr(exc))
        if "JAVA_GATEWAY_EXITED" in text:
            reason += " (is Java 17 installed, and `java` on PATH or JAVA_HOME set?)"
        raise SparkFailed(f"{what}: {reason[:400]}") from None


@functools.cache
def transpile(text: str) -> str:
    """DuckDB-dialect SQL → Spark SQL, exact where sqlglot's defaults would round times."""
    import sqlglot
    from sqlglot import exp

    def exact_epoch(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.TimeToUnix):  # epoch(ts): seconds with the fraction kept
            micros = exp.Anonymous(this="UNIX_MICROS", expressions=[node.this])
            return exp.Div(this=micros, expression=exp.Literal.number("1e6"))
        return node

    def exact_timestamp(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.UnixToTime):  # to_timestamp(seconds)
            return exp.Anonymous(this="TIMESTAMP_SECONDS", expressions=[node.this])
        return node

    def exact_quantile(node: exp.Expression) -> exp.Expression:
        # quantile_cont(x, q): Spark's exact `percentile` interpolates the same way (sqlglot
        # would write PERCENTILE_CONT(x, q), which Spark does not take, or an approximation)
        if isinstance(node, exp.PercentileCont) and node.expression is not None:
            return exp.Anonymous(this="PERCENTILE", expressions=[node.this, node.expression])
        return node

    def distinct_window(node: exp.Expression) -> exp.Expression:
        # Spark has no DISTINCT window aggregate: count(DISTINCT x) OVER w is
        # size(collect_set(x) OVER w) (both skip nulls)
        if (
            isinstance(node, exp.Window)
            and isinstance(node.this, exp.Count)
            and isinstance(node.this.this, exp.Distinct)
            and len(node.this.this.expressions) == 1
        ):
            collect = node.copy()
            collect.set(
                "this", exp.Anonymous(this="COLLECT_SET", expressions=node.this.this.expressions)
            )
            return exp.Anonymous(this="SIZE", expressions=[collect])
        return node

    def plain_cte(node: exp.Expression) -> exp.Expression:
        # `AS [NOT] MATERIALIZED` is DuckDB's hint (Spark's parser refuses it): Spark plans
        # each CTE itself
        if isinstance(node, exp.CTE) and node.args.get("materialized") is not None:
            node = node.copy()
            node.set("materialized", None)
        return node

    tree = sqlglot.parse_one(text, read="duckdb")
    tree = tree.transform(plain_cte).transform(exact_epoch).transform(exact_timestamp)
    tree = tree.transform(exact_quantile)
    tree = tree.transform(distinct_window)
    return tree.sql(dialect="spark")


# Every session: UTC, DuckDB-like arithmetic, adaptive query execution.
SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}
# A local session (local, local[n], local[*]): the driver runs every task in its own JVM, whose
# heap must be sized before it starts (Spark's default is 1 GiB), and the lake's marts are small
# enough that a few shuffle partitions beat Spark's 200. A cluster keeps its own settings
# (spark-defaults.conf, spark-submit), as a cluster's data wants more partitions.
LOCAL_CONF = {
    "spark.driver.memory": "2g",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
}


def spark_session(master: str | None = None, app_name: str = "gpuledger") -> SparkSession:
    """A Spark session in UTC with DuckDB-like arithmetic (ANSI off); local[*] by default.

    A local master also gets LOCAL_CONF (a 2 GiB driver heap, 4 shuffle partitions); those
    apply only when this call starts the JVM (an already running session is returned as is).
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkUnavailable(
            "the Spark engine needs PySpark: pip install 'gpuledger[spark]' (and Java 17)"
        ) from exc
    master = master or "local[*]"
    conf = SESSION_CONF | (LOCAL_CONF if master.startswith("local") else {})
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    with _one_line(f"Spark did not start (master {master})"):
        session = builder.getOrCreate()
    # its warnings (a window without a partition, on every small mart) drowned the command's
    # output; an error still says itself
    session.sparkContext.setLogLevel("ERROR")
    return session


def _spark_type(arrow_type: pa.DataType) -> str:
    if pa.types.is_timestamp(arrow_type):
        return "TIMESTAMP"
    if pa.types.is_list(arrow_type):
        return "ARRAY<STRING>"
    return {
        pa.string(): "STRING",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.int16(): "SMALLINT",
        pa.int32(): "INT",
        pa.int64(): "BIGINT",
        pa.bool_(): "BOOLEAN",
        pa.date32(): "DATE",
    }[arrow_type]


def _register(spark: SparkSession, root: Path, table: str, source: str | None) -> bool:
    """A temp view of `table` typed by the contract (missing columns null, extras dropped);
    whether it found files of it.

    The files are listed in the local lake at `root`, or, with `source` (a lake URL such as
    s3a://bucket/lake), found by Spark itself under `<source>/<table>/` (every *.parquet at any
    depth; files starting with `.` or `_` are skipped, as the writer's temporary files are).
    """
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    schema = RAW_TABLES[table].schema
    present: set[str] = set()
    frame = spark.range(0).drop("id")  # a table without files reads as empty
    if source is None:
        paths = [str(p) for p in layout.table_files(root, table)]
        if paths:
            frame = spark.read.option("mergeSchema", "true").parquet(*paths)
            present = set(frame.columns)
    elif _exists(spark, folder := f"{source.rstrip('/')}/{table}"):  # else Spark logs a trace
        try:
            frame = (
                spark.read.option("recursiveFileLookup", "true")
                .option("pathGlobFilter", "*.parquet")
                .option("mergeSchema", "true")
                .parquet(folder)
            )
            present = set(frame.columns)
        except AnalysisException as exc:  # no Parquet file in it (or it went meanwhile): empty
            if not any(e in str(exc) for e in ("PATH_NOT_FOUND", "UNABLE_TO_INFER_SCHEMA")):
                raise

    def source_of(name: str) -> Column:
        own = F.col(f"`{name}`") if name in present else F.lit(None)
        if name == "cluster" and present:  # as the DuckDB views: the file's, else its folder's
            return F.coalesce(own, _folder_cluster())
        return own

    columns = [
        source_of(field.name).cast(_spark_type(field.type)).alias(field.name) for field in schema
    ]
    frame.select(*columns).createOrReplaceTempView(table)
    return bool(present)


def _exists(spark: SparkSession, url: str) -> bool:
    """Whether the lake URL `url` (s3a://, gs://, abfss://, file://) names something, asked
    through the Hadoop file system Spark reads it with."""
    context = spark.sparkContext
    path = context._jvm.org.apache.hadoop.fs.Path(url)  # type: ignore[union-attr]
    return bool(path.getFileSystem(context._jsc.hadoopConfiguration()).exists(path))


def _folder_cluster() -> Column:
    """The cluster the row's file's nearest `cluster=` folder names, as sql/views/lake_files.sql
    reads it: Spark's file path is a URI (a `%` in a folder is `%25` there), so it is decoded
    once for the URI and once for the hive writer's escaping; `+` is a plus, not a space."""
    from pyspark.sql import functions as F

    def decoded(text: Column) -> Column:
        return F.try_url_decode(F.replace(text, F.lit("+"), F.lit("%2B")))

    folder = F.regexp_extract(F.col("_metadata.file_path"), r"(?:^|.*/)cluster=([^/]*)/", 1)
    return F.nullif(decoded(decoded(folder)), F.lit(""))


def _own_samples(spark: SparkSession) -> None:
    """Define the `owned_samples` view: every sample with its owner by the allocation rule, as
    the DuckDB engine's per-day pass gives it (sql/attribution/sample_owners.sql, run over
    every sample at once, joined back as sql/views/owned_samples.sql does: Spark has no
    `* REPLACE`). Raw files are never rewritten, so the owners are decided on every build.
    """

    samples = spark.table("gpu_samples").localCheckpoint()  # read once: the rule reads it twice
    samples.createOrReplaceTempView("unowned_samples")
    owners = spark.sql(transpile(sql.load(SAMPLE_OWNERS))).localCheckpoint()
    key = ("cluster", "node", "gpu_index", "gpu_uuid", "mig_instance", "ts")
    on = [samples[c].eqNullSafe(owners[c]) for c in key]
    on.append(samples["job_id"].eqNullSafe(owners["label"]))
    joined = samples.join(owners, on, "left")
    columns = [
        owners["job_id"].alias(name) if name == "job_id" else samples[f"`{name}`"]
        for name in RAW_TABLES["gpu_samples"].schema.names
    ]
    columns.append(owners["owner_end"])
    joined.select(*columns).createOrReplaceTempView("owned_samples")


def _run(spark: SparkSession, name: str, params: Mapping[str, Any]) -> DataFrame:
    text = transpile(sql.load(name))
    wanted = {k: v for k, v in params.items() if f":{k}" in text}
    return spark.sql(text, args=wanted or None)


@writer_step("attribute")
def build_marts_on_spark(
    spark: SparkSession,
    root: Path,
    params: Mapping[str, Any],
    marts: tuple[tuple[str, str], ...],
    progress: Callable[[str], None] | None = None,
    *,
    source: str | None = None,
    intensity: CarbonIntensity | None = None,
) -> dict[str, int]:
    """Build `marts` (name, query) in order on Spark and land them in the lake at `root`.

    The raw tables are read from `root`, or from the lake at the URL `source` (object
    storage); either way the files are read as they are and each sample's owner is decided by
    the allocation rule as they are read.
    Each mart's partitions for each cluster are replaced whole. Returns the rows of each mart.
    `intensity` (`[emissions]`) gives kg_co2e; without it kg_co2e is null (unknown).
    Each mart is computed once (a local checkpoint), so later marts read its rows rather than
    plan it again; its view is dropped at the end, so that a session that builds again (a
    second lake) lets the first build's rows go.
    """
    from warehouse.partitions import PRUNED, built_days

    pruned = sorted(key for key, (own, _) in built_days(root).items() if own == PRUNED)
    if pruned:
        (cluster, first), (_, last) = pruned[0], pruned[-1]
        raise PrunedDays(
            f"{root}: the raw samples of {len(pruned):,} day(s) were pruned ({cluster} {first} "
            f"… {last}); the Spark engine builds every mart from raw samples and would drop "
            "those days' figures: attribute this lake with the DuckDB engine"
        )
    with _one_line("Spark failed"):
        return _build(spark, root, params, marts, progress, source, intensity)


def _build(
    spark: SparkSession,
    root: Path,
    params: Mapping[str, Any],
    marts: tuple[tuple[str, str], ...],
    progress: Callable[[str], None] | None,
    source: str | None,
    intensity: CarbonIntensity | None,
) -> dict[str, int]:
    """`build_marts_on_spark`'s build, once the lake may be built."""
    from importlib.resources import files

    from warehouse.partitions import forget_built_days
    from warehouse.summary.landing import land_mart

    found = {table: _register(spark, root, table, source) for table in RAW_TABLES}
    if source is not None and not (found["gpu_samples"] or found["jobs"]):
        # (a wrong URL read as an empty lake: every mart "built" with 0 rows)
        raise EmptySource(
            f"{source}: no 'gpu_samples' or 'jobs' files there; is it the lake's URL (the "
            "folder holding gpu_samples/, jobs/ …)?"
        )
    # the DuckDB engine's record of the day partitions it built goes before any is replaced
    # here (not before the source was found: a mistyped URL then costs no rebuild): it would
    # trust partitions Spark rewrote (with other settings: 600 s buckets read as 300 s ones
    # gave 32 GPUs allocated of 16). Its next run builds every day again.
    forget_built_days(root)
    _own_samples(spark)
    for view, filename in REFERENCE_FILES.items():
        path = str(files("warehouse").joinpath("data", filename))
        spark.read.csv(path, header=True, inferSchema=True).createOrReplaceTempView(view)
    # the carbon intensity as DuckDB has it (warehouse.emissions.register_intensity); none:
    # kg_co2e is null (unknown)
    rows = [] if intensity is None else intensity_table(intensity).to_pylist()
    spark.createDataFrame(
        rows, ", ".join(f"`{f.name}` {_spark_type(f.type)}" for f in intensity_schema())
    ).createOrReplaceTempView("carbon_intensity")
    for mart, _ in marts:  # a mart may be read (empty) before it is built, e.g. its data end
        empty = MARTS[mart].schema.empty_table()
        spark.createDataFrame(
            [], ", ".join(f"`{f.name}` {_spark_type(f.type)}" for f in empty.schema)
        ).createOrReplaceTempView(mart)
    counts: dict[str, int] = {}
    views = _Views(spark, tuple(m for m, _ in marts))
    try:
        for mart, query in marts:
            if progress:
                progress(mart)
            started = time.perf_counter()
            views.define_for(query, counts)
            defined = time.perf_counter()
            # computed once, and read by later marts as rows, not as their plan again
            frame = _run(spark, query, params).localCheckpoint()
            frame.createOrReplaceTempView(mart)
            # every cluster's partitions replaced, and those of a cluster with no rows now
            # removed (its data left the lake: its figures stayed, beside 0 rows said)
            counts[mart] = land_mart(root, mart, frame.toArrow())
            logger.debug(
                "%s: views %.1f s, mart %.1f s",
                mart,
                defined - started,
                time.perf_counter() - defined,
            )
    finally:  # the computed rows are let go with the last views that name them
        computed = (
            "unowned_samples",
            "owned_samples",
            *(m for m, _ in marts),
            *(v for v, _ in DERIVED_VIEWS),
        )
        for name in computed:
            spark.catalog.dropTempView(name)
    return counts


@functools.cache
def _reads(query: str) -> frozenset[str]:
    """The tables and views the shipped query `query` reads (and its CTEs' names)."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql.load(query), read="duckdb")
    return frozenset(table.name for table in tree.find_all(exp.Table))


class _Views:
    """The derived views, defined from shipped SQL over the marts built so far.

    A view is bound to the plans of what it reads when it is defined, so the views are defined
    again once a mart they read (gpu_job_buckets, job_energy_hourly) has been built; a view of
    COMPUTED_VIEWS is computed once per definition, before the first mart that reads it
    (directly or through another view), and later marts read the computed rows.
    """

    def __init__(self, spark: SparkSession, marts: tuple[str, ...]) -> None:
        self.spark = spark
        self.read = frozenset(m for m in marts if any(m in _reads(q) for _, q in DERIVED_VIEWS))
        self.built: frozenset[str] | None = None  # the marts the views were defined over
        self.computed: dict[str, DataFrame] = {}

    def define_for(self, query: str, built: Mapping[str, int]) -> None:
        """Define the views for the mart `query`, `built` the marts built before it."""
        now = frozenset(self.read & set(built))
        if now != self.built:
            self.computed = {}
            self.built = now
        needed = set(_reads(query))
        for view, view_query in reversed(DERIVED_VIEWS):  # and the views those read
            if view in needed:
                needed |= _reads(view_query)
        for view, view_query in DERIVED_VIEWS:  # in order: each may read the ones before
            frame = self.computed.get(view)
            if frame is None:
                frame = self.spark.sql(transpile(sql.load(view_query)))
                if view in COMPUTED_VIEWS and view in needed:
                    frame = frame.localCheckpoint()
                    self.computed[view] = frame
            frame.createOrReplaceTempView(view)
