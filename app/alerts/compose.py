"""Turn planned notices into addressed messages: who gets what, on which channel, under which key.

One message per recipient per channel per run: a person told of several notices in one run
gets one digest of them (`render_person`, most GPU-hours at stake first), never one message
each; a single notice keeps its own message. A person's daily cap (`max_messages_per_day`,
counted per channel over the local day of `alerts.timezone`) holds back further non-critical
notices until the next day; critical findings and final notices still go out, and admins
(digests, hardware, test mode) are not capped.

Routing: a job's owner by email and (with a Slack ID and a token) Slack DM; the account's
managers from the final notice on, and for critical findings; hardware findings and findings
with no user to the admins. Opted-out users get nothing but critical findings and final notices.
In test mode every message goes to the admins instead. Each message's idempotency key is a hash
of what it says to whom, so planning the same thing twice yields the same key.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import logging
import zoneinfo
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.alerts.directory import Directory, Person
from app.alerts.plan import Notice, Stage
from app.alerts.render import DigestRow, Rendered, render_digest, render_notice, render_person
from app.alerts.settings import AlertsConfig

if TYPE_CHECKING:
    from app.alerts.ledger import Ledger

logger = logging.getLogger(__name__)

__all__ = [
    "Inbox",
    "Outgoing",
    "compose_digest",
    "compose_notice",
    "idempotency_key",
    "notice_id",
    "queue_notices",
]


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
        rendered = render_notice(
            n,
            person,
            role,
            cfg.idle_detectors,
            _contacts(cfg),
            cfg.templates_dir,
            timezone=cfg.timezone,
        )
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
    rows: list[DigestRow],
    notice_ids: list[int],
    cfg: AlertsConfig,
    now: dt.datetime,
    webhook: bool,
    held: dict[str, Inbox] | None = None,
) -> list[Outgoing]:
    """The admins' digest of the notices `notice_ids` (ledger ids): webhook and admin emails.

    `held`: the admins' own alerts of this run by email address (`queue_notices(hold=...)`);
    each admin's digest email carries theirs first, so an admin gets one email a run. Their
    notices are among `notice_ids`, so the key still names what the message says.
    """
    if not rows:
        return []
    rendered = render_digest(rows, now, cfg.templates_dir)
    base = idempotency_key("digest", *(str(i) for i in sorted(notice_ids)))
    targets = [("webhook", "webhook")] if webhook else []
    targets += [("email", a) for a in cfg.admin_emails]
    out = []
    for channel, address in targets:
        box = (held or {}).get(address) if channel == "email" else None
        if box is not None:
            mine = _render_inbox(box, cfg)
            body = render_digest(rows, now, cfg.templates_dir, mine)
        else:
            body = rendered
        key = idempotency_key(base, channel, address)
        out.append(Outgoing(key, "digest", "admin", channel, address, _payload(body, address)))
    return out


def _channels(n: Notice, person: Person, slack: bool) -> list[tuple[str, str]]:
    out = [("email", person.email)] if person.email else []
    if slack and person.slack_id and not n.test_mode:
        out.append(("slack", person.slack_id))
    return out


def _day_start(cfg: AlertsConfig, now: dt.datetime) -> dt.datetime:
    """Midnight of `now`'s local day in the site's time zone (alerts.timezone)."""
    local = now.astimezone(zoneinfo.ZoneInfo(cfg.timezone))
    return local.replace(hour=0, minute=0, second=0, microsecond=0)


@dataclass
class Inbox:
    """What one recipient on one channel hears this run."""

    person: Person
    items: list[tuple[Notice, str, int]]  # (notice, role, ledger id)


def _render_inbox(box: Inbox, cfg: AlertsConfig) -> Rendered:
    """One notice as its own message; several as the person's digest of them."""
    if len(box.items) == 1:
        n, role, _ = box.items[0]
        return render_notice(
            n,
            box.person,
            role,
            cfg.idle_detectors,
            _contacts(cfg),
            cfg.templates_dir,
            timezone=cfg.timezone,
        )
    return render_person(
        [(n, role) for n, role, _ in box.items],
        box.person,
        cfg.idle_detectors,
        _contacts(cfg),
        cfg.templates_dir,
        timezone=cfg.timezone,
    )


def queue_notices(
    ledger: Ledger,
    notices: list[Notice],
    directory: Directory,
    cfg: AlertsConfig,
    now: dt.datetime,
    hold: dict[str, Inbox] | None = None,
) -> tuple[list[Notice], list[Outgoing], list[Notice]]:
    """Record `notices` in the ledger and queue one message per recipient and channel.

    Returns the notices recorded, the messages queued, and the notices nobody could be told.
    With `hold` (when the admins' digest is due this run), what the admins' email addresses
    would hear is put there by address instead of queued: `compose_digest` folds it into
    their digest.
    A notice every recipient of which has reached their daily cap is not recorded: the
    planner offers it again on a later run (the next day).
    """
    slack = cfg.slack_token is not None
    cap = cfg.max_messages_per_day
    day = _day_start(cfg, now)
    sent_today: dict[tuple[str, str], int] = {}

    def capped(channel: str, address: str) -> bool:
        if not cap:
            return False
        if (channel, address) not in sent_today:
            sent_today[channel, address] = ledger.messages_to(channel, address, day)
        return sent_today[channel, address] >= cap

    inboxes: dict[tuple[str, str], Inbox] = {}
    recorded: list[Notice] = []
    unrouted: list[Notice] = []
    for n in notices:
        f = n.finding
        must_hear = f.severity == "critical" or n.stage >= Stage.FINAL
        targets = [
            (person, role, channel, address)
            for person, role in _recipients(n, directory, cfg)
            for channel, address in _channels(n, person, slack)
        ]
        open_targets = [
            t for t in targets if must_hear or t[1] == "admin" or not capped(t[2], t[3])
        ]
        if targets and not open_targets:
            logger.info(
                "%s %s waits: its recipients reached their daily cap", f.cluster, f.finding_id
            )
            continue
        nid = ledger.add_notice(
            cluster=f.cluster,
            finding_id=f.finding_id,
            subject_key=f.subject_key,
            detector=f.detector,
            stage=int(n.stage),
            fingerprint=f.fingerprint,
            severity=f.severity,
            test_mode=n.test_mode,
            now=now,
            summary=dataclasses.asdict(DigestRow.of(n)),
        )
        if nid is None:
            continue
        recorded.append(n)
        if not open_targets:
            unrouted.append(n)
        for person, role, channel, address in open_targets:
            box = inboxes.setdefault((channel, address), Inbox(person, []))
            if any(item[0] is n for item in box.items):
                continue  # a manager who is also the owner hears once
            box.items.append((n, role, nid))
    queued: list[Outgoing] = []
    admins = set(cfg.admin_emails)
    for (channel, address), box in inboxes.items():
        items = box.items
        if hold is not None and channel == "email" and address in admins:
            hold[address] = box
            continue
        if len(items) == 1:
            key = idempotency_key(notice_id(items[0][0]), channel, address)
        else:
            key = idempotency_key(
                "person", *sorted(notice_id(n) for n, _, _ in items), channel, address
            )
        rendered = _render_inbox(box, cfg)
        role = "owner" if any(r == "owner" for _, r, _ in items) else items[0][1]
        out = Outgoing(key, "notice", role, channel, address, _payload(rendered, address))
        if ledger.add_message(
            key=out.key,
            notice_id=items[0][2],
            kind=out.kind,
            role=out.role,
            channel=out.channel,
            recipient=out.recipient,
            payload=out.payload,
            now=now,
        ):
            ledger.link_notices(out.key, [(nid, r) for _, r, nid in items])
            queued.append(out)
    return recorded, queued, unrouted
