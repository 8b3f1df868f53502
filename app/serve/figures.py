"""Read the figures `gpuledger serve` exposes from the lake's marts (SQL in sql/serve/).

One call reads everything a scrape shows, as polars frames; `app/serve/exposition.py` turns
them into text. "Now" is the end of each cluster's data (the data_extent view), never the wall
clock, so the same lake always shows the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.serve.settings import ServeSettings
from warehouse.lake import Lake

if TYPE_CHECKING:
    import polars as pl

__all__ = ["QUERIES", "Figures", "read_figures"]

# frame name → query name (sql/serve/<name>.sql)
QUERIES: dict[str, str] = {
    "usage": "serve/usage_windows",
    "occupancy": "serve/occupancy_now",
    "running": "serve/running_by_account",
    "jobs": "serve/running_jobs",
    "findings": "serve/findings_open",
    "recommendations": "serve/recommendations_by_kind",
    "freshness": "serve/source_freshness",
}


@dataclass(frozen=True, slots=True)
class Figures:
    """What one scrape shows, frame by frame (columns: the queries' `Returns:`)."""

    usage: pl.DataFrame
    occupancy: pl.DataFrame
    running: pl.DataFrame
    jobs: pl.DataFrame
    findings: pl.DataFrame
    recommendations: pl.DataFrame
    freshness: pl.DataFrame


def read_figures(lake: Lake, settings: ServeSettings) -> Figures:
    """Run every sql/serve/ query on the lake (an empty or missing lake: empty frames)."""
    from warehouse.partitions import built_bucket_s
    from warehouse.queries import run

    con = lake.connect()
    try:
        bucket_s = built_bucket_s(con, settings.bucket_s)  # the lake's, not the configured
        params: dict[str, dict[str, Any]] = {
            "usage": {
                "windows_s": [seconds for _, seconds in settings.windows_s],
                "bucket_s": bucket_s,
            },
            "occupancy": {"bucket_s": bucket_s},
            "jobs": {"bucket_s": bucket_s, "max_jobs": settings.max_job_series},
        }
        frames = {key: run(con, name, **params.get(key, {})) for key, name in QUERIES.items()}
    finally:
        con.close()
    return Figures(**frames)
