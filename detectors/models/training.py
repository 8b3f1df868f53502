"""Train every model on one or more lakes' history and store it with its card.

Each model is scored on a time split (trained on the first 70 % of each cluster's history,
tested on the rest), then refitted on all of it and stored (`detectors.models.store`). The
alarm thresholds are chosen on predictions the model made for data it did not see: across
clusters when the training data has several (other seeds), else on the time split.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.models import early_waste, failing_gpu, lemon, runtime
from detectors.models.compute import one_thread
from detectors.models.history import time_split
from detectors.models.store import ModelCard, NotEnoughHistory, now_iso, save
from warehouse import queries
from warehouse.lake import Lake

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "MODEL_NAMES",
    "TRAIN_FRAC",
    "TrainingData",
    "TrainingResult",
    "early_waste_name",
    "history_end",
    "load_data",
    "train_all",
]

TRAIN_FRAC = 0.7
FAILING_GPU = "failing_gpu"
RUNTIME = "runtime_quantiles"
LEMON = "lemon_node"


def early_waste_name(minutes: int) -> str:
    """The store name of the early-waste model for predictions `minutes` into a job."""
    return f"early_waste_{minutes}m"


MODEL_NAMES = (FAILING_GPU, *(early_waste_name(m) for m in (15, 30)), RUNTIME, LEMON)


@dataclass(frozen=True, slots=True)
class TrainingData:
    """The models' inputs, read from one lake (or several, concatenated)."""

    hourly: pl.DataFrame  # gpu_health_hourly
    failures: pl.DataFrame  # gpu_failures
    jobs: pl.DataFrame  # job_features
    early: dict[int, pl.DataFrame]  # job_early_usage per minutes
    node_days: pl.DataFrame  # node_day_health

    @staticmethod
    def concat(parts: list[TrainingData]) -> TrainingData:
        """One TrainingData of several lakes (their cluster names must differ)."""
        minutes = sorted({m for p in parts for m in p.early})
        return TrainingData(
            hourly=pl.concat([p.hourly for p in parts], how="vertical_relaxed"),
            failures=pl.concat([p.failures for p in parts], how="vertical_relaxed"),
            jobs=pl.concat([p.jobs for p in parts], how="vertical_relaxed"),
            early={
                m: pl.concat([p.early[m] for p in parts if m in p.early], how="vertical_relaxed")
                for m in minutes
            },
            node_days=pl.concat([p.node_days for p in parts], how="vertical_relaxed"),
        )


def load_data(
    con: duckdb.DuckDBPyConnection,
    ew: early_waste.EarlyWasteConfig | None = None,
) -> TrainingData:
    """Read the models' inputs from the lake behind `con` (its marts must be built)."""
    ew = ew or early_waste.EarlyWasteConfig()
    return TrainingData(
        hourly=queries.run(con, failing_gpu.QUERY_HOURLY),
        failures=queries.run(con, failing_gpu.QUERY_FAILURES),
        jobs=queries.run(con, early_waste.QUERY_JOBS, busy_below=ew.busy_below),
        early={m: queries.run(con, early_waste.QUERY_EARLY, minutes=m) for m in ew.minutes},
        node_days=queries.run(con, lemon.QUERY),
    )


def history_end(data: TrainingData) -> dt.datetime | None:
    """The latest time the models learn from: an hour of GPU health (its start), or a job's
    start or end (a label is a job's outcome). A model trained "at" an earlier time would be
    stamped before its own window (None: no data)."""
    times = [
        t
        for t in (data.hourly["hour"].max(), data.jobs["start_ts"].max(), data.jobs["end_ts"].max())
        if isinstance(t, dt.datetime)
    ]
    return max(times, default=None)


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, dt.datetime | dt.date) else None


def _card(
    name: str,
    features: tuple[str, ...],
    frame: pl.DataFrame,
    time_col: str,
    now: dt.datetime,
    threshold: float | None,
    metrics: dict[str, Any],
    params: dict[str, Any],
) -> ModelCard:
    return ModelCard(
        name=name,
        features=features,
        trained_ts=now_iso(now),
        window_start=_iso(frame[time_col].min()) if frame.height else None,
        window_end=_iso(frame[time_col].max()) if frame.height else None,
        clusters=tuple(sorted(frame["cluster"].unique().to_list())) if frame.height else (),
        rows=frame.height,
        threshold=threshold,
        metrics={k: (None if v is None else float(v)) for k, v in metrics.items()},
        params=params,
    )


def _folds(
    frame: pl.DataFrame, time_col: str, horizon_h: float = 0.0
) -> list[tuple[pl.Series, pl.Series]]:
    """(train, test) masks: two folds of clusters when there are several, else the time split
    (`_purged` of rows whose label looks `horizon_h` into the test part)."""
    clusters = sorted(frame["cluster"].unique().to_list())
    if len(clusters) >= 2:
        half = set(clusters[::2])
        first = frame["cluster"].is_in(list(half))
        return [(first, ~first), (~first, first)]
    train = time_split(frame, time_col, TRAIN_FRAC)
    return [(_purged(frame, train, time_col, horizon_h), ~train)]


def _purged(frame: pl.DataFrame, train: pl.Series, time_col: str, horizon_h: float) -> pl.Series:
    """`train` without the rows whose label reads the test part: a row is labelled by what
    happens in the `horizon_h` hours after it (a GPU failing within the day), so a training
    hour just before the split learns the test part's failure that the test then counts as
    unseen. Each cluster's training rows end `horizon_h` before its first test row."""
    if horizon_h <= 0:
        return train
    t = pl.col(time_col)
    first_test = t.filter(~pl.col("_train")).min().over("cluster")
    reach = t + pl.duration(seconds=round(horizon_h * 3600)) + pl.duration(hours=1)
    mask = pl.col("_train") & (first_test.is_null() | (reach <= first_test))
    return frame.select(train.alias("_train"), time_col, "cluster").select(mask)["_train"]


def _train_failing_gpu(
    data: TrainingData, lake: Lake, now: dt.datetime, config: failing_gpu.FailingGpuConfig
) -> ModelCard:
    frame = failing_gpu.label(failing_gpu.features(data.hourly), data.failures, config.horizon_h)
    # out-of-sample scores choose the threshold
    held_out = []
    for train, test in _folds(frame, "hour", config.horizon_h):
        model = failing_gpu.fit(frame.filter(train))
        held_out.append(failing_gpu.score(model, frame.filter(test)))
    oos = pl.concat(held_out)
    threshold = failing_gpu.choose_threshold(oos, data.failures, config)
    # the time split is the card's test
    train = time_split(frame, "hour", TRAIN_FRAC)
    first = _purged(frame, train, "hour", config.horizon_h)
    test_scored = failing_gpu.score(failing_gpu.fit(frame.filter(first)), frame.filter(~train))
    # without a threshold the model raises nothing: its checks count the failures it missed
    alarm_at = float("inf") if threshold is None else threshold
    check = failing_gpu.self_check(test_scored, data.failures, alarm_at, config)
    oos_check = failing_gpu.self_check(oos, data.failures, alarm_at, config)
    model = failing_gpu.fit(frame)
    card = _card(
        FAILING_GPU,
        failing_gpu.FEATURES,
        frame,
        "hour",
        now,
        threshold,
        {
            "test_failures": check.failures,
            "test_warned_1h": check.warned,
            "test_recall_1h": check.recall,
            "test_false_alarms_per_1000_gpu_days": check.false_alarms_per_1000_gpu_days,
            "held_out_failures": oos_check.failures,
            "held_out_recall_1h": oos_check.recall,
            "held_out_false_alarms_per_1000_gpu_days": oos_check.false_alarms_per_1000_gpu_days,
        },
        {
            "horizon_h": config.horizon_h,
            "merge_gap_h": config.merge_gap_h,
            "false_alarm_budget_per_1000_gpu_days": config.false_alarms_per_1000_gpu_days,
        },
    )
    save(lake, card, model)
    return card


def _train_early_waste(
    data: TrainingData, lake: Lake, now: dt.datetime, config: early_waste.EarlyWasteConfig
) -> list[ModelCard]:
    cards = []
    for minutes in config.minutes:
        rows = early_waste.frame(data.jobs, data.early[minutes], minutes).filter(
            pl.col("label").is_not_null()
        )
        held_out = []
        for train, test in _folds(rows, "start_ts"):
            held_out.append(
                early_waste.score(early_waste.fit(rows.filter(train)), rows.filter(test))
            )
        oos = pl.concat(held_out)
        y = oos["label"].to_numpy().astype(int)
        threshold = early_waste.threshold_for_recall(
            y, oos["score"].to_numpy(), config.target_recall
        )
        first = time_split(rows, "start_ts", TRAIN_FRAC)
        tested = early_waste.score(early_waste.fit(rows.filter(first)), rows.filter(~first))
        metrics = _waste_metrics(tested, config.target_recall, "test_")
        metrics |= _waste_metrics(oos, config.target_recall, "held_out_")
        model = early_waste.fit(rows)
        card = _card(
            early_waste_name(minutes),
            early_waste.FEATURES,
            rows,
            "start_ts",
            now,
            threshold,
            metrics,
            {
                "minutes": minutes,
                "busy_below": config.busy_below,
                "target_recall": config.target_recall,
                # the latest end among the jobs it learnt from (each labelled by its outcome)
                "labels_end": _iso(rows["end_ts"].max()),
            },
        )
        save(lake, card, model)
        cards.append(card)
    return cards


def _waste_metrics(scored: pl.DataFrame, recall: float, prefix: str) -> dict[str, Any]:
    from sklearn.metrics import average_precision_score

    y = scored["label"].to_numpy().astype(int)
    out: dict[str, Any] = {f"{prefix}jobs": scored.height, f"{prefix}wasteful": int(y.sum())}
    if 0 < y.sum() < len(y):
        s, b = scored["score"].to_numpy(), scored["baseline"].to_numpy()
        out[f"{prefix}average_precision"] = average_precision_score(y, s)
        out[f"{prefix}baseline_average_precision"] = average_precision_score(y, b)
        out[f"{prefix}precision_at_recall"] = early_waste.precision_at_recall(y, s, recall)
        out[f"{prefix}baseline_precision_at_recall"] = early_waste.precision_at_recall(y, b, recall)
    return out


def _train_runtime(data: TrainingData, lake: Lake, now: dt.datetime) -> ModelCard:
    rows = runtime.frame(data.jobs)
    done = rows.filter(pl.col("log_runtime").is_not_null())
    train = time_split(done, "start_ts", TRAIN_FRAC)
    test = runtime.predict_quantiles(runtime.fit(done.filter(train)), done.filter(~train))
    models = runtime.fit(done)
    card = _card(
        RUNTIME,
        runtime.FEATURES,
        done,
        "start_ts",
        now,
        None,
        {f"test_{k}": v for k, v in runtime.metrics(test).items()},
        {"quantiles": list(runtime.QUANTILES)},
    )
    save(lake, card, models)
    return card


def _train_lemon(data: TrainingData, lake: Lake, now: dt.datetime) -> ModelCard:
    rows = lemon.frame(data.node_days)
    model = lemon.fit(rows)
    flagged = lemon.score(model, rows)["flagged"]
    card = _card(
        LEMON,
        lemon.FEATURES,
        rows,
        "day",
        now,
        None,
        {"node_days": rows.height, "flagged": int(flagged.sum()) if rows.height else 0},
        {"contamination": lemon.CONTAMINATION},
    )
    save(lake, card, model)
    return card


def train_all(
    data: TrainingData,
    lake: Lake,
    now: dt.datetime,
    failing: failing_gpu.FailingGpuConfig | None = None,
    waste: early_waste.EarlyWasteConfig | None = None,
) -> TrainingResult:
    """Train and store every model from `data` into `lake`'s model store; return their cards
    and, for each model the data could not teach, why (`NotEnoughHistory`'s message)."""
    steps: list[tuple[str, Callable[[], list[ModelCard]]]] = [
        (
            FAILING_GPU,
            lambda: [
                _train_failing_gpu(data, lake, now, failing or failing_gpu.FailingGpuConfig())
            ],
        ),
        (
            "early_waste",
            lambda: _train_early_waste(data, lake, now, waste or early_waste.EarlyWasteConfig()),
        ),
        (RUNTIME, lambda: [_train_runtime(data, lake, now)]),
        (LEMON, lambda: [_train_lemon(data, lake, now)]),
    ]
    cards: dict[str, ModelCard] = {}
    skipped: dict[str, str] = {}
    with one_thread():
        for name, step in steps:
            try:
                cards.update((c.name, c) for c in step())
            except NotEnoughHistory as exc:
                skipped[name] = str(exc)
    return TrainingResult(cards, skipped)


@dataclass(frozen=True, slots=True)
class TrainingResult:
    """The stored models' cards, and why any model was not trained."""

    cards: dict[str, ModelCard]
    skipped: dict[str, str]
