"""Waste and hardware-health rules over the lake's marts: `run_rules(con, config, now)`.

Each family module (idle, …) declares its thresholds and its `RULES`; this package runs them
all through `warehouse.queries` and returns one Arrow table in the `findings` schema.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from detectors.findings import FRAME_COLUMNS, FRAME_SCHEMA, to_findings
from detectors.rules import idle
from detectors.rules.base import EPOCH, Rule, Window
from detectors.rules.config import FAMILIES, RuleConfig
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["FAMILIES", "RULES", "Rule", "RuleConfig", "Window", "detect_frame", "run_rules"]

RULES: tuple[Rule, ...] = (*idle.RULES,)


def detect_frame(
    con: duckdb.DuckDBPyConnection,
    config: RuleConfig,
    window: Window,
    rules: tuple[Rule, ...] = RULES,
) -> pl.DataFrame:
    """Run `rules` and return their findings as one frame (`detectors.findings.FRAME_COLUMNS`)."""
    frames = [pl.DataFrame(schema=FRAME_SCHEMA)]
    for rule in rules:
        rows = queries.run(con, rule.query, **rule.params(config, window))
        found = rule.detect(rows, config, window)
        frames.append(found.select(pl.col(c).cast(FRAME_SCHEMA[c]) for c in FRAME_COLUMNS))
    return pl.concat(frames, how="vertical")


def run_rules(
    con: duckdb.DuckDBPyConnection,
    config: RuleConfig,
    now: dt.datetime,
    since: dt.datetime = EPOCH,
    rules: tuple[Rule, ...] = RULES,
) -> pa.Table:
    """Run every rule over the lake behind `con`; return the findings (`findings` schema).

    `now` stamps `detected_ts` and ends windows such as "the last 7 days"; data before `since`
    is not looked at.
    """
    window = Window(now=now, since=since)
    return to_findings(detect_frame(con, config, window, rules), detected_ts=now)
