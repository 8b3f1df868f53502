"""Delivery errors: whether a failed send may be retried, and after how long."""

from __future__ import annotations

from app.errors import AppError

__all__ = ["DeliveryError", "FindingsUnavailable", "RoutingError"]


class DeliveryError(AppError):
    """A message could not be handed over.

    `permanent` errors (recipient refused, bad credentials, invalid channel) are not retried
    in this run; transient ones (connection refused, SMTP 4xx, HTTP 429/5xx) are, after
    `retry_after_s` when the server said so (Slack's Retry-After), else with backoff.
    """

    def __init__(
        self, message: str, *, permanent: bool = False, retry_after_s: float | None = None
    ):
        super().__init__(message)
        self.permanent = permanent
        self.retry_after_s = retry_after_s


class RoutingError(AppError):
    """The directory file is unusable (names the file, line and field)."""


class FindingsUnavailable(AppError):
    """The findings could not be read this time (e.g. a file replaced during the read)."""
