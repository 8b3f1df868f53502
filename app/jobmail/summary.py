"""The short summary of a job that a slurmctld epilog stores in its AdminComment, and its reading.

Written by `gpuledger job ID --format summary` (deploy/slurm/epilog-slurmctld-gpuledger.sh):
one line of compact JSON, `{"gpuledger":1,"busy":…,"idle_gpu_h":…,"diagnosis":…,"finding":…}`.
`sacctmgr modify job … set AdminComment=…` (the only way to set it once a job has ended)
writes every quote as a backtick, and Slurm 22.05 lowercases the whole value, so sacct shows
``{`gpuledger`:1,`busy`:0.42,`diagnosis`:`idle`,…}``. The summary's strings hold no quotes,
backticks or `|` (sacct's `-P` delimiter), and `parse_admin_comment` reads either form back.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from detectors.job_report import JobReport

__all__ = ["SUMMARY_KEYS", "parse_admin_comment", "render_summary", "summary"]

SUMMARY_VERSION = 1
# The job's state, GPUs and times are sacct's own; at a job's end the lake may still hold it as
# running, so the summary keeps to what only gpuledger knows.
SUMMARY_KEYS = ("gpuledger", "busy", "idle_gpu_h", "diagnosis", "finding")
FINDING_CHARS = 120  # AdminComment is for a short note, not the whole report
_SEVERITY_RANK = {"critical": 0, "warn": 1, "info": 2}
_UNSAFE = str.maketrans({'"': "", "'": "", "`": "", "|": "/", "\n": " ", "\\": "/"})


def _text(value: Any, limit: int = FINDING_CHARS) -> str | None:
    if value is None:
        return None
    text = " ".join(str(value).translate(_UNSAFE).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _round(value: Any, digits: int) -> float | None:
    """`value` rounded; None for none, or for NaN or infinite (a figure another tool's file
    broke: JSON has no such number)."""
    if value is None or not math.isfinite(float(value)):
        return None
    return round(float(value), digits)


def summary(report: JobReport) -> dict[str, Any]:
    """The job's summary: `busy` its mean GPU busy fraction and `idle_gpu_h` its GPU-hours
    held idle (both null without telemetry), `diagnosis` its bottleneck, `finding` its main
    finding (the most severe, then the most GPU-h at stake, as `detector: message`, at most
    120 characters), null when `gpuledger detect` stored none for it."""
    job = report.job
    finding = None
    if report.findings:
        top = min(
            report.findings,
            key=lambda f: (
                _SEVERITY_RANK.get(f.get("severity") or "", 3),
                -(f.get("gpu_h_at_stake") or 0),
            ),
        )
        finding = _text(f"{top['detector']}: {top.get('message') or ''}".rstrip(": "))
    return {
        "gpuledger": SUMMARY_VERSION,
        "busy": _round(job.get("busy_mean"), 3),
        # (the marts count a job no sample saw as 0 idle: without telemetry it is unknown)
        "idle_gpu_h": _round(job.get("idle_gpu_h"), 3) if job.get("observed_gpu_h") else None,
        "diagnosis": _text(report.diagnosis.get("diagnosis")),
        "finding": finding,
    }


def render_summary(report: JobReport) -> str:
    """`summary` as one line of compact JSON."""
    return json.dumps(summary(report), separators=(",", ":")) + "\n"


def parse_admin_comment(text: str | None) -> dict[str, Any] | None:
    """A summary read back from an AdminComment (as written, or as sacctmgr stored it);
    None for an empty comment or one that is not a gpuledger summary."""
    if not text or "gpuledger" not in text.lower():
        return None
    try:
        data = json.loads(text.strip().replace("`", '"'))
    except ValueError:
        return None
    if not isinstance(data, dict) or "gpuledger" not in data:
        return None
    return data
