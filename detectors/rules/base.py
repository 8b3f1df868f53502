"""What every rule shares: the analysis window, the `Rule` record, and documented thresholds.

A rule is data plus one pure function: the query it needs (`sql/detectors/*.sql`), how its
parameters come from the thresholds, and `detect(frame, config, window)` that turns the query's
rows into findings (`detectors.findings.FRAME_COLUMNS`). The runner is the only code that
touches a connection.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.rules.thresholds import threshold, threshold_docs

if TYPE_CHECKING:
    from detectors.rules.config import RuleConfig

__all__ = [
    "EPOCH",
    "Rule",
    "Window",
    "as_of",
    "by_cluster",
    "evidence",
    "period_anchor",
    "threshold",
    "threshold_docs",
]

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class Window:
    """What a detect run looks at: data from `since` on, judged as of `now` (both UTC).

    `now` is when the run happens: it stamps `detected_ts` and bounds windows such as
    "the last 7 days"; data after `now` is not expected but does no harm. Figures never run
    past the end of a cluster's data (views/data_extent, `as_of`): a lake read a year after it
    was made gives the same findings, a running job counted up to where its data ends.
    """

    now: dt.datetime
    since: dt.datetime = EPOCH


@dataclass(frozen=True, slots=True)
class Rule:
    """One detector: its name, the query it reads, its parameters, and its pure `detect`.

    `stored`: a query that reads the same rows as `query` from what the lake keeps of them
    (`gpu_health_hourly`, `gpu_ecc_hourly`: warehouse/detector_days.py), for a run that has
    brought them up to date; its rows are whole hours, so it stands for `query` only when the
    window starts on an hour."""

    name: str
    query: str
    params: Callable[[RuleConfig, Window], dict[str, Any]]
    detect: Callable[[pl.DataFrame, RuleConfig, Window], pl.DataFrame]
    stored: str | None = None


def evidence(*columns: str) -> pl.Expr:
    """The `evidence` column: the named columns as one JSON object per row."""
    return pl.struct(list(columns)).struct.json_encode().alias("evidence")


def as_of(frame: pl.DataFrame, window: Window, *columns: str) -> dt.datetime:
    """The end of "recent" windows: the latest of `columns` in `frame`, or `now` if earlier.

    A lake of last month's data is thus judged as of its own end, not as of today.
    """
    latest = frame.select(pl.max_horizontal(columns).max()).item() if len(frame) else None
    if not isinstance(latest, dt.datetime):
        return window.now
    return min(window.now, latest)


def by_cluster(frame: pl.DataFrame, rule: Callable[[pl.DataFrame], pl.DataFrame]) -> pl.DataFrame:
    """`rule` over each cluster's rows apart, so that a window ending at the end of the data
    (`as_of`) ends at the end of that cluster's: one end for the lake judged a cluster whose
    data ended a month before another's by the other's last days, and found nothing."""
    parts = frame.partition_by("cluster", maintain_order=True) if len(frame) else []
    if len(parts) <= 1:
        return rule(frame)
    return pl.concat([rule(part) for part in parts], how="vertical_relaxed")


def period_anchor(end: dt.datetime, span: dt.timedelta) -> dt.datetime:
    """Start of the `span`-long period (counted from the epoch) that holds `end`.

    Windowed findings (a user's last 7 days) are anchored here, so reruns within one period
    update one finding instead of adding another.
    """
    period_s = span.total_seconds()
    return EPOCH + dt.timedelta(
        seconds=math.floor((end - EPOCH).total_seconds() / period_s) * period_s
    )
