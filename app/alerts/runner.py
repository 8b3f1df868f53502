"""One alerting cycle (read findings → plan → queue → act → deliver) and the `--follow` loop.

A cycle holds an exclusive lock on `<lake>/_state/alerts.lock`: a second alerter on the same
lake stops with one error line instead of sending twice. `--dry-run` plans against the ledger
read-only and returns the messages it would send; it writes nothing and contacts no server.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.alerts.actions import ActionRunner, KubeApiFactory, SubprocessRunner, confirm
from app.alerts.compose import Inbox, Outgoing, compose_digest, queue_notices
from app.alerts.deliver import Channels, Clock, DeliveryReport, Sleep, deliver_due
from app.alerts.directory import Directory, load_directory
from app.alerts.errors import DeliveryError, FindingsUnavailable
from app.alerts.findings import FindingContext, load_findings
from app.alerts.ledger import LEDGER_FILE, Ledger, StoredMessage
from app.alerts.plan import Action, Notice, Stage, plan
from app.alerts.render import DigestRow
from app.alerts.settings import AlertsConfig
from app.errors import AppError
from warehouse.errors import NotWritable
from warehouse.lake import Lake

if TYPE_CHECKING:
    from collector.sources.kubernetes.api import KubernetesApi

__all__ = [
    "AlertRunBusy",
    "CycleReport",
    "Seams",
    "build_channels",
    "follow",
    "run_cycle",
    "utc_now",
]

logger = logging.getLogger(__name__)
LOCK_FILE = "alerts.lock"


class AlertRunBusy(AppError):
    """Another `gpuledger alert` holds the lake's alert lock (a one-off run beside the service:
    the service tries again at its next cycle)."""


def utc_now() -> dt.datetime:
    """The real clock."""
    return dt.datetime.now(dt.UTC)


def _connect_kube(context: str) -> KubernetesApi:
    from collector.sources.kubernetes.api import connect_kubernetes

    return connect_kubernetes(context=context)


def _read_findings(lake: Lake, since: dt.datetime, now: dt.datetime) -> list[FindingContext]:
    import duckdb

    try:  # read again where `attribute`, a detector or compaction replaced a file meanwhile
        return lake.read_settled(lambda: load_findings(lake.connect(), since, now))
    except duckdb.Error as exc:  # (one line, not a traceback: the next run reads them)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FindingsUnavailable(f"the findings could not be read: {reason}") from None


@dataclass
class Seams:
    """What a cycle talks to, injectable for tests: time, senders, the action runner (which
    also runs the re-read of a Slurm job), the Kubernetes API of a kubeconfig context."""

    clock: Clock = utc_now
    sleep: Sleep = time.sleep
    channels: Channels | None = None  # None: built from the configuration
    run_action: ActionRunner = field(default_factory=SubprocessRunner)
    kube_api: KubeApiFactory = _connect_kube
    after_send: Callable[[StoredMessage], None] | None = None
    # (lake, since, now): the findings of the lookback window (findings_context's rule)
    read_findings: Callable[[Lake, dt.datetime, dt.datetime], list[FindingContext]] = _read_findings


@dataclass
class CycleReport:
    """What one cycle did (or, dry, would do)."""

    findings: int = 0
    notices: list[Notice] = field(default_factory=list)
    queued: list[Outgoing] = field(default_factory=list)
    actions: list[tuple[Action, int | None, str]] = field(default_factory=list)
    waiting: list[tuple[FindingContext, str]] = field(default_factory=list)
    backlog: int = 0  # messages queued by earlier runs and not yet delivered
    unrouted: list[Notice] = field(default_factory=list)  # notices nobody could be told
    delivery: DeliveryReport = field(default_factory=DeliveryReport)


def build_channels(cfg: AlertsConfig) -> Channels:
    """Senders for every configured channel (email is always configured: SMTP defaults)."""
    from app.alerts.slack import SlackSender, WebhookSender
    from app.alerts.smtp import SmtpSender, SmtpSettings

    return Channels(
        email=SmtpSender(SmtpSettings.from_alerts(cfg)),
        slack=SlackSender(cfg.slack_token, cfg.slack_api_url) if cfg.slack_token else None,
        webhook=WebhookSender(cfg.slack_webhook_url) if cfg.slack_webhook_url else None,
        email_from=cfg.email_from,
        reply_to=cfg.email_reply_to,
    )


@contextmanager
def _lake_lock(state: Path) -> Iterator[None]:
    from warehouse import layout

    # the group's whatever the umask, so an alerter run by another member can lock it too
    try:
        fd = layout.open_shared_file(state / LOCK_FILE, os.O_WRONLY | os.O_APPEND)
    except OSError as exc:  # (a read-only lake: a traceback; attribute and detect say this)
        raise NotWritable(state / LOCK_FILE, exc, "lock") from exc
    with os.fdopen(fd, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AlertRunBusy(
                f"another `gpuledger alert` is running on this lake ({state / LOCK_FILE})"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _queue(
    ledger: Ledger,
    notices: list[Notice],
    directory: Directory,
    cfg: AlertsConfig,
    now: dt.datetime,
    digest: bool,
) -> tuple[list[Notice], list[Outgoing], list[Notice]]:
    """Record notices and their messages in one transaction.

    Returns the new notices, their queued messages, and the notices nobody could be told
    (an opted-out user with no managers, a hardware finding with no admin_emails).
    """
    with ledger.transaction():
        # one message per recipient and channel (compose.queue_notices); when the admins'
        # digest is due, their own alerts ride in it: one email per admin per run
        held: dict[str, Inbox] | None = {} if digest and _digest_due(ledger, cfg, now) else None
        new_notices, queued, unrouted = queue_notices(
            ledger, notices, directory, cfg, now, hold=held
        )
        if digest:
            queued.extend(_queue_digest(ledger, cfg, now, held or {}))
    return new_notices, queued, unrouted


def _digest_due(ledger: Ledger, cfg: AlertsConfig, now: dt.datetime) -> bool:
    """Whether digest_every_minutes have passed since the last digest (or there was none)."""
    last = ledger.last_digest_ts()
    return last is None or now - last >= dt.timedelta(minutes=cfg.digest_every_minutes)


def _queue_digest(
    ledger: Ledger, cfg: AlertsConfig, now: dt.datetime, held: dict[str, Inbox]
) -> list[Outgoing]:
    """Queue one digest of every notice not yet digested, at most every digest_every_minutes;
    an admin's email also carries `held`, their own alerts of this run (recorded with it)."""
    pending = ledger.undigested()
    if not pending or not _digest_due(ledger, cfg, now):
        return []
    ids = [i for i, _ in pending]
    rows = [DigestRow(**summary) for _, summary in pending]
    webhook = cfg.slack_webhook_url is not None
    queued = []
    for out in compose_digest(rows, ids, cfg, now, webhook, held):
        if ledger.add_message(
            key=out.key,
            notice_id=None,
            kind=out.kind,
            role=out.role,
            channel=out.channel,
            recipient=out.recipient,
            payload=out.payload,
            now=now,
        ):
            box = held.get(out.recipient) if out.channel == "email" else None
            if box is not None:  # the notices it carries for this admin, in their role
                ledger.link_notices(out.key, [(nid, role) for _, role, nid in box.items])
            queued.append(out)
    ledger.mark_digested(ids, queued[0].key if queued else "none")
    return queued


def _act(
    ledger: Ledger, actions: list[Action], seams: Seams, cfg: AlertsConfig, report: CycleReport
) -> list[Notice]:
    """Run the actions; return the ACTION notices of those that succeeded, for the caller to
    queue with the run's other notices (one message per person per run)."""
    acted: list[Notice] = []
    for action in actions:
        f = action.finding
        assert f.job_id is not None
        if ledger.action_taken(f.cluster, f.job_id):
            continue
        # the scheduler, asked now, must say it is the same job and still running
        argv, why = confirm(f, action.endpoint, cfg, seams.run_action, seams.kube_api)
        if argv is None:
            logger.warning("no action on %s/%s: %s", f.cluster, f.job_id, why)
            report.waiting.append((f, f"no action: {why}"))
            continue
        action = dataclasses.replace(action, argv=argv)
        if not ledger.start_action(f.cluster, f.job_id, f.finding_id, argv, seams.clock()):
            continue
        code, output = seams.run_action(argv)
        ledger.finish_action(f.cluster, f.job_id, code, output, seams.clock())
        logger.warning("action %s → exit %d: %s", " ".join(argv), code, output)
        report.actions.append((action, code, output))
        if code == 0:
            acted.append(Notice(f, Stage.ACTION, True, False))
    return acted


def run_cycle(
    lake: Lake, cfg: AlertsConfig, seams: Seams | None = None, dry_run: bool = False
) -> CycleReport:
    """Read the lake's findings, plan, queue, act and deliver; return what happened."""

    seams = seams or Seams()
    if not lake.exists():
        raise AppError(f"lake {str(lake)!r} does not exist (--lake or GPULEDGER_LAKE)")
    directory = load_directory(cfg.directory, cfg.email_domain, cfg.opt_out)
    read_at = seams.clock()
    since = read_at - dt.timedelta(hours=cfg.lookback_hours)
    findings = seams.read_findings(lake, since, read_at)
    if cfg.action == "scancel":  # the fixes' commands name the Slurm cluster mapped to
        findings = [replace(f, slurm_name=cfg.endpoint(f.cluster)) for f in findings]
    report = CycleReport(findings=len(findings))
    if dry_run:
        path = lake.root / "_state" / LEDGER_FILE
        ledger = Ledger.snapshot(path)
        try:
            report.backlog = len(ledger.due(dt.datetime.max.replace(tzinfo=dt.UTC)))
            decided = plan(findings, ledger, cfg, seams.clock())
            report.waiting = decided.waiting
            report.actions = [(a, None, "would run (dry run)") for a in decided.actions]
            report.notices, report.queued, report.unrouted = _queue(
                ledger, decided.notices, directory, cfg, seams.clock(), digest=True
            )
        finally:
            ledger.close()
        return report
    state = lake.state_dir()
    with _lake_lock(state):
        ledger = Ledger.open(state / LEDGER_FILE)
        try:
            now = seams.clock()
            decided = plan(findings, ledger, cfg, now)
            report.waiting = decided.waiting
            # act first, then queue every notice of the run together: a person told of a
            # cancelled job and of other findings (or an admin's digest) gets one message
            acted = _act(ledger, decided.actions, seams, cfg, report)
            report.notices, report.queued, report.unrouted = _queue(
                ledger, decided.notices + acted, directory, cfg, seams.clock(), digest=True
            )
            channels = seams.channels or build_channels(cfg)
            report.delivery = deliver_due(
                ledger, channels, cfg, seams.clock, seams.sleep, seams.after_send
            )
        finally:
            ledger.close()
    return report


def follow(
    lake: Lake,
    cfg: AlertsConfig,
    seams: Seams,
    interval_s: float,
    should_stop: Callable[[], bool],
    on_cycle: Callable[[CycleReport], None] = lambda r: None,
) -> None:
    """Run a cycle every `interval_s` until `should_stop()`; a failed delivery never stops it."""
    while not should_stop():
        started = seams.clock()
        try:
            on_cycle(run_cycle(lake, cfg, seams))
        except (DeliveryError, FindingsUnavailable, AlertRunBusy) as err:  # transient: next time
            logger.warning("alert cycle: %s", err)
        spent = (seams.clock() - started).total_seconds()
        if should_stop():
            break
        seams.sleep(max(interval_s - spent, 0.0))
