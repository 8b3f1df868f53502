"""One waste detector per job: where several waste rules flag the same job, keep the one that
describes it best (issue #27).

The order, most specific first: `hung_job` (a stalled collective: the job will never finish,
kill it), `memory_hold` (idle while holding GPU memory: a notebook or server left open),
`idle_job` (all GPUs idle), `partial_idle` (some GPUs idle while others work),
`overallocated` (every GPU lightly used: a smaller slice would do). A hung or idle job is also
lightly used, so without this it would be reported as overallocated too (or only as that, if its
idle rule missed it). Findings that are not about waste of the job's GPUs (time limits, stranded
GPUs, hardware) are kept as they are.
"""

from __future__ import annotations

import polars as pl

__all__ = ["WASTE_PRECEDENCE", "one_waste_detector"]

WASTE_PRECEDENCE: tuple[str, ...] = (
    "hung_job",
    "memory_hold",
    "idle_job",
    "partial_idle",
    "overallocated",
)


def one_waste_detector(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (findings rows) with, per job, only its highest-precedence waste finding."""
    rank = pl.col("detector").replace_strict(
        {d: i for i, d in enumerate(WASTE_PRECEDENCE)}, default=None, return_dtype=pl.Int32
    )
    waste_rank = pl.when(pl.col("subject_kind") == "job").then(rank)
    best = waste_rank.min().over("cluster", "subject_kind", "subject_id")
    return frame.filter(waste_rank.is_null() | (waste_rank == best))
