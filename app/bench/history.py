"""The `history` scenario: one more day appended to lakes of 7, 28 and 365 days of history.

An update's cost should follow what changed, not the history behind it. For each history
length a synthetic lake (app/bench/lakes.py) is generated with one day more, that day's
samples are held back, the marts are built, then the day lands and the update is timed as
`gpuledger attribute` runs it (app.pipeline.attribute): closed days compacted, the per-day
pass (the new day, the tail of the day before), the summary marts updated in place. The
ratio of the longest history's update to the shortest's is the figure (issue #24's target:
within 1.5×).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from warehouse.lake import Lake

__all__ = ["HISTORY_DAYS", "run_history_bench"]

HISTORY_DAYS = (7, 28, 365)
TARGET_RATIO = 1.5


def _update(lake: Lake) -> Any:
    """What `gpuledger attribute` does to the lake as it is now (app.pipeline.attribute)."""
    import datetime as dt

    from app.pipeline import attribute, default_pipeline_config

    return attribute(lake, default_pipeline_config(), dt.datetime.now(dt.UTC))


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
        made = synthetic_lake(lake, gpus, days + 1)
        held = hold_back_last_day(lake, base / f"aside-{days}")
        started = time.perf_counter()
        _update(lake)
        build_s = time.perf_counter() - started
        held.restore()
        echo(f"bench history: the day after {days} days lands")
        started = time.perf_counter()
        result = _update(lake)
        append_s = time.perf_counter() - started
        again = time.perf_counter()
        _update(lake)  # nothing changed: the fixed cost of an update at this history
        unchanged_s = time.perf_counter() - again
        runs.append(
            {
                "days": days,
                "samples": made.samples,
                "build_s": build_s,
                "append_s": append_s,
                "unchanged_s": unchanged_s,
                "days_rebuilt": result.days_rebuilt,
                "tails_rebuilt": result.tails_rebuilt,
            }
        )
        shutil.rmtree(lake.root, ignore_errors=True)
    appends = [run["append_s"] for run in runs]
    ratio = max(appends) / min(appends)
    return {
        "gpus": gpus,
        "runs": runs,
        "append_ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "within_target": ratio <= TARGET_RATIO,
    }
