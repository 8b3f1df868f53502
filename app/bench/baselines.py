"""Baselines `gpuledger bench` compares attribution with, run in the same process on the same lake.

- the floor: a plain DuckDB scan-and-group-by of the sample columns the marts read
  (sql/bench/plain_scan_floor.sql), the least any attribution must cost;
- the update floor: the summary marts' own SQL over an empty lake, in a fresh engine — what an
  update that runs each mart's one definition pays however few rows changed;
- pandas `merge_asof` and polars `join_asof`: what a data scientist would write to give each
  sample the allocation that started last before it on its GPU, then sum per job. They do less
  than the marts (no spans, gaps, energy or occupancy), so they flatter the baselines.

pandas is imported here only (it comes with Streamlit); nothing else in gpuledger uses it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["best_of", "empty_mart_queries", "floor_scan", "pandas_merge_asof", "polars_join_asof"]

_FLOOR_QUERY = "bench/plain_scan_floor"
# The same inputs for both dataframe baselines: samples and allocations keyed by GPU UUID.
_SAMPLES = "bench/asof_samples"
_ALLOCATIONS = "bench/asof_allocations"


def best_of(runs: int, func: Callable[[], Any]) -> float:
    """The fastest of `runs` timed calls of `func`, in seconds (the machine is shared)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def floor_scan(con: duckdb.DuckDBPyConnection) -> None:
    """Read the sample columns the marts need and group them by job, nothing more."""
    queries.run_arrow(con, _FLOOR_QUERY)


def empty_mart_queries(workdir: Path) -> None:
    """Run every summary mart's SQL in a fresh engine over an empty lake under `workdir`."""
    from app.pipeline import default_pipeline_config
    from warehouse.connection import connect
    from warehouse.summary import SUMMARY_MARTS

    config = default_pipeline_config().attribution
    con = connect(workdir)
    try:
        for _, query in SUMMARY_MARTS:
            queries.run_arrow(con, query, **config.params(query, con))
    finally:
        con.close()


def pandas_merge_asof(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    """Attribute with pandas `merge_asof` and sum per job; return seconds per step."""
    import pandas as pd

    start = time.perf_counter()
    samples = queries.run_arrow(con, _SAMPLES).to_pandas()
    allocations = queries.run_arrow(con, _ALLOCATIONS).to_pandas()
    loaded = time.perf_counter()
    samples = samples.sort_values("ts", kind="stable")
    allocations = allocations.sort_values("start_ts", kind="stable")
    joined = pd.merge_asof(
        samples,
        allocations,
        left_on="ts",
        right_on="start_ts",
        by="gpu",
        direction="backward",
    )
    inside = joined["end_ts"].isna() | (joined["ts"] < joined["end_ts"])
    owned = joined[inside & joined["job_id"].notna()]
    owned.groupby("job_id").agg(
        samples=("ts", "size"), util=("gpu_util_pct", "sum"), power=("power_w", "sum")
    )
    done = time.perf_counter()
    return {"load_s": loaded - start, "join_s": done - loaded, "total_s": done - start}


def polars_join_asof(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    """Attribute with polars `join_asof` and sum per job; return seconds per step."""
    import polars as pl

    start = time.perf_counter()
    samples = pl.from_arrow(queries.run_arrow(con, _SAMPLES))
    allocations = pl.from_arrow(queries.run_arrow(con, _ALLOCATIONS))
    assert isinstance(samples, pl.DataFrame) and isinstance(allocations, pl.DataFrame)
    loaded = time.perf_counter()
    # sorted by ts overall, hence within each GPU: the check polars cannot do with `by`
    joined = samples.sort("ts").join_asof(
        allocations.sort("start_ts"),
        left_on="ts",
        right_on="start_ts",
        by="gpu",
        strategy="backward",
        check_sortedness=False,
    )
    (
        joined.filter(
            pl.col("job_id").is_not_null()
            & (pl.col("end_ts").is_null() | (pl.col("ts") < pl.col("end_ts")))
        )
        .group_by("job_id")
        .agg(pl.len().alias("samples"), pl.col("gpu_util_pct").sum(), pl.col("power_w").sum())
    )
    done = time.perf_counter()
    return {"load_s": loaded - start, "join_s": done - loaded, "total_s": done - start}
