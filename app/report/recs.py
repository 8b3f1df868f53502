"""§7 of the weekly report: which recommendations fit, what each gain counts, and the evidence
as a few key figures with units (the raw JSON stays in recommendations.csv).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import polars as pl

from detectors.recommend.recommendation import GAIN_KINDS, hhmmss
from detectors.wording import counted

__all__ = ["URGENT_KINDS", "evidence_figures", "gain_text", "pick"]

# kinds that are never left out for lack of room: a failing node costs every job sent to it
URGENT_KINDS = frozenset({"drain_node"})
MAX_FIGURES = 7


def pick(recs: pl.DataFrame, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The rows to show, in `recs`' order: every urgent one, then the others up to `limit` in
    all; and how many are left out."""
    rows = recs.to_dicts()
    urgent = sum(1 for row in rows if row["kind"] in URGENT_KINDS)
    room = max(limit - urgent, 0)
    shown: list[dict[str, Any]] = []
    for row in rows:
        if row["kind"] in URGENT_KINDS:
            shown.append(row)
        elif room:
            shown.append(row)
            room -= 1
    return shown, len(rows) - len(shown)


def gain_text(
    gain: float | None,
    gain_kind: str | None,
    evidence_from: dt.datetime | None,
    evidence_until: dt.datetime | None,
) -> str | None:
    """`7,153.2 reserved GPU-h released to backfill in the 7.0 days of data replayed`."""
    if gain is None or not math.isfinite(gain):
        return None
    what = GAIN_KINDS.get(gain_kind or "", "GPU-h expected gain")
    text = f"{gain:,.1f} {what}"
    if evidence_from is not None and evidence_until is not None:
        days = (evidence_until - evidence_from).total_seconds() / 86400.0
        text += f" in the {days:,.1f} days of data replayed"
    return text


def _hours(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _gpu_h(value: float) -> str:
    return f"{value:,.1f} GPU-h"


def _pct(value: float) -> str:
    return f"{value * 100:.0f} %"


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _gpus(value: float) -> str:
    return counted(round(value), "GPU")


Fmt = Callable[[float], str]
# per kind: (path in the evidence, label, format); the label comes first ("median run 4.3 h")
FIGURES: dict[str, tuple[tuple[str, str, Fmt], ...]] = {
    "time_limit": (
        ("jobs", "completed jobs", _count),
        ("runtime_p50_s", "median run", _hours),
        ("time_limit_median_s", "median limit asked", _hours),
        ("default_time_s", "new DefaultTime", hhmmss),
        ("max_time_s", "new MaxTime", hhmmss),
        ("time_hint_s", "suggested --time", hhmmss),
        ("jobs_over_new_limit", "jobs longer than the new limit", _count),
        ("jobs_over_max_time", "jobs asking more than MaxTime", _count),
        ("unused_limit_gpu_h", "reserved but unused", _gpu_h),
        ("default_time_gpu_h_if_all_default", "DefaultTime's release if no job set --time", _gpu_h),
    ),
    "gpu_cap": (
        ("cap_gpus", "cap", _gpus),
        ("peak_gpus", "peak held", _gpus),
        ("hours_above_cap", "hours above the cap", lambda v: f"{v:,.1f} h"),
        ("share_of_cluster_gpu_h", "share of the cluster's GPU-h", _pct),
        ("other_jobs_waiting_meanwhile", "others' jobs waiting meanwhile", _count),
    ),
    "idle_cancel_policy": (
        ("chosen.warn_minutes", "warn after", lambda v: f"{v:.0f} idle min"),
        ("chosen.cancel_minutes", "cancel after", lambda v: f"{v:.0f} idle min"),
        ("chosen.jobs_cancelled", "jobs cancelled", _count),
        ("chosen.users_hit", "users", _count),
        ("chosen.false_kills", "cancelled jobs that were active again", _count),
        ("chosen.gpu_h_recovered", "recovered", _gpu_h),
    ),
    "mig_packing": (
        ("candidate_jobs", "small one-GPU jobs", _count),
        ("users", "users", _count),
        ("candidate_gpu_h", "their GPU time", _gpu_h),
        ("gpus_to_convert", "GPUs to convert", _count),
    ),
    "drain_node": (
        ("node_failure_rate", "node failure rate", _pct),
        ("cluster_failure_rate", "cluster failure rate", _pct),
        ("failed_gpu_h", "failed jobs' GPU time", _gpu_h),
        ("failed_gpu_h_at_cluster_rate", "of which at the cluster's rate", _gpu_h),
        ("critical_findings", "critical findings", _count),
    ),
    "power_cap": (
        ("cap_w", "cap", lambda v: f"{v:,.0f} W"),
        ("power_limit_w", "from", lambda v: f"{v:,.0f} W"),
        ("low_activity_share", "low-activity share", _pct),
        ("low_activity_jobs", "low-activity jobs", _count),
        ("kwh_saved", "saves", lambda v: f"{v:,.1f} kWh"),
    ),
    "gpu_billing": (
        ("gpu_weight_cpus", "GPU billing weight", lambda v: f"{v:,.0f} CPUs"),
        ("largest_share_gap", "largest share gap", _pct),
    ),
}
SKIPPED = frozenset({"replayed_from", "replayed_until", "gain_kind", "gain_is"})


def _at(evidence: Mapping[str, Any], path: str) -> Any:
    value: Any = evidence
    for key in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _generic(key: str, value: Any) -> str | None:
    """`kWh saved 40.0`: a flat figure of an evidence this module has no list for."""
    if key in SKIPPED or value is None or isinstance(value, Mapping | list):
        return None
    label = key.replace("_", " ").replace("gpu h", "GPU-h").replace("kwh", "kWh")
    if isinstance(value, bool):
        return f"{label} {'yes' if value else 'no'}"
    if isinstance(value, int):
        return f"{label} {value:,}"
    if isinstance(value, float):
        if key.endswith("_s"):
            return f"{label[:-2]} {_hours(value)}"
        return f"{label} {value:,.1f}"
    return f"{label} {value}"


def evidence_figures(kind: str, evidence: str | None) -> list[str]:
    """The evidence's key figures with units, for a manager to read (empty if not JSON)."""
    try:
        parsed = json.loads(evidence or "{}")
    except json.JSONDecodeError:
        return []
    if not isinstance(parsed, Mapping):
        return []
    out: list[str] = []
    if kind == "drain_node":
        events, kinds = parsed.get("hw_events"), parsed.get("hw_event_kinds")
        if isinstance(events, int) and events:
            noun = "hardware event" if events == 1 else "hardware events"
            out.append(f"{events} {noun}" + (f" ({kinds})" if kinds else ""))
        failed, jobs = parsed.get("failed_jobs"), parsed.get("jobs")
        if isinstance(failed, int) and isinstance(jobs, int) and jobs:
            out.append(f"{failed:,} of {counted(jobs, 'job')} failed")
    spec = FIGURES.get(kind)
    if spec is None:
        figures = (_generic(str(k), v) for k, v in parsed.items())
        return out + [f for f in figures if f is not None][:MAX_FIGURES]
    for path, label, fmt in spec:
        value = _at(parsed, path)
        if isinstance(value, int | float) and not isinstance(value, bool):
            if math.isfinite(value):
                out.append(f"{label} {fmt(value)}")
    return out[:MAX_FIGURES]
