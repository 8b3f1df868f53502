"""The time windows of API queries: `since`/`until` parsed, defaults from the end of the data.

`since` and `until` take a UTC date (`2026-11-02`) or time (`2026-11-02T08:00:00Z`; a time
without an offset is UTC). A window is half-open, [since, until); `until` given as a date
counts that whole day, as the dashboard's date range counts both its days. Left out, `until`
is the end of the data ("now" is the end of the lake's data, never the wall clock) and
`since` is the midnight `DEFAULT_DAYS` before it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from app.api.errors import ApiError

__all__ = ["DEFAULT_DAYS", "Window", "parse_instant", "window"]

DEFAULT_DAYS = 7
EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(9999, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class Window:
    """A half-open UTC window [since, until)."""

    since: dt.datetime
    until: dt.datetime

    def days(self) -> tuple[dt.date, dt.date]:
        """The whole UTC days it touches: first day, first day after (for daily marts)."""
        last = self.until - dt.timedelta(microseconds=1)
        return self.since.date(), max(self.since.date(), last.date()) + dt.timedelta(days=1)

    def as_json(self) -> dict[str, str]:
        return {"since": self.since.isoformat(), "until": self.until.isoformat()}


def parse_instant(name: str, text: str, *, end: bool = False) -> dt.datetime:
    """`text` as a UTC instant; a date is its midnight, or with `end` the next midnight.

    ApiError 422 naming the parameter when it is neither a date nor a time, or lies outside
    [EARLIEST, LATEST] (where a window's arithmetic stays inside the calendar).
    """
    value = text.strip()
    instant: dt.datetime | None
    try:
        if len(value) == 10:
            day = dt.date.fromisoformat(value)
            instant = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
            if end:
                instant += dt.timedelta(days=1)
        else:
            parsed = dt.datetime.fromisoformat(value)
            instant = (
                parsed.replace(tzinfo=dt.UTC)
                if parsed.tzinfo is None
                else parsed.astimezone(dt.UTC)
            )
    except ValueError:
        raise ApiError(
            422,
            f"{name}: expected a UTC date (2026-11-02) or time (2026-11-02T08:00:00Z), "
            f"got {text!r}",
        ) from None
    except OverflowError:  # 9999-12-31 as an end, year 1 with an offset: past the calendar
        instant = None
    if instant is None or not EARLIEST <= instant <= LATEST:
        # (a date as an end stands for the midnight after it: the last date is a day earlier)
        last = LATEST - dt.timedelta(days=1) if end and len(value) == 10 else LATEST
        raise ApiError(422, f"{name}: {text!r} lies outside {EARLIEST.date()} … {last.date()}")
    return instant


def window(
    since: str | None,
    until: str | None,
    data_end: dt.datetime | None,
    *,
    default_days: int | None = DEFAULT_DAYS,
) -> Window:
    """The window the parameters ask for; left out, `until` is `data_end` and `since` is
    `default_days` before it (None: no lower bound). ApiError 422 when since is not before
    until."""
    end = parse_instant("until", until, end=True) if until else (data_end or LATEST)
    if since:
        start = parse_instant("since", since)
    elif default_days is None or data_end is None and not until:
        start = EARLIEST
    else:  # from a midnight, so a daily mart's first day counts whole
        start = dt.datetime.combine(
            (end - dt.timedelta(days=default_days)).date(), dt.time(), dt.UTC
        )
    if start >= end:
        # said as given: until=2026-11-02 stands for the midnight after it, and "since
        # 2026-11-03T00:00 is not before until 2026-11-03T00:00" read as another question
        asked = (
            f"until {until!r}" + (" (the end of that day)" if len(until) == 10 else "")
            if until
            else f"the end of the data, {end.isoformat()}"
        )
        raise ApiError(422, f"since: {since or start.isoformat()!r} is not before {asked}")
    return Window(start, end)
