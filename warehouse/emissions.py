"""Carbon intensity: the grams of CO2e per kWh each cluster's electricity carried, per hour.

The configuration (`[emissions]`, app/pipeline/settings.py) reads it into a `CarbonIntensity`
(a default for every cluster, a constant per cluster, hourly values per cluster from a CSV),
which travels in `AttributionConfig.emissions`: the summary marts' inputs, so a change of it
rebuilds them (they are small), never the sample-level marts. `register_intensity` puts it in
the engine as the view `carbon_intensity` and the view `job_co2e_hourly`
(sql/views/job_co2e_hourly.sql), which job_usage and usage_daily read for `kg_co2e`.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sql
from warehouse import queries

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

__all__ = [
    "MOST_G_PER_KWH",
    "CSV_HEADER",
    "CarbonIntensity",
    "ClusterIntensity",
    "IntensityCsvError",
    "intensity_schema",
    "intensity_table",
    "parse_intensity_csv",
    "register_intensity",
]

# The header an hourly intensity CSV starts with.
CSV_HEADER = ("hour_start_utc", "g_per_kwh")
# The most g CO2e per kWh a setting or CSV may give: 100× the dirtiest grid's (coal, ~1,000):
# 1e308 made every job's kg CO2e inf, and `gpuledger check` passed.
MOST_G_PER_KWH = 100_000.0
_HOUR_S = 3600


class IntensityCsvError(ValueError):
    """A line of an hourly intensity CSV that is not `hour_start_utc,g_per_kwh`; the message
    names the line."""


@dataclass(frozen=True, slots=True)
class ClusterIntensity:
    """One cluster's intensity: a constant (`g_per_kwh`), hourly values (`hours`: (epoch
    second of the hour's start, g/kWh), from the CSV at `csv`), or both: the constant then
    stands in for the hours the CSV lacks."""

    cluster: str
    g_per_kwh: float | None = None
    csv: str | None = None
    hours: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class CarbonIntensity:
    """Every cluster's intensity in g CO2e/kWh; `default_g_per_kwh` for clusters not listed
    (and for the hours a cluster's CSV lacks, where it has no constant). Empty: unknown, so
    kg_co2e is null."""

    default_g_per_kwh: float | None = None
    clusters: tuple[ClusterIntensity, ...] = ()

    @property
    def configured(self) -> bool:
        """Whether any cluster has an intensity."""
        return self.default_g_per_kwh is not None or bool(self.clusters)


def _parse_hour(text: str) -> int:
    """The epoch second of an ISO 8601 hour start (UTC when no offset is written)."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    moment = dt.datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    try:
        utc = moment.astimezone(dt.UTC)
    except OverflowError:  # (year 1 with an offset, 9999-12-31 with a negative one)
        raise ValueError("outside the years 1970–9998") from None
    if not 1970 <= utc.year <= 9998:
        raise ValueError("outside the years 1970–9998")
    seconds = utc.timestamp()
    if seconds % _HOUR_S:
        raise ValueError("not the start of an hour")
    return int(seconds)


def parse_intensity_csv(text: str) -> tuple[tuple[int, float], ...]:
    """Parse `hour_start_utc,g_per_kwh` lines into (epoch second, g/kWh) pairs, by hour.

    Raises IntensityCsvError naming the first bad line: a missing header, a time that is not
    an hour start, a value that is not a non-negative number, an hour given twice. An empty
    file has no hours, like one with the header alone (`config check` says "no hours").
    """
    text = text.removeprefix("\ufeff")  # a byte-order mark, as spreadsheets write one
    if not text.strip():
        return ()
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if header is None or tuple(c.strip().lower() for c in header) != CSV_HEADER:
        raise IntensityCsvError(
            f"line 1: expected the header {','.join(CSV_HEADER)}, got {header!r}"
        )
    hours: dict[int, float] = {}
    line_no = 1
    try:
        for line_no, row in enumerate(rows, start=2):
            _intensity_row(line_no, row, hours)
    except csv.Error as exc:  # (a stray quote: a field to the end of the file)
        raise IntensityCsvError(f"line {line_no + 1}: not CSV ({exc})") from None
    return tuple(sorted(hours.items()))


def _intensity_row(line_no: int, row: list[str], hours: dict[int, float]) -> None:
    """Add one `hour_start_utc,g_per_kwh` row to `hours`; IntensityCsvError names it."""
    if not row or all(not c.strip() for c in row):
        return
    if len(row) != 2:
        raise IntensityCsvError(
            f"line {line_no}: expected hour_start_utc,g_per_kwh, got {','.join(row)!r}"
        )
    try:
        hour = _parse_hour(row[0])
    except ValueError as exc:
        raise IntensityCsvError(
            f"line {line_no}: expected an hour start in ISO 8601 UTC "
            f"(2026-03-01T13:00:00Z), got {row[0].strip()!r} ({exc})"
        ) from None
    try:
        grams = float(row[1])
    except ValueError:
        grams = math.nan
    if not math.isfinite(grams) or not 0 <= grams <= MOST_G_PER_KWH:
        raise IntensityCsvError(
            f"line {line_no}: expected a g_per_kwh from 0 to {MOST_G_PER_KWH:,.0f}, got "
            f"{row[1].strip()!r}"
        )
    if hour in hours:
        raise IntensityCsvError(f"line {line_no}: the hour {row[0].strip()!r} is given twice")
    hours[hour] = grams


# The columns of `carbon_intensity`, as DuckDB types them. cluster null: every cluster without
# rows of its own; hour_start null: every hour without a row of its own (the cluster's constant).
_COLUMNS = (
    ("cluster", "VARCHAR", True),
    ("hour_start", "TIMESTAMP WITH TIME ZONE", True),
    ("g_per_kwh", "DOUBLE", False),
)
# `carbon_intensity` where no intensity is configured: its columns, no row (no pyarrow needed).
_NO_INTENSITY = (
    "SELECT " + ", ".join(f"CAST(NULL AS {t}) AS {c}" for c, t, _ in _COLUMNS) + (" WHERE false")
)


def intensity_schema() -> pa.Schema:
    """The Arrow schema of `intensity_table`'s rows."""
    import pyarrow as pa

    from warehouse.schema import arrow_type

    return pa.schema([pa.field(c, arrow_type(t), nullable=n) for c, t, n in _COLUMNS])


def intensity_table(intensity: CarbonIntensity) -> pa.Table:
    """`intensity` as rows of `intensity_schema`: the default (cluster null), each cluster's
    constant (hour_start null) and its hourly values."""
    import pyarrow as pa

    from warehouse.arrow_arrays import TIMESTAMP, float64s, int64s, strings

    clusters: list[str | None] = []
    hours: list[int | None] = []
    grams: list[float] = []

    def add(cluster: str | None, hour: int | None, value: float) -> None:
        clusters.append(cluster)
        hours.append(None if hour is None else hour * 1000)
        grams.append(value)

    if intensity.default_g_per_kwh is not None:
        add(None, None, intensity.default_g_per_kwh)
    for c in intensity.clusters:
        if c.g_per_kwh is not None:
            add(c.cluster, None, c.g_per_kwh)
        for hour, value in c.hours:
            add(c.cluster, hour, value)
    return pa.table(
        [strings(clusters), int64s(hours, TIMESTAMP), float64s(grams)],
        schema=intensity_schema(),
    )


def register_intensity(con: duckdb.DuckDBPyConnection, intensity: CarbonIntensity) -> None:
    """Make `intensity` readable as the view `carbon_intensity` and each job's energy per hour
    with the intensity it is counted at as `job_co2e_hourly` (which reads `job_energy_hourly`).

    With no intensity configured the view has no row and nothing of Arrow is loaded; else it
    reads the rows of `intensity_table`, registered as `carbon_intensity_rows`.
    """
    rows = _NO_INTENSITY
    if intensity.configured:
        con.register("carbon_intensity_rows", intensity_table(intensity))
        rows = "SELECT cluster, hour_start, g_per_kwh FROM carbon_intensity_rows"
    queries.define_view(con, "carbon_intensity", rows)
    queries.define_view(con, "job_co2e_hourly", sql.load("views/job_co2e_hourly"))
