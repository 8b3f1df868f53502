"""Predictive models (scikit-learn): failing GPUs, early waste, run-time quantiles, lemon nodes.

`predict(con, lake, now)` is the models' entry for `gpuledger detect`: it loads the models
stored in the lake (`detectors.models.store`), scores the lake's history up to `now`, and
returns `findings` rows with `predicted=true` and `score`. Models not trained yet are skipped.
Training is `detectors.models.training.train_all`.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from detectors.findings import FINDINGS_SCHEMA, FRAME_SCHEMA, Severity, to_findings
from detectors.models import early_waste, failing_gpu, lemon, runtime, store
from detectors.models.compute import one_thread
from detectors.models.training import (
    FAILING_GPU,
    LEMON,
    RUNTIME,
    TrainingData,
    early_waste_name,
    load_data,
)
from warehouse import queries
from warehouse.lake import Lake

if TYPE_CHECKING:
    import duckdb

__all__ = ["as_of", "data_ends", "model_frames", "predict", "predict_frames", "producer"]

_TS = pl.Datetime("ms", "UTC")
QUERY_ENDS = "models/data_end"
logger = logging.getLogger(__name__)
TIME_LIMIT_FACTOR = 2.0  # a time limit over this × the p90 run time is worth a finding
TIME_LIMIT_MIN_GPU_H = 1.0  # ... when it holds at least this many GPU-hours of limit
ADVISED_OVER_P90 = 1.2  # the time limit advised: the p90 run time and a fifth more


def as_of(data: TrainingData, now: dt.datetime) -> TrainingData:
    """What was known at `now`: later samples and events dropped, later job ends unknown."""
    end = pl.col("end_ts") > now
    jobs = data.jobs.filter(pl.col("start_ts") <= now).with_columns(
        pl.when(end).then(None).otherwise(pl.col("end_ts")).alias("end_ts"),
        pl.when(end).then(None).otherwise(pl.col("runtime_s")).alias("runtime_s"),
        pl.when(end).then(None).otherwise(pl.col("low_busy_frac")).alias("low_busy_frac"),
    )
    return TrainingData(
        hourly=data.hourly.filter(pl.col("hour") + pl.duration(hours=1) <= now),
        failures=data.failures.filter(pl.col("ts") <= now),
        jobs=jobs,
        early=data.early,  # windows are bounded by each job's start + minutes (checked below)
        node_days=data.node_days.filter(pl.col("day") < now.date()),
    )


def _with_data_end(rows: pl.DataFrame, ends: pl.DataFrame | None, now: dt.datetime) -> pl.DataFrame:
    """`rows` with `data_end` and `telemetry_end`: where each one's cluster's data and its
    telemetry end (`ends`' rows, `data_ends`), never after `now`. Without `ends` the
    caller's `now` is the end of both (a replay's, an evaluation's); a cluster `ends` has no
    data end for has none to hold a finding, and its rows are left out."""
    bound = pl.lit(now).cast(_TS)
    if ends is None:
        return rows.with_columns(bound.alias("data_end"), bound.alias("telemetry_end"))
    # (rows keep their order: messages are built beside them)
    rows = rows.join(ends, on="cluster", how="left", maintain_order="left")
    data_end = pl.min_horizontal(pl.col("data_end").cast(_TS), bound)
    telemetry_end = pl.col("telemetry_end").cast(_TS)  # (null: the cluster has none)
    return rows.filter(pl.col("data_end").is_not_null()).with_columns(
        data_end.alias("data_end"),
        pl.when(telemetry_end > data_end)
        .then(data_end)
        .otherwise(telemetry_end)
        .alias("telemetry_end"),
    )


def _frame(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` with every FRAME_SCHEMA column (missing ones null) plus `detected_ts`."""
    cols = [
        (pl.col(c) if c in rows.columns else pl.lit(None)).cast(t).alias(c)
        for c, t in FRAME_SCHEMA.items()
    ]
    return rows.select(*cols, pl.col("detected_ts").cast(_TS))


def _failing_gpu(
    data: TrainingData,
    card: store.ModelCard,
    model: Any,
    now: dt.datetime,
    data_end: pl.DataFrame | None = None,
) -> pl.DataFrame:
    horizon = float(card.params.get("horizon_h", 24.0))
    frame = failing_gpu.label(failing_gpu.features(data.hourly), data.failures, horizon)
    scored = failing_gpu.score(model, frame, tuple(card.features) or failing_gpu.FEATURES)
    if failing_gpu.not_evaluated(card) is not None or card.threshold is None:
        return _frame(pl.DataFrame(schema={"detected_ts": _TS}))  # see `gpuledger train`
    threshold = card.threshold
    episodes = failing_gpu.alarm_episodes(
        scored, threshold, float(card.params.get("merge_gap_h", 6.0))
    )
    # the alarm stands for the horizon after its last alarming hour, but no finding runs past
    # the end of its cluster's data (`gpuledger check` holds every finding inside it); a
    # cluster with no data end has none to hold one (the messages are built after: one per row)
    episodes = _with_data_end(episodes, data_end, now)
    if episodes.is_empty():
        return _frame(pl.DataFrame(schema={"detected_ts": _TS}))
    msgs = [
        failing_gpu.message(g, n, s, horizon)
        for g, n, s in episodes.select("gpu_uuid", "node", "score").iter_rows()
    ]
    evidence = [
        json.dumps(
            {
                "horizon_h": horizon,
                "threshold": threshold,
                "alarm_hours": h,
                "model_trained": card.trained_ts,
            },
            sort_keys=True,
        )
        for h in episodes["hours"].to_list()
    ]
    until = pl.min_horizontal(pl.col("end_ts") + pl.duration(hours=horizon), pl.col("data_end"))
    return _frame(
        episodes.with_columns(
            pl.lit(failing_gpu.DETECTOR).alias("detector"),
            pl.lit(Severity.CRITICAL.value).alias("severity"),
            pl.lit("gpu").alias("subject_kind"),
            pl.col("gpu_uuid").alias("subject_id"),
            pl.col("detected_ts").alias("anchor_ts"),
            pl.col("detected_ts").alias("start_ts"),
            pl.max_horizontal(until, pl.col("detected_ts")).alias("end_ts"),
            pl.lit(True).alias("predicted"),
            pl.Series("message", msgs, pl.String),
            pl.Series("evidence", evidence, pl.String),
        )
    )


def _early_waste(
    data: TrainingData,
    minutes: int,
    card: store.ModelCard,
    model: Any,
    now: dt.datetime,
    data_end: pl.DataFrame | None = None,
) -> pl.DataFrame:
    due = pl.col("start_ts") + pl.duration(minutes=minutes)
    rows = early_waste.frame(data.jobs, data.early[minutes], minutes).filter(due <= now)
    # and inside its cluster's telemetry: "30 min in" from 13 min seen
    rows = _with_data_end(rows, data_end, now).filter(due <= pl.col("telemetry_end"))
    rows = rows.filter(~_trained_on(card))
    threshold = card.threshold
    if early_waste.not_evaluated(card) is not None or threshold is None:
        return _frame(pl.DataFrame(schema={"detected_ts": _TS}))  # see `gpuledger train`
    hits = early_waste.score(model, rows).filter(pl.col("score") >= threshold)
    if hits.is_empty():
        return _frame(pl.DataFrame(schema={"detected_ts": _TS}))
    # What the job can still hold after the prediction: up to its time limit while it runs,
    # what it did hold once it has ended (known as of `now`), never more than that.
    ended = pl.col("end_ts").is_not_null()
    held_s = pl.when(ended).then(pl.col("runtime_s")).otherwise(pl.col("time_limit_s"))
    at_stake = pl.col("gpus") * (held_s - minutes * 60).clip(lower_bound=0) / 3600.0
    hits = hits.with_columns(pl.when(ended).then(at_stake).alias("held_after_gpu_h"))
    msgs = [
        early_waste.message(j, u or "unknown user", minutes, s, held)
        for j, u, s, held in hits.select("job_id", "user", "score", "held_after_gpu_h").iter_rows()
    ]
    at = pl.col("start_ts") + pl.duration(minutes=minutes)
    # `forecast`: the figure reaches to the job's time limit (it ran when found), not what it
    # held: a message says so, whatever the job has done since (app/alerts/findings.py)
    evidence = [
        json.dumps(
            {
                "minutes": minutes,
                "threshold": threshold,
                "early_busy": b,
                "user_waste_rate": w,
                "model_trained": card.trained_ts,
                "forecast": held is None,
            },
            sort_keys=True,
        )
        for b, w, held in hits.select(
            "early_busy", "user_waste_rate", "held_after_gpu_h"
        ).iter_rows()
    ]
    return _frame(
        hits.with_columns(
            pl.lit(f"{early_waste.DETECTOR}_{minutes}m").alias("detector"),
            pl.lit(Severity.WARN.value).alias("severity"),
            pl.lit("job").alias("subject_kind"),
            pl.col("job_id").alias("subject_id"),
            pl.col("start_ts").alias("anchor_ts"),
            pl.col("end_ts").fill_null(pl.col("data_end")).alias("end_ts"),
            pl.lit(True).alias("predicted"),
            at_stake.alias("gpu_h_at_stake"),
            pl.Series("message", msgs, pl.String),
            pl.Series("evidence", evidence, pl.String),
            at.alias("detected_ts"),
        )
    )


def _trained_on(card: store.ModelCard) -> pl.Expr:
    """Whether a job row is one the model learnt from (its outcome was its label): a job of a
    cluster it trained on that started inside its training window and had ended by the last
    end the fit saw (the card's `labels_end`). A finding on such a job would be the model
    repeating its lesson, not a prediction. (The card's stamp is no bound: `train --now` set
    it, and one before the window let the model predict the very jobs it learnt from; a card
    without `labels_end`, from an earlier version, is bounded by its stamp but never before
    its window's end.)"""
    if not card.clusters or card.window_end is None:
        return pl.lit(False)
    window_end = dt.datetime.fromisoformat(card.window_end)  # (a card's times are checked ISO)
    try:
        learnt_until = dt.datetime.fromisoformat(card.params["labels_end"])
    except (KeyError, TypeError, ValueError):
        learnt_until = max(dt.datetime.fromisoformat(card.trained_ts), window_end)
    return (
        pl.col("cluster").is_in(list(card.clusters))
        & (pl.col("start_ts") <= pl.lit(window_end).cast(_TS))
        & (pl.col("end_ts") <= pl.lit(learnt_until).cast(_TS)).fill_null(False)
    )


def _runtime(
    data: TrainingData,
    card: store.ModelCard,
    models: Any,
    now: dt.datetime,
    data_end: pl.DataFrame | None = None,
) -> pl.DataFrame:
    running = runtime.frame(data.jobs).filter(pl.col("end_ts").is_null())
    rows = _with_data_end(runtime.predict_quantiles(models, running), data_end, now)
    # seen running to the end of its cluster's data (data_extent's: its scheduler's records
    # may run past the telemetry, or be all there is), never to the run's clock
    rows = rows.filter(pl.col("start_ts") <= pl.col("data_end"))
    # a job that has run past the limit the finding would advise (p90 + 20 %) has shown the
    # model wrong about it: that limit would have killed it. What the limit leaves unused is
    # at most what is left of it.
    ran_s = (pl.col("data_end") - pl.col("start_ts")).dt.total_seconds().clip(lower_bound=0)
    slack_h = (
        (pl.col("time_limit_s") - pl.max_horizontal(pl.col("p90_s"), ran_s))
        * pl.col("gpus")
        / 3600.0
    )
    hits = rows.filter(
        (pl.col("time_limit_s") > TIME_LIMIT_FACTOR * pl.col("p90_s"))
        & (ran_s < ADVISED_OVER_P90 * pl.col("p90_s"))
        & (slack_h >= TIME_LIMIT_MIN_GPU_H)
    ).with_columns(slack_h.alias("gpu_h_at_stake"))
    if hits.is_empty():
        return _frame(pl.DataFrame(schema={"detected_ts": _TS}))
    msgs, evidence = [], []
    for j, limit, p50, p90 in hits.select("job_id", "time_limit_s", "p50_s", "p90_s").iter_rows():
        msgs.append(
            f"Job {j}: time limit {limit / 3600:.1f} h, but jobs like it run {p50 / 3600:.1f} h "
            f"(p50) to {p90 / 3600:.1f} h (p90); next time use "
            f"--time={_slurm_time(p90 * ADVISED_OVER_P90)}"
        )
        evidence.append(
            json.dumps(
                {
                    "p50_s": p50,
                    "p90_s": p90,
                    "time_limit_s": limit,
                    "model_trained": card.trained_ts,
                },
                sort_keys=True,
            )
        )
    return _frame(
        hits.with_columns(
            pl.lit(runtime.DETECTOR).alias("detector"),
            pl.lit(Severity.INFO.value).alias("severity"),
            pl.lit("job").alias("subject_kind"),
            pl.col("job_id").alias("subject_id"),
            pl.col("start_ts").alias("anchor_ts"),
            pl.col("data_end").alias("end_ts"),  # running: seen to the end of the data
            pl.lit(True).alias("predicted"),
            (pl.col("p90_s") / pl.col("time_limit_s")).clip(0, 1).alias("score"),
            pl.Series("message", msgs, pl.String),
            pl.Series("evidence", evidence, pl.String),
            pl.col("start_ts").alias("detected_ts"),
        )
    )


def _slurm_time(seconds: float) -> str:
    minutes = max(1, int(-(-seconds // 60)))
    days, rest = divmod(minutes, 24 * 60)
    return (
        f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"
        if days
        else f"{rest // 60}:{rest % 60:02d}:00"
    )


def _lemon(data: TrainingData, card: store.ModelCard, model: Any) -> pl.DataFrame:
    rows = lemon.score(model, lemon.frame(data.node_days))
    hits = rows.filter(pl.col("flagged"))
    if hits.is_empty():
        return _frame(pl.DataFrame(schema={"detected_ts": _TS}))
    day_start = pl.col("day").cast(pl.Datetime("ms")).dt.replace_time_zone("UTC")
    reasons = hits.select("node", "day", "xids", "jobs_failed", "jobs_ended", "sbe_max")
    msgs = [lemon.message(*row) for row in reasons.iter_rows()]
    return _frame(
        hits.with_columns(
            pl.lit(lemon.DETECTOR).alias("detector"),
            pl.lit(Severity.WARN.value).alias("severity"),
            pl.lit("node").alias("subject_kind"),
            pl.col("node").alias("subject_id"),
            day_start.alias("anchor_ts"),
            day_start.alias("start_ts"),
            (day_start + pl.duration(days=1)).alias("end_ts"),
            pl.lit(True).alias("predicted"),
            pl.col("anomaly").alias("score"),
            pl.Series("message", msgs, pl.String),
            pl.struct("xids", "jobs_failed", "jobs_ended", "sbe_max", "throttle_frac", "anomaly")
            .struct.json_encode()
            .alias("evidence"),
            (day_start + pl.duration(days=1)).alias("detected_ts"),
        )
    )


def model_frames(
    lake: Lake, data: TrainingData, now: dt.datetime, data_end: pl.DataFrame | None = None
) -> list[pl.DataFrame]:
    """Each stored model's findings frame (FRAME_SCHEMA + detected_ts) over `data` as of `now`;
    `data_end` (`data_ends`: cluster, data_end, telemetry_end): each finding ends inside its
    cluster's data, and an early prediction is made only where its cluster's telemetry reach
    the minutes it needs (without it, `now` is taken as the end of both)."""
    known = as_of(data, now)
    frames = []
    stored = set(_stored(lake))
    if FAILING_GPU in stored and (found := _load(lake, FAILING_GPU)):
        frames.append(_failing_gpu(known, *found, now, data_end))
    for minutes in sorted(known.early):
        name = early_waste_name(minutes)
        if name in stored and (found := _load(lake, name, early_waste.FEATURES)):
            frames.append(_early_waste(known, minutes, *found, now, data_end))
    if RUNTIME in stored and (found := _load(lake, RUNTIME, runtime.FEATURES)):
        frames.append(_runtime(known, *found, now, data_end))
    if LEMON in stored and (found := _load(lake, LEMON, lemon.FEATURES)):
        frames.append(_lemon(known, *found))
    return frames


def _load(
    lake: Lake, name: str, features: tuple[str, ...] | None = None
) -> tuple[store.ModelCard, Any] | None:
    """The stored model `name` and its card; None, said, where its card stands without the
    model or it was trained on other features (another version): skipped, as untrained."""
    try:
        return store.load(lake, name, features)
    except store.ModelNotTrained as exc:
        logger.warning("%s; its findings are left out", exc)
        return None


def _stored(lake: Lake) -> list[str]:
    folder = store.model_dir(lake)
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def predict_frames(frames: list[pl.DataFrame], now: dt.datetime) -> pa.Table:
    """Findings rows of `frames`, each keeping its own detected_ts (when it was predictable)."""
    frames = [f for f in frames if f.height]
    if not frames:
        return FINDINGS_SCHEMA.empty_table()
    rows = pl.concat(frames, how="vertical")
    table = to_findings(rows.drop("detected_ts"), detected_ts=now)
    detected = rows.unique(
        subset=["cluster", "detector", "subject_kind", "subject_id", "anchor_ts"],
        keep="first",
        maintain_order=True,
    )["detected_ts"]
    index = table.schema.get_field_index("detected_ts")
    return table.set_column(
        index,
        FINDINGS_SCHEMA.field("detected_ts"),
        detected.to_arrow().cast(FINDINGS_SCHEMA.field("detected_ts").type),
    )


def data_ends(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Where each cluster's data end (data_extent's, every rule's "now") and where its
    telemetry ends (null: none), never the run's clock (sql/models/data_end.sql)."""
    return pl.DataFrame(
        [(r["cluster"], r["data_end"], r["telemetry_end"]) for r in queries.rows(con, QUERY_ENDS)],
        schema={"cluster": pl.String, "data_end": _TS, "telemetry_end": _TS},
        orient="row",
    )


def predict(con: duckdb.DuckDBPyConnection, lake: Lake, now: dt.datetime) -> pa.Table:
    """Findings of every model stored in `lake` over its history up to `now` (predicted=true).

    A model not trained yet is skipped; with none trained the result is empty.
    """
    if not _stored(lake):
        return FINDINGS_SCHEMA.empty_table()
    data_end = data_ends(con)
    with one_thread():
        return predict_frames(model_frames(lake, load_data(con), now, data_end), now)


def producer(
    lake: Lake,
) -> Callable[[duckdb.DuckDBPyConnection, dt.datetime, dt.datetime], pa.Table]:
    """`predict` for `lake` in the shape of `gpuledger detect`'s finding producers
    `(con, now, since)`. Models look at the whole history (their features need it); `detect
    --since` keeps the findings whose span reaches `since` (`detectors.findings.seen_since`),
    as it does the rules'. (Dropping those detected before `since` lost a prediction about a
    job still running then, made possible only by data that came after the last run.)"""

    def run(con: duckdb.DuckDBPyConnection, now: dt.datetime, since: dt.datetime) -> pa.Table:
        return predict(con, lake, now)

    return run
