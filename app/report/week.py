"""ISO weeks as the report names them (`2026-W48`): Monday 00:00 UTC to the next Monday."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["IsoWeek", "covered", "default_week", "last_complete_week", "parse_week"]

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
# Weeks a report can be about: its trend looks back a few weeks and its end is a week on,
# which must stay within the dates Python (and the lake's timestamps) can hold.
FIRST_YEAR, LAST_YEAR = 1970, 9998


@dataclass(frozen=True, slots=True, order=True)
class IsoWeek:
    """One ISO week; `start` is its Monday 00:00 UTC, `end` the next Monday (exclusive).

    Weeks sort in time order (by year, then number).
    """

    year: int
    number: int

    @property
    def monday(self) -> dt.date:
        return dt.date.fromisocalendar(self.year, self.number, 1)

    @property
    def start(self) -> dt.datetime:
        return dt.datetime.combine(self.monday, dt.time(), tzinfo=dt.UTC)

    @property
    def end(self) -> dt.datetime:
        return self.start + dt.timedelta(days=7)

    @property
    def label(self) -> str:
        return f"{self.year}-W{self.number:02d}"

    def minus(self, weeks: int) -> IsoWeek:
        """The week `weeks` before this one."""
        year, number, _ = (self.monday - dt.timedelta(weeks=weeks)).isocalendar()
        return IsoWeek(year, number)

    @classmethod
    def of(cls, day: dt.date) -> IsoWeek:
        year, number, _ = day.isocalendar()
        return cls(year, number)


def parse_week(text: str) -> IsoWeek:
    """`2026-W48` → IsoWeek; raises ValueError with the expected form."""
    match = _WEEK.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not an ISO week; expected YYYY-Www, e.g. 2026-W48")
    year, number = int(match.group(1)), int(match.group(2))
    if not FIRST_YEAR <= year <= LAST_YEAR:  # the trend weeks before and the end after must fit
        raise ValueError(f"{text!r}: expected a year from {FIRST_YEAR} to {LAST_YEAR}")
    try:
        dt.date.fromisocalendar(year, number, 1)
    except ValueError:
        raise ValueError(f"{text!r}: {year} has no week {number}") from None
    return IsoWeek(year, number)


def last_complete_week(now: dt.datetime) -> IsoWeek:
    """The latest week that ended at or before `now` (on a Monday: the week just ended)."""
    return IsoWeek.of(now.astimezone(dt.UTC).date()).minus(1)


def covered(
    week: IsoWeek,
    data_end: dt.datetime | None,
    now: dt.datetime,
    data_start: dt.datetime | None = None,
) -> bool:
    """Whether the data cover `week` whole: it ended at or before `data_end` and now, and began
    at or after `data_start` (a week the data begin inside, on a Wednesday, is covered only
    from then)."""
    begun = data_start is None or data_start <= week.start
    return begun and data_end is not None and week.end <= min(data_end, now)


def default_week(
    weeks: Iterable[IsoWeek],
    data_end: dt.datetime | None,
    now: dt.datetime,
    data_start: dt.datetime | None = None,
) -> IsoWeek | None:
    """The week to report when none is asked for: the latest week with data that has begun by
    `now` and that the data cover whole (`covered`: from its start, `data_start`, to its end,
    `data_end`); where no week is whole, the one the data cover longest (the latest of equals:
    the current week, in progress, on a lake begun this week); None when no week that has
    begun has data.

    On a live lake this is last week (as `last_complete_week`); on a backfilled one, the last
    week of the backfill rather than an empty week before today.
    """
    begun = [w for w in weeks if w.start <= now]
    complete = [w for w in begun if covered(w, data_end, now, data_start)]
    if complete:
        return max(complete)
    if not begun:
        return None

    def hours(week: IsoWeek) -> float:
        first = max(week.start, data_start) if data_start else week.start
        last = min(week.end, now, data_end) if data_end else min(week.end, now)
        return (last - first).total_seconds()

    return max(begun, key=lambda w: (hours(w), w))
