"""The `[retention]` section: how long the lake keeps raw samples, findings and alert history."""

from __future__ import annotations

from dataclasses import dataclass

from app.config import register_section, setting

__all__ = ["MAX_DAYS", "RetentionConfig"]


# a century: a cutoff further back would lie before the calendar's first year from any date
MAX_DAYS = 36_500


def _days(v: int) -> str | None:
    if 0 <= v <= MAX_DAYS:
        return None
    return f"expected 0 (keep every day) or a number of days up to {MAX_DAYS:,}"


@register_section("retention")
@dataclass(frozen=True, slots=True)
class RetentionConfig:
    """How long the lake keeps what grows (`gpuledger prune`, each `gpuledger run` round): raw
    GPU samples retire into their derived partitions, which keep every figure; old findings
    and alert deliveries are deleted."""

    raw_days: int = setting(
        90,
        "Days of raw GPU samples kept per cluster, counted back from the end of its data (not "
        "the wall clock). An older day's sample files are deleted once its derived partitions "
        "are built from them and checked; every mart, report and page keeps its figures. "
        "0: keep every day.",
        _days,
    )
    findings_days: int = setting(
        365,
        "Days a finding is kept after its problem ended, counted back from the end of its "
        "cluster's data; an open finding stays. 0: keep every finding. (Recommendations need "
        "none: each detect run replaces them with the advice the latest replay supports.)",
        _days,
    )
    alert_ledger_days: int = setting(
        365,
        "Days the alert ledger keeps a delivered or failed message and its attempts, counted "
        "back from now (a delivery record, on the wall clock); a notice goes with its last "
        "message once its finding is no longer stored. Actions run are kept for ever. "
        "0: keep everything.",
        _days,
    )
