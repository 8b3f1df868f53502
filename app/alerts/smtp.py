"""Email over SMTP (STARTTLS or implicit TLS, + AUTH): compose a multipart text/HTML message
and hand it over.

Reusable beyond alerts (the weekly report mails with it): `SmtpSettings.from_alerts(cfg)` and
`SmtpSender(settings).send(compose_email(...))`. Failures become `DeliveryError` saying whether
a retry may help, as SMTP defines it (RFC 5321: 4xx transient, 5xx permanent), and whether it
concerns the whole session (login, sender, relay, DATA: every message would meet it) or only
this message's recipients; the password is never put in an error or log line, nor sent over
a connection without TLS unless `allow_plaintext_auth` says so.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate
from pathlib import Path

from app.alerts.errors import DeliveryError
from app.alerts.settings import AlertsConfig
from app.config import Secret

__all__ = ["IDEMPOTENCY_HEADER", "SmtpSender", "SmtpSettings", "compose_email"]

IDEMPOTENCY_HEADER = "X-Gpuledger-Idempotency-Key"
# RFC 5321 §4.5.3.2: a client waits up to 10 minutes for the answer to a message's end
REPLY_TIMEOUT_S = 600.0
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SmtpSettings:
    """How to reach the SMTP server."""

    host: str
    port: int
    sender: str
    user: str | None = None
    password: Secret | None = None
    starttls: bool = False
    ca_file: Path | None = None
    timeout_s: float = 30.0
    implicit_tls: bool = False  # SMTPS: TLS from the first byte (port 465)
    allow_plaintext_auth: bool = False  # send the password even without TLS (local relay)

    @property
    def encrypted(self) -> bool:
        """Whether the session is encrypted before AUTH (STARTTLS or implicit TLS)."""
        return self.starttls or self.implicit_tls

    @classmethod
    def from_alerts(cls, cfg: AlertsConfig) -> SmtpSettings:
        """The SMTP part of the `[alerts]` section."""
        return cls(
            host=cfg.smtp_host,
            port=cfg.smtp_port,
            sender=cfg.email_from,
            user=cfg.smtp_user,
            password=cfg.smtp_password,
            starttls=cfg.smtp_encryption == "starttls",
            implicit_tls=cfg.smtp_encryption == "implicit",
            ca_file=cfg.smtp_ca_file,
            timeout_s=cfg.smtp_timeout_s,
            allow_plaintext_auth=cfg.smtp_allow_plaintext_auth,
        )


def compose_email(
    *,
    sender: str,
    to: Sequence[str],
    subject: str,
    text: str,
    html: str | None = None,
    idempotency_key: str | None = None,
    cc: Sequence[str] = (),
    domain: str = "gpuledger",
    attachments: Sequence[tuple[str, bytes, str]] = (),
    reply_to: str | None = None,
) -> EmailMessage:
    """A multipart/alternative message (plain text first, then HTML), plus attachments.

    With an idempotency key, the Message-ID is `<key@domain>` and the key is also sent as the
    `X-Gpuledger-Idempotency-Key` header, so a receiver can drop a repeat of the same message.
    `attachments` are (filename, bytes, MIME type) triples, e.g. a report's PDF.
    """
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    if cc:
        msg["Cc"] = ", ".join(cc)
    if reply_to:
        msg["Reply-To"] = reply_to
    msg["Subject"] = subject
    msg["Date"] = formatdate(usegmt=True)
    if idempotency_key:
        msg["Message-ID"] = f"<{idempotency_key}@{domain}>"
        msg[IDEMPOTENCY_HEADER] = idempotency_key
    msg.set_content(text)
    if html is not None:
        msg.add_alternative(html, subtype="html")
    for filename, data, mime in attachments:
        maintype, _, subtype = mime.partition("/")
        msg.add_attachment(
            data, maintype=maintype, subtype=subtype or "octet-stream", filename=filename
        )
    return msg


class SmtpSender:
    """Sends messages over SMTP: inside `session()` one connection carries every message of a
    run (opened at the first, closed at the end, dropped and reopened after a failure);
    outside it, one connection per message."""

    def __init__(
        self, settings: SmtpSettings, connect: Callable[..., smtplib.SMTP] | None = None
    ) -> None:
        self.settings = settings
        self._connect = connect
        self._in_session = False
        self._smtp: smtplib.SMTP | None = None

    def _tls_context(self) -> ssl.SSLContext:
        ca = self.settings.ca_file
        return ssl.create_default_context(cafile=str(ca) if ca else None)

    @contextmanager
    def session(self) -> Iterator[None]:
        """Reuse one connection for every `send` inside this block (one per run)."""
        self._in_session = True
        try:
            yield
        finally:
            self._in_session = False
            self._drop(quit=True)

    def _drop(self, quit: bool = False) -> None:
        smtp, self._smtp = self._smtp, None
        if smtp is None:
            return
        try:
            if quit:
                smtp.quit()
            else:
                smtp.close()
        except (OSError, smtplib.SMTPException):
            smtp.close()

    def _connection(self, s: SmtpSettings) -> smtplib.SMTP:
        if self._connect is not None:
            return self._connect(s.host, s.port, timeout=s.timeout_s)
        if s.implicit_tls:
            return smtplib.SMTP_SSL(
                s.host, s.port, timeout=s.timeout_s, context=self._tls_context()
            )
        return smtplib.SMTP(s.host, s.port, timeout=s.timeout_s)

    def _open(self, where: str) -> smtplib.SMTP:
        s = self.settings
        smtp = self._connection(s)
        try:
            if s.starttls and not s.implicit_tls:
                smtp.starttls(context=self._tls_context())
            if s.user:
                if s.password is None:
                    raise DeliveryError(f"{where}: smtp_user is set but no smtp_password")
                smtp.login(s.user, s.password.reveal())
        except BaseException:
            smtp.close()
            raise
        # connected: the server's answers may take as long as RFC 5321 allows (10 minutes for
        # the one to a message's end). A relay slower than smtp_timeout_s to store a message
        # got it again at once, five times a run, as if it had never arrived.
        sock = getattr(smtp, "sock", None)
        if sock is not None:
            sock.settimeout(max(s.timeout_s, REPLY_TIMEOUT_S))
        return smtp

    def send(self, message: EmailMessage) -> None:
        """Deliver `message` to its To/Cc recipients; raise DeliveryError on failure."""
        s = self.settings
        where = f"SMTP {s.host}:{s.port}"
        if s.user and s.password is not None and not s.encrypted and not s.allow_plaintext_auth:
            raise DeliveryError(
                f"{where}: refusing to send the SMTP password without TLS; set smtp_starttls "
                'or smtp_tls = "implicit" (or smtp_allow_plaintext_auth for a local relay)',
                permanent=True,
                channel_wide=True,
            )
        try:
            if self._in_session:
                try:
                    if self._smtp is None:
                        self._smtp = self._open(where)
                    refused = self._smtp.send_message(message)
                except BaseException:
                    self._drop()  # the next message starts a fresh connection
                    raise
            else:
                with self._open(where) as smtp:
                    refused = smtp.send_message(message)
        except smtplib.SMTPAuthenticationError as exc:
            raise DeliveryError(
                f"{where}: login as {s.user!r} refused ({exc.smtp_code})",
                permanent=True,
                channel_wide=True,
            ) from None
        except smtplib.SMTPRecipientsRefused as exc:
            codes = sorted({code for code, _ in exc.recipients.values()})
            raise DeliveryError(
                f"{where}: every recipient refused ({', '.join(map(str, codes))})",
                permanent=all(code >= 500 for code in codes),
            ) from None
        except smtplib.SMTPResponseException as exc:
            # MAIL FROM, DATA, a relay denied: the session, not this recipient
            raise DeliveryError(
                f"{where}: server answered {exc.smtp_code}",
                permanent=exc.smtp_code >= 500,
                channel_wide=True,
            ) from None
        except smtplib.SMTPNotSupportedError:
            raise DeliveryError(
                f"{where}: the server offers no STARTTLS or AUTH", permanent=True, channel_wide=True
            ) from None
        except ssl.SSLError as exc:
            raise DeliveryError(
                f"{where}: TLS failed ({exc.reason})", permanent=True, channel_wide=True
            ) from None
        except (OSError, smtplib.SMTPException) as exc:
            # connection refused, timeouts, dropped connections: the server may come back
            raise DeliveryError(f"{where}: {type(exc).__name__}: {exc}") from None
        if refused:
            logger.warning("%s: refused recipients %s", where, ", ".join(sorted(refused)))
