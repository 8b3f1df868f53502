"""Slack delivery: `chat.postMessage` through slack_sdk's Web API client, and incoming webhooks.

The idempotency key travels in the message `metadata` (`event_payload.idempotency_key`) for the
Web API and as `gpuledger_key` in webhook bodies, so a receiver can drop repeats. HTTP 429
(with `Retry-After`) and 5xx are transient `DeliveryError`s; Slack's `ok: false` errors such as
`channel_not_found` or `invalid_auth` are permanent. The token and the webhook URL (itself a
credential) never reach a log line: slack_sdk's debug logging is switched off for these clients.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.webhook import WebhookClient

from app.alerts.errors import DeliveryError
from app.config import Secret

__all__ = ["METADATA_EVENT", "SlackSender", "WebhookSender"]

METADATA_EVENT = "gpuledger_alert"
TIMEOUT_S = 30
# slack_sdk logs request URLs at DEBUG; a webhook URL is a credential
_quiet_logger = logging.getLogger("app.alerts.slack.sdk")
_quiet_logger.setLevel(logging.WARNING)


def _retry_after(headers: Any) -> float | None:
    if not headers:
        return None
    for name, value in dict(headers).items():
        if str(name).lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                seconds = float(raw)
            except (TypeError, ValueError):
                return None  # (an HTTP date, or nothing: the run's own backoff)
            return max(seconds, 0.0) if math.isfinite(seconds) else None
    return None


# Slack errors about the token or workspace, not the message: a fixed token delivers it later
_CHANNEL_WIDE = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)


def _classify(status: int, error: str, headers: Any, where: str) -> DeliveryError:
    if status == 429:
        return DeliveryError(
            f"{where}: rate limited (HTTP 429)", retry_after_s=_retry_after(headers)
        )
    if status >= 500:
        return DeliveryError(f"{where}: server error (HTTP {status})")
    return DeliveryError(
        f"{where}: {error or f'HTTP {status}'}",
        permanent=True,
        channel_wide=error in _CHANNEL_WIDE or status in (401, 403),
    )


class SlackSender:
    """Posts Block Kit messages with `chat.postMessage` (DMs: the channel is the user's ID)."""

    def __init__(self, token: Secret, api_url: str) -> None:
        base = api_url if api_url.endswith("/") else api_url + "/"
        self._client = WebClient(
            token=token.reveal(), base_url=base, timeout=TIMEOUT_S, logger=_quiet_logger
        )
        self._client.retry_handlers = []  # retries belong to the ledger's loop (and backoff)

    def send(self, channel: str, text: str, blocks: list[dict[str, Any]], key: str) -> None:
        """Post one message; raise DeliveryError on failure."""
        where = f"Slack chat.postMessage to {channel}"
        try:
            self._client.chat_postMessage(
                channel=channel,
                text=text,
                blocks=blocks,
                metadata={"event_type": METADATA_EVENT, "event_payload": {"idempotency_key": key}},
                unfurl_links=False,
            )
        except SlackApiError as exc:
            response = exc.response
            data = response.data if isinstance(response.data, dict) else {}
            raise _classify(
                response.status_code, str(data.get("error", "")), response.headers, where
            ) from None
        except (SlackClientError, OSError) as exc:
            raise DeliveryError(f"{where}: {type(exc).__name__}: {exc}") from None


class WebhookSender:
    """Posts digests to an incoming webhook."""

    def __init__(self, url: Secret) -> None:
        self._client = WebhookClient(url.reveal(), timeout=TIMEOUT_S, logger=_quiet_logger)
        self._client.retry_handlers = []

    def send(self, text: str, blocks: list[dict[str, Any]], key: str) -> None:
        """Post one message; raise DeliveryError on failure (the URL is never in the text)."""
        where = "Slack incoming webhook"
        try:
            response = self._client.send_dict(
                {"text": text, "blocks": blocks, "gpuledger_key": key, "unfurl_links": False}
            )
        except (SlackClientError, OSError) as exc:
            raise DeliveryError(f"{where}: {type(exc).__name__}") from None
        except UnicodeError as exc:  # this message, not the channel
            raise DeliveryError(f"{where}: {type(exc).__name__}", permanent=True) from None
        except ValueError as exc:  # a URL urllib cannot open: never printed, it is a secret
            raise DeliveryError(
                f"{where}: the URL is not one to post to ({type(exc).__name__})",
                permanent=True,
                channel_wide=True,
            ) from None
        if response.status_code != 200:
            raise _classify(response.status_code, response.body, response.headers, where)
