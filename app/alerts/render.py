"""Render notices and digests with the Jinja2 templates in `app/alerts/templates/`.

Email gets a plain-text and an HTML part; Slack gets Block Kit JSON plus a fallback text.
Values are formatted here (hours, percentages, times) so templates only lay them out.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import zoneinfo
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from app.alerts.directory import Person
from app.alerts.findings import FindingContext
from app.alerts.fixes import concrete_fix
from app.alerts.plan import Notice, Stage
from detectors.rules.config import WASTE_DETECTORS
from detectors.wording import counted

__all__ = [
    "TEMPLATE_NAMES",
    "check_templates",
    "render_person",
    "sample_finding",
    "ROLES",
    "DigestRow",
    "Rendered",
    "render_digest",
    "render_notice",
    "slack_entities",
    "slack_escape",
]

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


# Slack mrkdwn's formatting characters (bold, italic, strike, code) have no escape: a zero-width
# space on each side keeps them from pairing up while the text reads the same. An underscore
# inside a word (idle_job, GPU_UTIL) cannot open or close italics, so it is left alone.
_MRKDWN = re.compile(r"([*~`]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))")


def slack_escape(value: object) -> str:
    """`value` as Slack mrkdwn that shows exactly its text: `&`, `<` and `>` as Slack's
    entities (so `<!channel>` or `<http://x|click>` are no mention or link) and `*_~``
    fenced with zero-width spaces (so `*boss*` is not bold). For values only: a template's
    own formatting (`*Job*`) goes around the escaped values."""
    return _MRKDWN.sub("\u200b\\1\u200b", slack_entities(value))


def slack_entities(value: object) -> str:
    """`value` with only `&`, `<` and `>` escaped (no mention, link or channel can hide in
    it): for gpuledger's own prose whose `code spans` are meant (a fix's command)."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# Every template gpuledger renders; an override folder may replace any of them by name.
TEMPLATE_NAMES = tuple(
    f"{kind}.{form}.j2"
    for kind in ("notice", "person", "digest")
    for form in ("txt", "html", "slack.json")
)


@cache
def _env(folder: Path | None = None) -> jinja2.Environment:
    """The templates: `folder`'s where it has one of that name, else the shipped ones."""
    shipped = jinja2.FileSystemLoader(TEMPLATES)
    loader: jinja2.BaseLoader = (
        shipped
        if folder is None
        else jinja2.ChoiceLoader([jinja2.FileSystemLoader(folder), shipped])
    )
    env = jinja2.Environment(
        loader=loader,
        autoescape=lambda name: name is not None and name.endswith(".html.j2"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["slack"] = slack_escape
    env.filters["slack_entities"] = slack_entities
    env.filters["counted"] = counted
    env.filters["first_upper"] = first_upper
    return env


def first_upper(text: str) -> str:
    """`text` with its first letter in capitals, the rest as it is (Jinja's `capitalize`
    lowercases the rest: "job F2" read "Job f2", user "JSmith" "jsmith")."""
    return text[:1].upper() + text[1:]


def _one_line(text: str, limit: int = 200) -> str:
    """A header-safe subject: no line breaks (they would end the header), at most `limit`."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _pct(value: float | None, scale: float = 100.0) -> str | None:
    return None if value is None else f"{value * scale:.1f} %"


def _hours(value: float | None) -> str | None:
    return None if value is None else f"{value:,.1f}"


def _when(ts: dt.datetime | None, timezone: str = "UTC") -> str | None:
    """`ts` as a reader reads it: in the site's `timezone` (alerts.timezone), with UTC beside
    it (the lake's and the dashboard's times), or in UTC alone."""
    if ts is None:
        return None
    utc = ts.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    if timezone == "UTC":
        return utc
    local = ts.astimezone(zoneinfo.ZoneInfo(timezone))
    return f"{local:%Y-%m-%d %H:%M} {local.tzname()} ({utc})"


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


def _as_told(notice: Notice) -> FindingContext:
    """The finding as a message about `notice` tells it: after the action cancelled its job,
    the job has ended (the lake still showed it running when the action ran, and its advice
    read "If the job is stuck, cancel it" under "Job cancelled")."""
    f = notice.finding
    if notice.stage == Stage.ACTION and f.job_id and not f.job_ended:
        return replace(f, job_state="CANCELLED")
    return f


def _finding_context(
    f: FindingContext, idle_detectors: tuple[str, ...], timezone: str = "UTC"
) -> dict[str, Any]:
    activity = []
    if f.busy_mean is not None:
        activity.append(f"busy {_pct(f.busy_mean)}")
    if f.gpu_util_pct_mean is not None:
        activity.append(f"GPU_UTIL {_pct(f.gpu_util_pct_mean, 1.0)}")
    if f.sm_active_mean is not None:
        activity.append(f"SM active {_pct(f.sm_active_mean)}")
    # (of GPUs the telemetry saw: a job with none is not "0 of 1 GPU never active")
    if f.gpus_never_active is not None and f.gpus and f.busy_mean is not None:
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
        # what the figure counts: held so far, or a model's forecast (never "so far")
        "stake_note": f.forecast or "so far",
        "forecast": f.forecast is not None,
        # wasted only where the detector's hours are waste: a hardware finding's are the jobs'
        # hours at risk, job_without_data's those no telemetry covered (docs/detectors.md)
        "stake": "Wasted" if f.detector in WASTE_DETECTORS else "At stake",
        "since": None if f.forecast else _when(_since(f), timezone),
        "rank": (
            f"#{f.user_rank} of {counted(f.users_ranked, 'user')} by GPU-hours at stake on "
            f"{f.cluster}"
            if f.user_rank is not None and f.users_ranked
            else None
        ),
        "fix": concrete_fix(f, idle_detectors),
        # "looks unused" only where the finding says so: an idle detector's, not (say) a
        # stranded-GPU finding about an interactive job's CPU and memory requests
        "unused_session": bool(f.interactive) and f.detector in idle_detectors,
    }


def at_stake_total(
    figures: Iterable[tuple[tuple[str, ...], str, float | None, str | None]],
) -> float:
    """GPU-hours at stake over several findings given as (subject, detector, figure, owner):
    each subject (cluster, job or GPU) once, at its largest detector's figure, a detector's
    figures about one subject summed. A job's findings of several detectors (an idle rule, a
    model's forecasts at 15 and 30 minutes, a memory hold) are views of the same GPU-hours, and
    their sum could exceed what it ever held; one detector's several findings about it (its
    slow GPUs) share its loss between them. A finding about a user (`user NAME`: their last
    days' efficiency) counts their jobs' waste too: per owner, the larger of it and the sum of
    their other subjects (added, a user was told of 60.6 GPU-hours at stake of 51.1 held)."""
    per_detector: dict[tuple[tuple[str, ...], str], float] = {}
    owners: dict[tuple[str, ...], str | None] = {}
    for key, detector, gpu_h, owner in figures:
        per_detector[key, detector] = per_detector.get((key, detector), 0.0) + (gpu_h or 0.0)
        owners[key] = owners.get(key) or owner
    largest: dict[tuple[str, ...], float] = {}
    for (key, _), gpu_h in per_detector.items():
        largest[key] = max(largest.get(key, 0.0), gpu_h)
    about_owner: dict[tuple[str, str], float] = {}  # (cluster, owner) -> their user finding
    of_owner: dict[tuple[str, str], float] = {}  # (cluster, owner) -> their other subjects
    total = 0.0
    for key, gpu_h in largest.items():
        owner = owners[key]
        if owner is None:
            total += gpu_h
        elif key[-1] == f"user {owner}":
            about_owner[key[0], owner] = gpu_h
        else:
            of_owner[key[0], owner] = of_owner.get((key[0], owner), 0.0) + gpu_h
    for who in about_owner.keys() | of_owner.keys():
        total += max(about_owner.get(who, 0.0), of_owner.get(who, 0.0))
    return total


def _label(notice: Notice) -> str:
    if notice.escalating or notice.stage == Stage.ACTION:
        return STAGE_LABELS[notice.stage]
    return "Critical" if notice.finding.severity == "critical" else "Notice"


def render_notice(
    notice: Notice,
    to: Person,
    role: str,
    idle_detectors: tuple[str, ...],
    contacts: tuple[str, ...] = (),
    templates: Path | None = None,
    *,
    timezone: str = "UTC",
) -> Rendered:
    """The message about `notice` for one recipient in `role` (owner, manager or admin);
    `contacts` are the addresses an owner is told to write to with questions; `templates`
    a folder of overriding templates (alerts.templates_dir); times in `timezone` (the
    site's, alerts.timezone) and UTC."""
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {ROLES}")
    f = _as_told(notice)
    label = _label(notice)
    ctx = _finding_context(f, idle_detectors, timezone) | {
        "notice": notice,
        "label": label,
        "to": to,
        "role": role,
        "action_at": _when(notice.action_at, timezone),
        "test": notice.test_mode,
        "contacts": ", ".join(contacts) or None,
    }
    prefix = "[gpuledger TEST]" if notice.test_mode else "[gpuledger]"
    subject = _one_line(f"{prefix} {label}: {ctx['headline']} ({f.cluster})")
    env = _env(templates)
    text = env.get_template("notice.txt.j2").render(ctx)
    html = env.get_template("notice.html.j2").render(ctx | {"subject": subject})
    blocks = json.loads(env.get_template("notice.slack.json.j2").render(ctx))
    slack_text = _one_line(
        f"{label}: {slack_escape(ctx['headline'])} ({slack_escape(f.cluster)})", 3000
    )
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


def render_digest(
    rows: list[DigestRow],
    generated: dt.datetime,
    templates: Path | None = None,
    mine: Rendered | None = None,
) -> Rendered:
    """The admins' summary of the notices since the last digest, largest GPU-hours first.

    `mine`: the admin's own alerts of this run (hardware, no owner, test mode), rendered as
    their notice or person message; the digest then carries them first, under "For you", so
    an admin gets one email a run.
    """
    ordered = sorted(rows, key=lambda r: (-(r.gpu_h_at_stake or 0.0), r.cluster, r.what))
    total = at_stake_total(
        ((r.cluster, r.what), r.detector, r.gpu_h_at_stake, r.user) for r in rows
    )
    ctx = {
        "rows": [{"r": r, "gpu_h": _hours(r.gpu_h_at_stake) or "–"} for r in ordered],
        "count": len(rows),
        "total": _hours(total),
        "generated": _when(generated),
        "test": any(r.test_mode for r in rows),
        "mine": mine,
    }
    env = _env(templates)
    prefix = "[gpuledger TEST]" if ctx["test"] else "[gpuledger]"
    subject = f"{prefix} Digest: {counted(len(rows), 'alert')}, {ctx['total']} GPU-hours at stake"
    if mine is not None:
        subject = _one_line(f"{subject}; for you: {mine.subject.removeprefix(prefix).strip()}")
    text = env.get_template("digest.txt.j2").render(ctx)
    html = env.get_template("digest.html.j2").render(ctx | {"subject": subject})
    blocks = json.loads(env.get_template("digest.slack.json.j2").render(ctx))
    return Rendered(subject, text, html, subject, blocks)


def render_person(
    items: list[tuple[Notice, str]],
    to: Person,
    idle_detectors: tuple[str, ...],
    contacts: tuple[str, ...] = (),
    templates: Path | None = None,
    *,
    timezone: str = "UTC",
) -> Rendered:
    """One message telling `to` of several notices at once (each with the `role` they hear it
    in): most GPU-hours at stake first, each with its own finding's headline and fix; times
    in `timezone` and UTC."""
    ordered = sorted(
        items,
        key=lambda item: (
            -(item[0].finding.gpu_h_at_stake or 0.0),
            item[0].finding.cluster,
            item[0].finding.finding_id,
        ),
    )
    entries = [
        _finding_context(_as_told(n), idle_detectors, timezone)
        | {
            "notice": n,
            "label": _label(n),
            "role": role,
            "action_at": _when(n.action_at, timezone),
        }
        for n, role in ordered
    ]
    total = at_stake_total(
        (
            (n.finding.cluster, _what(n.finding)),
            n.finding.detector,
            n.finding.gpu_h_at_stake,
            n.finding.user,
        )
        for n, _ in items
    )
    test = any(n.test_mode for n, _ in items)
    clusters = sorted({n.finding.cluster for n, _ in items})
    ctx = {
        "items": entries,
        "count": len(items),
        "total": _hours(total),
        "to": to,
        "test": test,
        "clusters": ", ".join(clusters),
        "contacts": ", ".join(contacts) or None,
        "owner": any(role == "owner" for _, role in items),
    }
    prefix = "[gpuledger TEST]" if test else "[gpuledger]"
    worst = entries[0]
    subject = _one_line(
        f"{prefix} {counted(len(items), 'alert')}, {ctx['total']} GPU-hours at stake: "
        f"{worst['label']}: {worst['headline']} ({ctx['clusters']})"
    )
    env = _env(templates)
    text = env.get_template("person.txt.j2").render(ctx)
    html = env.get_template("person.html.j2").render(ctx | {"subject": subject})
    blocks = json.loads(env.get_template("person.slack.json.j2").render(ctx))
    slack_text = _one_line(
        f"{counted(len(items), 'alert')}, {ctx['total']} GPU-hours at stake: "
        f"{slack_escape(worst['headline'])}",
        3000,
    )
    return Rendered(subject, text, html, slack_text, blocks)


def sample_finding() -> FindingContext:
    """A made-up idle job finding with every field a template may show (for checking
    overriding templates: `gpuledger config check`)."""
    t = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.UTC)
    return FindingContext(
        cluster="sample",
        finding_id="sample-idle",
        detector="idle_job",
        severity="warn",
        subject_kind="job",
        subject_id="4242",
        detected_ts=t,
        job_id="4242",
        user="alice",
        account="physics",
        start_ts=t - dt.timedelta(hours=2),
        gpu_h_at_stake=8.5,
        message="4 GPUs idle for 2 h",
        job_name="train-llm",
        partition="gpu",
        interactive=False,
        job_start_ts=t - dt.timedelta(hours=3),
        gpus=4,
        nodes=("g001",),
        busy_mean=0.002,
        user_rank=1,
        users_ranked=3,
    )


def check_templates(folder: Path) -> str | None:
    """Why the overriding templates in `folder` cannot be used (one line naming the file), or
    None: each is rendered against a sample finding, as notice, person digest and digest."""
    if not folder.is_dir():
        return f"{folder} is not a folder"
    for path in sorted(folder.iterdir()):
        if path.name.endswith(".j2") and path.name not in TEMPLATE_NAMES:
            return f"{path.name} is no template gpuledger uses; known: {', '.join(TEMPLATE_NAMES)}"
    f = sample_finding()
    to = Person("alice", "alice@example.org", "U0ALICE", "Alice")
    notice = Notice(f, Stage.SECOND, True, False)
    other = Notice(
        dataclasses.replace(f, finding_id="sample-2", gpu_h_at_stake=1.0),
        Stage.NOTICE,
        False,
        False,
    )
    _env.cache_clear()  # the files may have changed since they were last read
    try:
        render_notice(notice, to, "owner", ("idle_job",), ("help@example.org",), folder)
        render_person([(notice, "owner"), (other, "manager")], to, ("idle_job",), (), folder)
        mine = render_notice(notice, to, "admin", ("idle_job",), (), folder)
        render_digest([DigestRow.of(notice)], f.detected_ts, folder, mine)
    except jinja2.TemplateSyntaxError as exc:
        return f"{Path(exc.filename or exc.name or '?').name} line {exc.lineno}: {exc.message}"
    except jinja2.TemplateError as exc:
        return f"a template does not render: {type(exc).__name__}: {exc}"
    except json.JSONDecodeError as exc:
        return f"a Slack template does not give JSON: {exc}"
    return None
