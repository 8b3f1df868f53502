"""Hand queued messages over, with retries and backoff, recording every attempt in the ledger.

`sending` is committed before a hand-over and `delivered` after it. A transient failure is
retried up to `max_attempts` times in the run, waiting `Retry-After` when the server said so,
else `retry_base_s` doubling up to `retry_max_s`; after that the run gives up on the message,
and the rest of that channel's queue waits too (its server is down). A permanent error about
the whole channel (login refused, relay denied, SMTP 5xx at MAIL or DATA) gives up at once,
after two messages, not one per queued message: the first refused one waits on its own, and
the next one tells whether the channel refuses everything (refused too: the channel's queue
waits) or only that message (too large, taken for spam: sent, and the queue goes on). A
message a run gave up on is tried again by a later run, `retry_later_s` after, doubling each
time, and after `give_up_after_runs` such runs it is `failed`; while a channel is down its other
messages wait as long, untried, so two messages probe the channel after each wait. A
permanent error about the message itself (recipient refused) fails it at once.
`alert --retry-failed` puts failed messages back in the queue.
Clock, sleep and the point after each hand-over (a crash-injection seam) are injected.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.alerts.errors import DeliveryError
from app.alerts.ledger import Ledger, StoredMessage
from app.alerts.settings import AlertsConfig
from app.alerts.smtp import SmtpSender, compose_email

__all__ = ["Channels", "Clock", "DeliveryReport", "Sleep", "deliver_due"]

logger = logging.getLogger(__name__)
Clock = Callable[[], dt.datetime]
Sleep = Callable[[float], None]


class _Slack(Protocol):
    def send(self, channel: str, text: str, blocks: list[dict[str, Any]], key: str) -> None: ...


class _Webhook(Protocol):
    def send(self, text: str, blocks: list[dict[str, Any]], key: str) -> None: ...


@dataclass
class Channels:
    """The senders available in this run (None: that channel is not configured)."""

    email: SmtpSender | None = None
    slack: _Slack | None = None
    webhook: _Webhook | None = None
    email_from: str = "gpuledger@localhost"
    reply_to: str | None = None

    @contextmanager
    def session(self) -> Iterator[None]:
        """One delivery pass: the email sender keeps one SMTP connection for all of it."""
        session = getattr(self.email, "session", None)
        with session() if session is not None else nullcontext():
            yield

    def send(self, msg: StoredMessage) -> None:
        """Hand `msg` to its channel; raise DeliveryError when it cannot be."""
        p = msg.payload
        if msg.channel == "email":
            if self.email is None:
                raise DeliveryError("email is not configured", permanent=True)
            try:
                email = compose_email(
                    sender=self.email_from,
                    to=[msg.recipient],
                    subject=p["subject"],
                    text=p["text"],
                    html=p["html"],
                    idempotency_key=msg.key,
                    reply_to=self.reply_to,
                )
            except (ValueError, TypeError) as exc:
                # e.g. an address with a line break: it will never send, so it must not
                # block the queue as the first 'sending' message of every run
                raise DeliveryError(f"cannot build the email: {exc}", permanent=True) from None
            self.email.send(email)
        elif msg.channel == "slack":
            if self.slack is None:
                raise DeliveryError("Slack is not configured (alerts.slack_token)", permanent=True)
            self.slack.send(msg.recipient, p["slack_text"], p["blocks"], msg.key)
        elif msg.channel == "webhook":
            if self.webhook is None:
                raise DeliveryError("no alerts.slack_webhook_url", permanent=True)
            self.webhook.send(p["slack_text"], p["blocks"], msg.key)
        else:
            raise DeliveryError(f"unknown channel {msg.channel!r}", permanent=True)


@dataclass
class DeliveryReport:
    """What one delivery pass did."""

    delivered: list[str] = field(default_factory=list)
    retrying: list[str] = field(default_factory=list)  # wait for a later try (or run)
    untried: list[str] = field(default_factory=list)  # of those, not tried this run: channel down
    failed: list[tuple[str, str]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # a channel refused by 5xx
    attempts: int = 0


def _backoff(cfg: AlertsConfig, attempt: int, err: DeliveryError) -> float:
    if err.retry_after_s is not None:
        return err.retry_after_s
    return float(min(cfg.retry_max_s, cfg.retry_base_s * 2**attempt))


_LATER_MAX_S = 24 * 3600.0


def _give_up_for_now(
    ledger: Ledger,
    msg: StoredMessage,
    cfg: AlertsConfig,
    now: dt.datetime,
    err: DeliveryError,
    *,
    channel_down: bool = True,
) -> bool:
    """This run gives up on `msg`: a later run tries again after `retry_later_s`, doubling
    each time; after `give_up_after_runs` such runs it is `failed`. With `channel_down`, the
    channel's other messages wait as long. True when it failed."""
    runs = ledger.deferrals(msg.key) + 1
    if runs >= cfg.give_up_after_runs:
        ledger.mark_failed(msg.key, now, f"{err} (given up after {runs} run(s))")
        return True
    delay = min(_LATER_MAX_S, cfg.retry_later_s * 2 ** (runs - 1))
    if err.retry_after_s is not None:  # (a server's ask, at most the longest wait)
        delay = max(delay, min(err.retry_after_s, _LATER_MAX_S))
    until = now + dt.timedelta(seconds=delay)
    ledger.mark_deferred(msg.key, now, until, str(err))
    if channel_down:
        ledger.postpone_channel(msg.channel, until)  # its probes go first after the wait
    return False


def deliver_due(
    ledger: Ledger,
    channels: Channels,
    cfg: AlertsConfig,
    clock: Clock,
    sleep: Sleep,
    after_send: Callable[[StoredMessage], None] | None = None,
) -> DeliveryReport:
    """Send every due message once; see the module docstring for retries."""
    with channels.session():  # one SMTP connection per run, not per message
        return _deliver(ledger, channels, cfg, clock, sleep, after_send)


def _deliver(
    ledger: Ledger,
    channels: Channels,
    cfg: AlertsConfig,
    clock: Clock,
    sleep: Sleep,
    after_send: Callable[[StoredMessage], None] | None,
) -> DeliveryReport:
    report = DeliveryReport()
    down: set[str] = set()
    refused_once: set[str] = set()  # channels whose next message tells the channel from the message
    for msg in ledger.due(clock()):
        if msg.channel in down:
            report.retrying.append(msg.key)
            report.untried.append(msg.key)
            continue
        for attempt in range(cfg.max_attempts):
            ledger.mark_sending(msg.key, clock())
            report.attempts += 1
            try:
                channels.send(msg)
            except DeliveryError as err:
                if err.permanent and not err.channel_wide:
                    ledger.mark_failed(msg.key, clock(), str(err))
                    report.failed.append((msg.key, str(err)))
                    logger.warning("message %s failed: %s", msg.key, err)
                    break
                delay = _backoff(cfg, attempt, err)
                now = clock()
                if err.permanent or attempt + 1 == cfg.max_attempts or delay > cfg.retry_max_s:
                    # the channel is down or refuses every message: its queue waits; a first
                    # refusal may be about this message alone: the next message tells
                    first_refusal = err.permanent and msg.channel not in refused_once
                    if first_refusal:
                        refused_once.add(msg.channel)
                    else:
                        down.add(msg.channel)
                    if err.permanent:
                        report.refused.append((msg.key, str(err)))
                    if _give_up_for_now(ledger, msg, cfg, now, err, channel_down=not first_refusal):
                        report.failed.append((msg.key, str(err)))
                        logger.warning("message %s failed: %s", msg.key, err)
                    else:
                        report.retrying.append(msg.key)
                        logger.warning("message %s waits for a later run: %s", msg.key, err)
                    break
                ledger.mark_retry(msg.key, now, now + dt.timedelta(seconds=delay), str(err))
                logger.info("message %s: %s; retrying in %.1f s", msg.key, err, delay)
                sleep(delay)
                continue
            if after_send is not None:
                after_send(msg)  # tests kill the process here: sent, not yet recorded
            ledger.mark_delivered(msg.key, clock())
            report.delivered.append(msg.key)
            break
    return report
