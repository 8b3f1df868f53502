"""Render notices and digests with the Jinja2 templates in `app/alerts/templates/`.

Email gets a plain-text and an HTML part; Slack gets Block Kit JSON plus a fallback text.
Values are formatted here (hours, percentages, times) so templates only lay them out.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from app.alerts.directory import Person
from app.alerts.findings import FindingContext
from app.alerts.fixes import concrete_fix
from app.alerts.plan import Notice, Stage
from detectors.wording import counted

__all__ = ["ROLES", "DigestRow", "Rendered", "render_digest", "render_notice"]

TEMPLATES = Path(__file__).with_name("templates")
ROLES = ("owner", "manager", "admin")
STAGE_LABELS = {
    Stage.NOTICE: "Notice",
    Stage.SECOND: "Second notice",
    Stage.FINAL: "Final notice",
    Stage.ACTION: "Job cancelled",
}


@dataclass(frozen=True, slots=True)
class Rendered:
    """One message in every form a channel needs."""

    subject: str
    text: str
    html: str
    slack_text: str
    blocks: list[dict[str, Any]]


def _slack_escape(value: object) -> str:
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=lambda name: name is not None and name.endswith(".html.j2"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["slack"] = _slack_escape
    env.filters["counted"] = counted
    return env


def _one_line(text: str, limit: int = 200) -> str:
    """A header-safe subject: no line breaks (they would end the header), at most `limit`."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _pct(value: float | None, scale: float = 100.0) -> str | None:
    return None if value is None else f"{value * scale:.1f} %"


def _hours(value: float | None) -> str | None:
    return None if value is None else f"{value:,.1f}"


def _when(ts: dt.datetime | None) -> str | None:
    return None if ts is None else ts.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _what(f: FindingContext) -> str:
    if f.job_id:
        return f"job {f.job_id}"
    return f"{f.subject_kind} {f.subject_id}"


def _since(f: FindingContext) -> dt.datetime | None:
    """When the waste began: the finding's span start, never before the job itself started
    (findings are bucketed, so their start can fall a few minutes before the job's)."""
    if f.start_ts is not None and f.job_start_ts is not None:
        return max(f.start_ts, f.job_start_ts)
    return f.start_ts


def _headline(f: FindingContext) -> str:
    """The finding's message as the sentence a template ends with its own full stop."""
    return (f.message or f"{f.detector} on {_what(f)}").rstrip().rstrip(".")


def _finding_context(f: FindingContext, idle_detectors: tuple[str, ...]) -> dict[str, Any]:
    activity = []
    if f.busy_mean is not None:
        activity.append(f"busy {_pct(f.busy_mean)}")
    if f.gpu_util_pct_mean is not None:
        activity.append(f"GPU_UTIL {_pct(f.gpu_util_pct_mean, 1.0)}")
    if f.sm_active_mean is not None:
        activity.append(f"SM active {_pct(f.sm_active_mean)}")
    if f.gpus_never_active is not None and f.gpus:
        activity.append(f"{f.gpus_never_active} of {counted(f.gpus, 'GPU')} never active")
    if f.fb_used_mib_max is not None:
        activity.append(f"max memory {f.fb_used_mib_max:,.0f} MiB")
    return {
        "f": f,
        "what": _what(f),
        "headline": _headline(f),
        "nodes": ", ".join(f.nodes) if f.nodes else (f.node or None),
        "activity": " · ".join(activity) or None,
        "gpu_h": _hours(f.gpu_h_at_stake),
        "since": _when(_since(f)),
        "rank": (
            f"#{f.user_rank} of {counted(f.users_ranked, 'user')} by GPU-hours at stake on "
            f"{f.cluster}"
            if f.user_rank is not None and f.users_ranked
            else None
        ),
        "fix": concrete_fix(f, idle_detectors),
    }


def render_notice(
    notice: Notice,
    to: Person,
    role: str,
    idle_detectors: tuple[str, ...],
    contacts: tuple[str, ...] = (),
) -> Rendered:
    """The message about `notice` for one recipient in `role` (owner, manager or admin);
    `contacts` are the addresses an owner is told to write to with questions."""
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {ROLES}")
    f = notice.finding
    label = (
        STAGE_LABELS[notice.stage]
        if notice.escalating or notice.stage == Stage.ACTION
        else ("Critical" if f.severity == "critical" else "Notice")
    )
    ctx = _finding_context(f, idle_detectors) | {
        "notice": notice,
        "label": label,
        "to": to,
        "role": role,
        "action_at": _when(notice.action_at),
        "test": notice.test_mode,
        "contacts": ", ".join(contacts) or None,
    }
    prefix = "[gpuledger TEST]" if notice.test_mode else "[gpuledger]"
    subject = _one_line(f"{prefix} {label}: {ctx['headline']} ({f.cluster})")
    env = _env()
    text = env.get_template("notice.txt.j2").render(ctx)
    html = env.get_template("notice.html.j2").render(ctx | {"subject": subject})
    blocks = json.loads(env.get_template("notice.slack.json.j2").render(ctx))
    slack_text = _one_line(f"{label}: {ctx['headline']} ({f.cluster})", 3000)
    return Rendered(subject, text, html, slack_text, blocks)


@dataclass(frozen=True, slots=True)
class DigestRow:
    """One notice as the admins' digest lists it (stored with the notice in the ledger)."""

    cluster: str
    what: str
    label: str
    severity: str
    detector: str
    message: str
    user: str | None = None
    account: str | None = None
    gpu_h_at_stake: float | None = None
    test_mode: bool = False

    @classmethod
    def of(cls, n: Notice) -> DigestRow:
        """The digest line of a notice."""
        f = n.finding
        return cls(
            cluster=f.cluster,
            what=_what(f),
            label=STAGE_LABELS[n.stage],
            severity=f.severity,
            detector=f.detector,
            message=f.message or "",
            user=f.user,
            account=f.account,
            gpu_h_at_stake=f.gpu_h_at_stake,
            test_mode=n.test_mode,
        )


def render_digest(rows: list[DigestRow], generated: dt.datetime) -> Rendered:
    """The admins' summary of the notices since the last digest, largest GPU-hours first."""
    ordered = sorted(rows, key=lambda r: (-(r.gpu_h_at_stake or 0.0), r.cluster, r.what))
    total = sum(r.gpu_h_at_stake or 0.0 for r in rows)
    ctx = {
        "rows": [{"r": r, "gpu_h": _hours(r.gpu_h_at_stake) or "–"} for r in ordered],
        "count": len(rows),
        "total": _hours(total),
        "generated": _when(generated),
        "test": any(r.test_mode for r in rows),
    }
    env = _env()
    prefix = "[gpuledger TEST]" if ctx["test"] else "[gpuledger]"
    subject = f"{prefix} Digest: {counted(len(rows), 'alert')}, {ctx['total']} GPU-hours at stake"
    text = env.get_template("digest.txt.j2").render(ctx)
    html = env.get_template("digest.html.j2").render(ctx | {"subject": subject})
    blocks = json.loads(env.get_template("digest.slack.json.j2").render(ctx))
    return Rendered(subject, text, html, subject, blocks)
