"""Attribution: give every sample its owning job, then build the marts (DESIGN §4).

Raw sample files are never rewritten. `build_marts` rebuilds the day partitions of the
sample-level marts whose inputs changed: the day's sample files, or the allocations that can
own its samples (a late scheduler record rebuilds the days it touches). Each sample's owner is
decided there, by the allocation rule (sql/attribution/sample_owners.sql), in the one pass over
samples (warehouse/partitions.py), and lives only in the derived data. The job- and
cluster-level marts are then built from those small per-bucket tables.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from warehouse import layout
from warehouse.attribution_config import AttributionConfig
from warehouse.connection import WarehouseConfig, open_engine, register_files
from warehouse.partitions import SAMPLE_MARTS, PartitionReport, build_sample_marts
from warehouse.row_counts import table_rows
from warehouse.summary import (
    SUMMARY_MARTS,
    build_summary_marts,
    refresh_summary_marts,
)
from warehouse.writer_lock import writer_step

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "MART_ORDER",
    "SUMMARY_MARTS",
    "AttributionConfig",
    "AttributionResult",
    "attribute",
    "build_marts",
    "build_summary_marts",
]

# Each mart and its query; a mart may read the ones before it.
MART_ORDER: tuple[tuple[str, str], ...] = (*SAMPLE_MARTS, *SUMMARY_MARTS)


@dataclass(frozen=True, slots=True)
class AttributionResult:
    """The rows of each mart, and what the per-day pass did (warehouse/partitions.py)."""

    mart_rows: dict[str, int]
    days: PartitionReport


@writer_step("attribute")
def build_marts(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    config: AttributionConfig,
    progress: Callable[[str], None] | None = None,
    *,
    force: bool = False,
    warehouse: WarehouseConfig | None = None,
) -> dict[str, int]:
    """Bring every mart up to date with the lake; return the row count of each (`attribute`
    without its report)."""
    return attribute(con, root, config, progress, force=force, warehouse=warehouse).mart_rows


@writer_step("attribute")
def attribute(
    con: duckdb.DuckDBPyConnection | None,
    root: Path,
    config: AttributionConfig,
    progress: Callable[[str], None] | None = None,
    *,
    force: bool = False,
    since: dt.date | None = None,
    days_progress: Callable[[int, int], None] | None = None,
    warehouse: WarehouseConfig | None = None,
) -> AttributionResult:
    """Bring every mart up to date with the lake; only what changed is built again.

    The day partitions of the sample-level marts are rebuilt where their sample files or the
    allocations that own their samples changed (with `since`, from that day on only: older
    days stay as they were built); the summary marts are then updated in place for the day
    partitions that changed, or rebuilt whole when something else they read changed
    (warehouse/summary/). `force` rebuilds everything. `warehouse` sets the memory limit and
    spill folder of the builds. `progress` is called with each mart's name once it is up to
    date, `days_progress` with (days done, days) in the per-day pass. `con`'s views of the
    marts are refreshed for the caller to read; with `con` None (`gpuledger attribute`, the
    service) there are none to refresh (a whole rebuild of the summary marts opens its own
    connection), so an update's cost does not grow with the files of the lake's history.
    """
    warehouse = warehouse or WarehouseConfig(root=root)
    # one engine for the per-day pass and the summary marts' update (or whole build without
    # `con`): each DuckDB started costs ~13 CPU-ms, a small lake's pass not much more
    engine = open_engine(warehouse)
    try:
        days = build_sample_marts(
            warehouse, config.values(), days_progress, force=force, since=since, engine=engine
        )
        # listed once, for `con`'s views, the row counts and the summary marts' update
        listed = {mart: layout.table_files(root, mart) for mart, _ in SAMPLE_MARTS}
        for mart, _ in SAMPLE_MARTS:
            if con is not None:
                register_files(con, mart, listed[mart])
            if progress:
                progress(mart)
        counts = {mart: table_rows(root, mart, listed[mart]) for mart, _ in SAMPLE_MARTS}
        update = refresh_summary_marts(
            con,
            root,
            config,
            progress,
            force=force,
            warehouse=warehouse,
            sample_files=listed,
            engine=engine,
        )
    finally:
        engine.close()
    return AttributionResult(counts | update.counts, days)
