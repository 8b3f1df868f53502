"""Delivery errors: whether a failed send may be retried, and after how long."""

from __future__ import annotations

from app.errors import AppError

__all__ = ["DeliveryError", "FindingsUnavailable", "RoutingError"]


class DeliveryError(AppError):
    """A message could not be handed over.

    `permanent` errors (SMTP 5xx, Slack `ok: false`) are not retried in this run; transient
    ones (connection refused, SMTP 4xx, HTTP 429/5xx) are, after `retry_after_s` when the
    server said so (Slack's Retry-After), else with backoff. `channel_wide` errors concern the
    channel, not this message (login refused, relay denied, a session the server rejects):
    the rest of the channel's queue waits, and the message is tried again on a later run,
    since an operator can fix the channel. A permanent error that is not channel-wide (this
    recipient refused, this channel unknown) fails the message for good.
    """

    def __init__(
        self,
        message: str,
        *,
        permanent: bool = False,
        retry_after_s: float | None = None,
        channel_wide: bool = False,
    ):
        super().__init__(message)
        self.permanent = permanent
        self.retry_after_s = retry_after_s
        self.channel_wide = channel_wide


class RoutingError(AppError):
    """The directory file is unusable (names the file, line and field)."""


class FindingsUnavailable(AppError):
    """The findings could not be read this time (e.g. a file replaced during the read)."""
