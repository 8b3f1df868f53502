"""One pipeline round: compact → attribute → detect → recommend (alert is app.alerts.runner).

Every caller — `gpuledger attribute`, `detect`, `demo`, `run` (the service), `bench`,
`evaluate` — runs these steps with a `PipelineConfig` (app.pipeline.settings), so the same
file gives the same marts and the same findings whichever command ran them.

Findings: the rules run with each detector's own thresholds (`[detect.<detector>]`); the other
producers (the bottleneck diagnosis, the trained models) beside them; then, in one place
(`scope_findings`), a disabled detector's findings are dropped and each detector's scope
(partitions, accounts, users, QOS of the finding's job or subject) applied; each finding's
evidence records the configuration that produced it (`config.id`, the detector's thresholds).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.pipeline.settings import PipelineConfig, Scope
from warehouse.connection import register_table
from warehouse.lake import SETTLED_READ_ATTEMPTS, Lake
from warehouse.writer_lock import writer_step

if TYPE_CHECKING:
    import duckdb
    import polars as pl
    import pyarrow as pa

__all__ = [
    "FINDING_PRODUCERS",
    "AttributeOutcome",
    "DetectOutcome",
    "FindingProducer",
    "attribute",
    "bottleneck_producer",
    "compact",
    "detect",
    "keep_detector_days",
    "rule_findings",
    "scope_findings",
    "scope_recommendations",
]

logger = logging.getLogger(__name__)

# (connection, now, since) -> a table in the `findings` schema (warehouse.schema FINDINGS).
# `since` may only narrow which subjects a producer examines: each finding's figures come from
# all the lake's data (a job's whole run, a user's whole 7 days), since a finding found again
# replaces the stored one under its id. `detect` then keeps the findings seen since then.
FindingProducer = Callable[["duckdb.DuckDBPyConnection", dt.datetime, dt.datetime], "pa.Table"]

Progress = Callable[[int, int], None]

# ---------------------------------------------------------------- compact and attribute


def compact(lake: Lake, now: dt.datetime, since: dt.date | None = None) -> int:
    """DESIGN §3: merge the small files of closed UTC days (from `since` on); return how many
    day partitions were compacted (0 when the lake does not exist yet)."""
    from warehouse.writer import compact_closed_days

    if not lake.exists():
        return 0
    return compact_closed_days(lake.root, now.astimezone(dt.UTC).date(), since=since)


@dataclass(frozen=True, slots=True)
class AttributeOutcome:
    """What one attribution did: the rows of each mart, the day partitions compacted first,
    and (DuckDB) the days of the sample-level marts built again and their tails."""

    counts: dict[str, int]
    compacted: int = 0
    days_rebuilt: int = 0
    tails_rebuilt: int = 0


def attribute(
    lake: Lake,
    config: PipelineConfig,
    now: dt.datetime,
    *,
    since: dt.datetime | None = None,
    force: bool = False,
    engine: str = "duckdb",
    spark_master: str | None = None,
    spark_source: str | None = None,
    days_progress: Progress | None = None,
    marts_progress: Progress | None = None,
    attempts: int = SETTLED_READ_ATTEMPTS,
) -> AttributeOutcome:
    """Compact closed days, then bring every mart up to date (raw files are never rewritten:
    each sample's owner is decided as its day's partitions are built).

    `since`: days before it are neither compacted nor built again. Up to `attempts` builds:
    the lake is read afresh after a DuckDB error or a file gone while a source landed files
    under the build (a partial Prometheus window landing again, an import re-landing its
    batches); an error on raw files that did not change is raised at once (`Lake.read_settled`;
    a Spark build's own errors are not retried).
    """
    from warehouse.attribution import MART_ORDER
    from warehouse.attribution import attribute as update_marts
    from warehouse.errors import EmptyWarehouse
    from warehouse.summary.whole import SUMMARY_RAW_TABLES

    since_day = since.astimezone(dt.UTC).date() if since else None
    compacted = compact(lake, now, since_day)
    built = [0]  # marts built so far in this attempt

    def step(_mart: str) -> None:
        built[0] += 1
        if marts_progress is not None:
            marts_progress(built[0], len(MART_ORDER))

    if engine == "spark" and spark_source is not None:
        return _attribute_on_spark(lake, config, spark_master, spark_source, step, compacted)

    def once() -> AttributeOutcome:
        built[0] = 0
        # the scheduler's records alone give the allocation marts (no telemetry: nothing
        # observed); neither is a lake with nothing to attribute
        if not lake.table_files("gpu_samples") and not lake.table_files("jobs"):
            raise EmptyWarehouse(lake.root, "'gpu_samples' or 'jobs'")
        if engine == "spark":
            from warehouse.spark import build_marts_on_spark, spark_session

            counts = build_marts_on_spark(
                spark_session(spark_master),
                lake.root,
                config.attribution.values(),
                MART_ORDER,
                progress=step,
                intensity=config.attribution.emissions,
            )
            return AttributeOutcome(counts, compacted)
        # no connection over the whole lake: the update reads what changed, so its cost
        # does not grow with the files of the lake's history
        result = update_marts(
            None,
            lake.root,
            config.attribution,
            progress=step,
            force=force,
            since=since_day,
            days_progress=days_progress,
            warehouse=lake.config(),
        )
        return AttributeOutcome(
            result.mart_rows, compacted, len(result.days.rebuilt), len(result.days.tails)
        )

    # built again from the lake as it is now when a source landed or re-landed files under
    # the build (a DuckDB error or a file gone): the tables it reads changed meanwhile (not
    # detect's findings: a detect beside it is no reason to build again)
    return lake.read_settled(once, attempts=attempts, tables=("gpu_samples", *SUMMARY_RAW_TABLES))


def _attribute_on_spark(
    lake: Lake,
    config: PipelineConfig,
    spark_master: str | None,
    spark_source: str,
    step: Callable[[str], None],
    compacted: int,
) -> AttributeOutcome:
    """Build every mart on Spark from the raw tables at the lake URL `spark_source` (object
    storage), landing them in `lake` (no raw table need be in `lake`)."""
    from warehouse import layout
    from warehouse.attribution import MART_ORDER
    from warehouse.spark import build_marts_on_spark, spark_session

    layout.ensure_dir(lake.root)  # with the lake's group and mode: it may hold no raw table yet
    counts = build_marts_on_spark(
        spark_session(spark_master),
        lake.root,
        config.attribution.values(),
        MART_ORDER,
        progress=step,
        source=spark_source,
        intensity=config.attribution.emissions,
    )
    return AttributeOutcome(counts, compacted)


# ---------------------------------------------------------------- detect


def rule_findings(
    con: duckdb.DuckDBPyConnection,
    config: PipelineConfig,
    now: dt.datetime,
    *,
    stored: bool = False,
) -> pa.Table:
    """The waste and health rules over all the data (their windows would cut a job's run or a
    user's 7 days at `since`), each detector with its own thresholds. `stored`: the lake's
    stored health hours are up to date (`keep_detector_days`): the rules read them.

    Detectors with the same effective RuleConfig share one run of the rules; a detector whose
    thresholds differ gets a run of its family's rules with them, keeping only its rows.
    """
    import polars as pl

    from app.pipeline.settings import DEFAULT_RULES
    from detectors.findings import FRAME_SCHEMA, to_findings
    from detectors.rules import DETECTORS, RuleConfig
    from detectors.rules.base import Window
    from detectors.rules.precedence import one_waste_detector
    from detectors.rules.run import FAMILY_RULES, RULES, detect_frame

    groups: dict[RuleConfig, list[str]] = {}
    for name in DETECTORS:
        if config.detector(name).enabled:
            groups.setdefault(config.rule_config(name), []).append(name)
    window = Window(now=now)
    default = DEFAULT_RULES  # the detectors whose thresholds are all left as they are
    frames = []
    for rule_config, names in groups.items():
        if rule_config == default:
            rules = RULES
        else:
            families = {config.detector(n).family for n in names}
            rules = tuple(r for r in RULES if any(r in FAMILY_RULES[f] for f in families if f))
        frame = detect_frame(con, rule_config, window, rules, stored=stored)
        frames.append(frame.filter(pl.col("detector").is_in(names)))
    if not frames:  # every rule detector is disabled
        frames.append(pl.DataFrame(schema=FRAME_SCHEMA))
    # a job wasting its GPUs gets the one detector that describes it (idle before overallocated)
    found = one_waste_detector(pl.concat(frames, how="vertical"))
    return to_findings(found, detected_ts=now)


def bottleneck_producer(
    con: duckdb.DuckDBPyConnection, now: dt.datetime, since: dt.datetime
) -> pa.Table:
    """Jobs whose bottleneck (input-, memory-, communication-bound, underused) has a fix (every
    job: one started before `since` may still run after it), from the sums `detect` keeps a
    day at a time (`keep_detector_days`)."""
    from detectors.bottleneck_findings import bottleneck_findings
    from detectors.rules.base import EPOCH
    from warehouse.detector_days import BOTTLENECK_DEVICES

    stored = _has_view(con, BOTTLENECK_DEVICES.table)  # detect made it: the days are kept
    return bottleneck_findings(con, now, EPOCH, stored=stored)


def _has_view(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    found = con.execute(
        "SELECT count(*) FROM duckdb_views() WHERE view_name = $name", {"name": name}
    ).fetchone()
    return bool(found and found[0])


def keep_detector_days(lake: Lake) -> tuple[str, ...]:
    """Bring what detect keeps of the samples a day at a time up to date: each GPU's health
    hours and corrected-ECC hours, each job's GPUs' bottleneck sums (with the default
    thresholds the producers use). Returns why the kept rows are not what every sample gives
    (empty when they are)."""
    from detectors.bottleneck import BottleneckThresholds, device_params
    from detectors.rules.base import EPOCH
    from warehouse.detector_days import BOTTLENECK_DEVICES, ECC_HOURS, HEALTH_HOURS, refresh

    done = [
        refresh(lake.config(), HEALTH_HOURS, {"since": EPOCH}),
        refresh(lake.config(), ECC_HOURS, {}),
        refresh(lake.config(), BOTTLENECK_DEVICES, device_params(BottleneckThresholds())),
    ]
    return tuple(dict.fromkeys(reason for refreshed in done for reason in refreshed.outside))


# The producers beside the rules; every producer's rows are merged and written once per run.
FINDING_PRODUCERS: list[FindingProducer] = [bottleneck_producer]


def _job_scope(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    from warehouse import queries

    return queries.run(con, "jobs/job_scope")


def _in_scope(scope: Scope) -> pl.Expr:
    """Whether a finding (with its job's `partition` and `qos` joined) is in `scope`. A finding
    about no job (a GPU, a user's week) has no partition or QOS: only users and accounts
    apply to it."""
    import polars as pl

    keep = pl.lit(True)
    if scope.partitions:
        keep &= pl.col("_partition").is_null() | pl.col("_partition").is_in(scope.partitions)
    for column, excluded in (
        ("_partition", scope.exclude_partitions),
        ("_qos", scope.exclude_qos),
        ("_user", scope.exclude_users),
        ("_account", scope.exclude_accounts),
    ):
        if excluded:
            keep &= ~pl.col(column).is_in(excluded).fill_null(False)
    return keep


def scope_findings(
    findings: pa.Table, config: PipelineConfig, jobs: Callable[[], pl.DataFrame]
) -> pa.Table:
    """Drop the findings of disabled detectors and those outside each detector's scope.

    `jobs()` gives (cluster, job_id, partition, qos, user, account) of every job; it is read
    only when some detector is scoped.
    """
    import polars as pl

    settings = [config.detector(n) for n in {*findings.column("detector").to_pylist()}]
    disabled = [d.name for d in settings if not d.enabled]
    scoped = [d for d in settings if d.enabled and not d.scope.everything]
    if not disabled and not scoped:
        return findings
    frame = pl.from_arrow(findings)
    assert isinstance(frame, pl.DataFrame)
    frame = frame.filter(~pl.col("detector").is_in(disabled))
    if scoped:
        known = jobs().select(
            "cluster",
            "job_id",
            pl.col("partition").alias("_partition"),
            pl.col("qos").alias("_qos"),
            pl.col("user").alias("_job_user"),
            pl.col("account").alias("_job_account"),
        )
        joined = frame.with_row_index("_row").join(known, on=["cluster", "job_id"], how="left")
        joined = joined.with_columns(
            pl.coalesce("user", "_job_user").alias("_user"),
            pl.coalesce("account", "_job_account").alias("_account"),
        )
        keep = pl.lit(True)
        for d in scoped:
            keep = pl.when(pl.col("detector") == d.name).then(_in_scope(d.scope)).otherwise(keep)
        frame = joined.filter(keep).sort("_row").select(frame.columns)
    return frame.to_arrow().cast(findings.schema)


def _stamp(findings: pa.Table, config: PipelineConfig) -> pa.Table:
    """Add `"config": {"id": …, "thresholds": {…}}` to each finding's evidence object."""
    import polars as pl

    frame = pl.from_arrow(findings)
    assert isinstance(frame, pl.DataFrame)
    if frame.is_empty():
        return findings
    stamps = {n: f'"config":{config.evidence(n)}' for n in set(frame["detector"].to_list())}
    stamp = pl.col("detector").replace_strict(stamps, return_dtype=pl.String)
    evidence = pl.col("evidence").str.strip_chars()
    frame = frame.with_columns(
        pl.when(evidence.is_null() | (evidence == "{}") | (evidence == ""))
        .then(pl.concat_str(pl.lit("{"), stamp, pl.lit("}")))
        .otherwise(pl.concat_str(evidence.str.strip_suffix("}"), pl.lit(","), stamp, pl.lit("}")))
        .alias("evidence")
    )
    return frame.to_arrow().cast(findings.schema)


def scope_recommendations(recs: pa.Table, config: PipelineConfig) -> pa.Table:
    """Drop recommendations of a recommender's excluded subjects: a recommendation scoped to
    `partition=…`, `account=…` or `user=…` (its `scope`) is judged by that subject."""
    import polars as pl

    scoped = {r.kind: r.scope for r in config.recommend.recommenders if not r.scope.everything}
    if not scoped or recs.num_rows == 0:
        return recs
    frame = pl.from_arrow(recs)
    assert isinstance(frame, pl.DataFrame)
    what = pl.col("scope").str.split_exact("=", 1)
    frame = frame.with_columns(
        what.struct.field("field_0").alias("_what"), what.struct.field("field_1").alias("_value")
    )
    for name in ("partition", "qos", "user", "account"):
        frame = frame.with_columns(
            pl.when(pl.col("_what") == name).then(pl.col("_value")).alias(f"_{name}")
        )
    keep = pl.lit(True)
    for kind, scope in scoped.items():
        keep = pl.when(pl.col("kind") == kind).then(_in_scope(scope)).otherwise(keep)
    return frame.filter(keep).select(recs.column_names).to_arrow().cast(recs.schema)


@dataclass(frozen=True, slots=True)
class DetectOutcome:
    """What one detect run found and stored."""

    findings: pa.Table
    new: int
    updated: int
    recommendations: int
    unchanged: int = 0


@writer_step("detect", root_arg="lake")
def detect(
    lake: Lake,
    config: PipelineConfig,
    now: dt.datetime,
    since: dt.datetime | None = None,
    *,
    recommend: bool = True,
) -> DetectOutcome:
    """Run every finding producer, scope and upsert the findings, then replay the
    recommendations (the recommenders `config` enables, with their thresholds).

    With `since`, only findings about problems seen at or after it (their span ends then or
    later, or is open) are stored; their figures come from all the data, so a finding found
    whole before is stored again as it was, not with the figures of a shorter window.

    Run again where a collector or another process replaced lake files under its reads
    (`Lake.read_settled`): 6 of 14 runs failed beside a collector re-landing its windows.
    Every write it makes is an upsert, so a second run stores what one run would.
    """
    return lake.read_settled(lambda: _detect_once(lake, config, now, since, recommend=recommend))


def _detect_once(
    lake: Lake,
    config: PipelineConfig,
    now: dt.datetime,
    since: dt.datetime | None,
    *,
    recommend: bool,
) -> DetectOutcome:
    import pyarrow as pa

    from detectors.findings import FINDINGS_SCHEMA, seen_since, write_findings
    from detectors.models import producer as model_producer
    from detectors.rules.base import EPOCH
    from warehouse.detector_days import BOTTLENECK_DEVICES, ECC_HOURS, HEALTH_HOURS
    from warehouse.errors import EmptyWarehouse
    from warehouse.schema import TABLES
    from warehouse.writer import conform

    # the marts built: a lake of telemetry alone (no scheduler yet) has sample buckets and no
    # job_usage row, and its GPUs' hardware findings (an XID 79) are found all the same
    if not lake.table_files("job_usage") and not lake.table_files("gpu_job_buckets"):
        raise EmptyWarehouse(lake.root, "'job_usage'")
    con = lake.connect()
    con.execute("SET enable_progress_bar = false")  # keep the summary the only output
    try:
        # what the health rules and the bottleneck diagnosis read of the samples, computed for
        # the days whose inputs changed since the last run (warehouse/detector_days.py); read
        # unless some samples lie where the days cannot hold them (then every sample is read)
        outside = keep_detector_days(lake)
        for store in (HEALTH_HOURS, ECC_HOURS, BOTTLENECK_DEVICES):
            if outside:
                con.execute(f"DROP VIEW IF EXISTS {store.table}")  # a name of ours
            else:
                register_table(con, lake.root, store.table)
        if outside:
            logger.warning("detect reads every sample: %s", "; ".join(outside))
        tables = [rule_findings(con, config, now, stored=not outside)]
        # the other producers, then the predictive models (trained by `gpuledger train`)
        for produce in [*FINDING_PRODUCERS, model_producer(lake)]:
            tables.append(produce(con, now, since or EPOCH))
        # Each producer's rows are checked against the contract before they are merged.
        findings = pa.concat_tables(
            [FINDINGS_SCHEMA.empty_table()]
            + [conform(TABLES["findings"], table) for table in tables]
        )
        findings = scope_findings(findings, config, lambda: _job_scope(con))
        if since is not None:
            findings = seen_since(findings, since)
        findings = _stamp(findings, config)
        result = write_findings(lake, findings)
        recs = None
        if recommend:
            from detectors.recommend.run import recommend as replay

            # drain_node reads the critical findings just written: their view is renewed (no
            # other view reads findings)
            register_table(con, lake.root, "findings")
            recs = replay(con, config.recommend_config, now, kinds=config.enabled_kinds)
            clusters = [c for (c,) in con.execute("SELECT DISTINCT cluster FROM jobs").fetchall()]
    finally:
        con.close()
    stored = 0
    if recs is not None:
        from detectors.recommend.store import write_recommendations

        stored = write_recommendations(lake, scope_recommendations(recs, config), clusters)
    return DetectOutcome(findings, result.new, result.updated, stored, result.unchanged)
