"""The rules' runner: every family's rules in one order, run over a lake's marts.

`run_rules(con, config, now)` runs them all through `warehouse.queries` and returns one Arrow
table in the `findings` schema; `detect_frame` returns the same findings as a polars frame.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from detectors.findings import FRAME_COLUMNS, FRAME_SCHEMA, to_findings
from detectors.rules import (
    efficiency,
    gpu_balance,
    health,
    health_trend,
    idle,
    mapping,
    mfu,
    resilience,
    stranded,
)
from detectors.rules.base import EPOCH, Rule, Window
from detectors.rules.config import RuleConfig
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["FAMILY_RULES", "RULES", "detect_frame", "run_rules"]

# The rules that can raise a family's detectors (those of the module that declares it).
FAMILY_RULES: dict[str, tuple[Rule, ...]] = {
    "idle": idle.RULES,
    "gpu_balance": gpu_balance.RULES,
    "efficiency": efficiency.RULES,
    "power": efficiency.RULES,
    "health": health.RULES,
    "health_trend": health_trend.RULES,
    "mapping": mapping.RULES,
    "resilience": resilience.RULES,
    "stranded": stranded.RULES,
    "mfu": mfu.RULES,
}

# Order matters only for ties: where two rules name one problem (an ECC error seen in events and
# in counters), the first one's row is kept.
RULES: tuple[Rule, ...] = (
    *idle.RULES,
    *gpu_balance.RULES,
    *efficiency.RULES,
    *health.RULES,
    *health_trend.RULES,
    *mapping.RULES,
    *resilience.RULES,
    *stranded.RULES,
    *mfu.RULES,
)


def detect_frame(
    con: duckdb.DuckDBPyConnection,
    config: RuleConfig,
    window: Window,
    rules: tuple[Rule, ...] = RULES,
    *,
    stored: bool = False,
) -> pl.DataFrame:
    """Run `rules` and return their findings as one frame (`detectors.findings.FRAME_COLUMNS`).

    With `stored` (the lake's stored hours are up to date: `gpuledger detect`), a rule with a
    `stored` query reads the rows from there instead of from every sample."""
    frames = [pl.DataFrame(schema=FRAME_SCHEMA)]
    on_the_hour = window.since.timestamp() % 3600 == 0
    for rule in rules:
        query = rule.stored if stored and on_the_hour and rule.stored else rule.query
        rows = queries.run(con, query, **rule.params(config, window))
        found = rule.detect(rows, config, window)
        frames.append(found.select(pl.col(c).cast(FRAME_SCHEMA[c]) for c in FRAME_COLUMNS))
    return _within_the_data(con, pl.concat(frames, how="vertical"))


def _within_the_data(con: duckdb.DuckDBPyConnection, found: pl.DataFrame) -> pl.DataFrame:
    """`found` with each span ending where its cluster's data end (views/data_extent) at the
    latest: an hourly rule's span ran to the end of its last hour, past the last sample (and
    `gpuledger check` failed the lake the service built itself)."""
    [(defined,)] = con.execute(
        "SELECT count(*) FROM duckdb_views() WHERE view_name = 'data_extent'"
    ).fetchall()
    if found.is_empty() or not defined:
        return found
    ends = pl.from_arrow(con.sql("SELECT cluster, data_end FROM data_extent").to_arrow_table())
    assert isinstance(ends, pl.DataFrame)
    end = pl.col("data_end").cast(FRAME_SCHEMA["end_ts"])
    return (
        found.join(ends, on="cluster", how="left")
        .with_columns(
            pl.when(end.is_not_null() & (pl.col("end_ts") > end))
            .then(end)
            .otherwise(pl.col("end_ts"))
            .alias("end_ts")
        )
        .select(FRAME_COLUMNS)
    )


def run_rules(
    con: duckdb.DuckDBPyConnection,
    config: RuleConfig,
    now: dt.datetime,
    since: dt.datetime = EPOCH,
    rules: tuple[Rule, ...] = RULES,
) -> pa.Table:
    """Run every rule over the lake behind `con`; return the findings (`findings` schema).

    `now` stamps `detected_ts` and ends windows such as "the last 7 days"; data before `since`
    is not looked at, so figures (a job's idle hours, a user's 7 days) then come from that data
    only: `gpuledger detect --since` runs the rules over everything and keeps the findings seen
    since (`detectors.findings.seen_since`) instead.
    """
    window = Window(now=now, since=since)
    return to_findings(detect_frame(con, config, window, rules), detected_ts=now)
