"""The `[retention]` section: how many days of raw samples the lake keeps."""

from __future__ import annotations

from dataclasses import dataclass

from app.config import register_section, setting

__all__ = ["RetentionConfig"]


def _days(v: int) -> str | None:
    return None if v >= 0 else "expected 0 (keep every day) or a number of days"


@register_section("retention")
@dataclass(frozen=True, slots=True)
class RetentionConfig:
    """How long raw GPU samples stay in the lake (`gpuledger prune`, each `gpuledger run`
    round): older days retire into their derived partitions, which keep every figure."""

    raw_days: int = setting(
        90,
        "Days of raw GPU samples kept per cluster, counted back from the end of its data (not "
        "the wall clock). An older day's sample files are deleted once its derived partitions "
        "are built from them and checked; every mart, report and page keeps its figures. "
        "0: keep every day.",
        _days,
    )
