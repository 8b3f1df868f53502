"""The `history` scenario: one more day appended to lakes of 7, 28 and 365 days of history.

An update's cost should follow what changed, not the history behind it. For each history
length a synthetic lake (app/bench/lakes.py) of the same shape — the same GPUs and jobs per
day, only more days — is generated with one day more, that day's samples are held back, the
marts are built, then the day lands and the update is timed step by step as `gpuledger
attribute` runs it (app.pipeline.attribute): closed days compacted, (a) the ingest, the per-day
pass (`build_sample_marts`: the new day, the tail of the day before), and (b) the mart update
(`refresh_summary_marts`: the summary marts updated in place). The ratio of the longest
history's (a) + (b) to the shortest's is the figure (issue #24's target: within 1.5×); the
same ratio of (a) and of (b) alone says which step grows.
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from warehouse.lake import Lake

__all__ = ["HISTORY_DAYS", "run_history_bench"]

HISTORY_DAYS = (7, 28, 365)
TARGET_RATIO = 1.5


def _update(lake: Lake) -> Any:
    """What `gpuledger attribute` does to the lake as it is now (app.pipeline.attribute)."""
    from app.pipeline import attribute, default_pipeline_config

    return attribute(lake, default_pipeline_config(), dt.datetime.now(dt.UTC))


def _timed_cpu(step: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and CPU seconds of `step` (every thread of the process), and its result."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = step()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def _append(lake: Lake) -> dict[str, Any]:
    """The steps of `gpuledger attribute` after one day landed, each timed apart."""
    from app.pipeline import default_pipeline_config
    from app.pipeline.round import compact
    from warehouse import layout
    from warehouse.partitions import SAMPLE_MARTS, build_sample_marts
    from warehouse.row_counts import table_rows
    from warehouse.summary import refresh_summary_marts

    config = default_pipeline_config().attribution
    warehouse = lake.config()
    compact_s, compact_cpu, _ = _timed_cpu(lambda: compact(lake, dt.datetime.now(dt.UTC), None))

    listed: dict[str, list[Path]] = {}

    def ingest() -> Any:  # and the sample-level marts' rows, as `attribute` counts them
        days = build_sample_marts(warehouse, config.values())
        for mart, _ in SAMPLE_MARTS:
            listed[mart] = layout.table_files(lake.root, mart)
            table_rows(lake.root, mart, listed[mart])
        return days

    ingest_s, ingest_cpu, days = _timed_cpu(ingest)
    update_s, update_cpu, update = _timed_cpu(
        lambda: refresh_summary_marts(
            None, lake.root, config, warehouse=warehouse, sample_files=listed
        )
    )
    return {
        "compact_s": compact_s,
        "ingest_s": ingest_s,
        "update_s": update_s,
        "append_s": ingest_s + update_s,
        "compact_cpu_s": compact_cpu,
        "ingest_cpu_s": ingest_cpu,
        "update_cpu_s": update_cpu,
        "append_cpu_s": ingest_cpu + update_cpu,
        "days_rebuilt": len(days.rebuilt),
        "tails_rebuilt": len(days.tails),
        "update_mode": update.mode,
        "jobs_recomputed": update.jobs,
        "weeks_recomputed": update.weeks,
    }


def _ratio(runs: list[dict[str, Any]], field: str) -> float:
    """The longest history's `field` over the shortest's."""
    longest = max(runs, key=lambda run: run["days"])
    shortest = min(runs, key=lambda run: run["days"])
    return float(longest[field] / max(shortest[field], 1e-9))


def run_history_bench(
    base: Path,
    gpus: int,
    lengths: tuple[int, ...] = HISTORY_DAYS,
    echo: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Time one appended day on a synthetic lake of each history length under `base`."""
    from app.bench.lakes import hold_back_last_day, synthetic_lake

    runs = []
    for days in lengths:
        lake = Lake(base / f"history-{days}")
        echo(f"bench history: {gpus} GPUs × {days} days + 1 (synthetic)")
        made = synthetic_lake(
            lake,
            gpus,
            days + 1,
            progress=lambda day, of: (
                echo(f"bench history: generated day {day} of {of}")
                if day % 30 == 0 or day == of
                else None
            ),
        )
        held = hold_back_last_day(lake, base / f"aside-{days}")
        started = time.perf_counter()
        _update(lake)
        build_s = time.perf_counter() - started
        held.restore()
        echo(f"bench history: the day after {days} days lands")
        appended = _append(lake)
        unchanged_s, unchanged_cpu, _ = _timed_cpu(partial(_update, lake))  # nothing changed
        runs.append(
            {
                "days": days,
                "samples": made.samples,
                "jobs": made.jobs,
                "build_s": build_s,
                **appended,
                "unchanged_s": unchanged_s,
                "unchanged_cpu_s": unchanged_cpu,
            }
        )
        shutil.rmtree(lake.root, ignore_errors=True)
    ratio = _ratio(runs, "append_s")
    return {
        "gpus": gpus,
        "runs": runs,
        "append_ratio": ratio,
        "ingest_ratio": _ratio(runs, "ingest_s"),
        "update_ratio": _ratio(runs, "update_s"),
        "append_cpu_ratio": _ratio(runs, "append_cpu_s"),
        "target_ratio": TARGET_RATIO,
        "within_target": ratio <= TARGET_RATIO,
    }
