"""Turn planned notices into addressed messages: who gets what, on which channel, under which key.

Routing: a job's owner by email and (with a Slack ID and a token) Slack DM; the account's
managers from the final notice on, and for critical findings; hardware findings and findings
with no user to the admins. Opted-out users get nothing but critical findings and final notices.
In test mode every message goes to the admins instead. Each message's idempotency key is a hash
of what it says to whom, so planning the same thing twice yields the same key.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any

from app.alerts.directory import Directory, Person
from app.alerts.plan import Notice, Stage
from app.alerts.render import DigestRow, Rendered, render_digest, render_notice
from app.alerts.settings import AlertsConfig

__all__ = ["Outgoing", "compose_digest", "compose_notice", "idempotency_key", "notice_id"]


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to one recipient on one channel."""

    key: str
    kind: str  # notice | digest
    role: str  # owner | manager | admin
    channel: str  # email | slack | webhook
    recipient: str
    payload: dict[str, Any]


def idempotency_key(*parts: str) -> str:
    """A stable key for a message: 32 hex digits of SHA-256 over its identifying parts."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def notice_id(n: Notice) -> str:
    """What identifies a notice: finding, stage, what it said, test or real."""
    f = n.finding
    mode = "test" if n.test_mode else "real"
    return "\x1e".join((f.cluster, f.finding_id, str(int(n.stage)), f.fingerprint, mode))


def _payload(r: Rendered, recipient: str) -> dict[str, Any]:
    return {
        "to": recipient,
        "subject": r.subject,
        "text": r.text,
        "html": r.html,
        "slack_text": r.slack_text,
        "blocks": r.blocks,
    }


def _contacts(cfg: AlertsConfig) -> tuple[str, ...]:
    """Whom a user writes to with questions: the reply-to address, else the admins."""
    return (cfg.email_reply_to,) if cfg.email_reply_to else tuple(cfg.admin_emails)


def _recipients(n: Notice, directory: Directory, cfg: AlertsConfig) -> list[tuple[Person, str]]:
    f = n.finding
    admins = [(Person(user=None, email=a, name="admin"), "admin") for a in cfg.admin_emails]
    if n.test_mode or f.is_hardware or not f.user:
        return admins
    out: list[tuple[Person, str]] = []
    owner = directory.person(f.user)
    must_hear = f.severity == "critical" or n.stage >= Stage.FINAL
    if not owner.opt_out or must_hear:
        out.append((owner, "owner"))
    if must_hear:
        out.extend((m, "manager") for m in directory.managers(f.account))
    return out


def compose_notice(
    n: Notice, directory: Directory, cfg: AlertsConfig, slack: bool
) -> list[Outgoing]:
    """The messages for one notice (none when nobody may be told)."""
    base = notice_id(n)
    out = []
    seen: set[tuple[str, str]] = set()
    for person, role in _recipients(n, directory, cfg):
        rendered = render_notice(n, person, role, cfg.idle_detectors, _contacts(cfg))
        channels = []
        if person.email:
            channels.append(("email", person.email))
        if slack and person.slack_id and not n.test_mode:
            channels.append(("slack", person.slack_id))
        for channel, address in channels:
            if (channel, address) in seen:
                continue  # a manager who is also the owner hears once
            seen.add((channel, address))
            key = idempotency_key(base, channel, address)
            out.append(Outgoing(key, "notice", role, channel, address, _payload(rendered, address)))
    return out


def compose_digest(
    rows: list[DigestRow], notice_ids: list[int], cfg: AlertsConfig, now: dt.datetime, webhook: bool
) -> list[Outgoing]:
    """The admins' digest of the notices `notice_ids` (ledger ids): webhook and admin emails."""
    if not rows:
        return []
    rendered = render_digest(rows, now)
    base = idempotency_key("digest", *(str(i) for i in sorted(notice_ids)))
    targets = [("webhook", "webhook")] if webhook else []
    targets += [("email", a) for a in cfg.admin_emails]
    return [
        Outgoing(
            idempotency_key(base, channel, address),
            "digest",
            "admin",
            channel,
            address,
            _payload(rendered, address),
        )
        for channel, address in targets
    ]
