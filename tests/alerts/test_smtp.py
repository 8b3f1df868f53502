"""The SMTP sender against a real aiosmtpd server on 127.0.0.1."""

from __future__ import annotations

import logging

import pytest

from app.alerts.errors import DeliveryError
from app.alerts.smtp import SmtpSender, SmtpSettings, compose_email
from app.config import Secret

from .conftest import SMTP_PASSWORD, SMTP_USER, free_port


def message(key: str = "k1"):
    return compose_email(
        sender="gpuledger@example.org",
        to=["alice@example.org"],
        cc=["boss@example.org"],
        subject="Job 42 is idle",
        text="plain body",
        html="<p>html body</p>",
        idempotency_key=key,
    )


def test_starttls_and_auth_deliver_both_parts(smtp_tls_server, tls_dir, caplog):
    caplog.set_level(logging.DEBUG)
    settings = SmtpSettings(
        host="127.0.0.1",
        port=smtp_tls_server.port,
        sender="gpuledger@example.org",
        user=SMTP_USER,
        password=Secret(SMTP_PASSWORD, "test"),
        starttls=True,
        ca_file=tls_dir / "cert.pem",
    )
    SmtpSender(settings).send(message())
    [got] = smtp_tls_server.received
    assert smtp_tls_server.handler.authenticated == [SMTP_USER]
    assert sorted(got.rcpt_tos) == ["alice@example.org", "boss@example.org"]
    assert got.message["Subject"] == "Job 42 is idle"
    assert got.message["Message-ID"] == "<k1@gpuledger>"
    assert got.part("plain").strip() == "plain body"
    assert got.part("html").strip() == "<p>html body</p>"
    assert SMTP_PASSWORD not in caplog.text


def test_wrong_password_is_permanent_and_not_echoed(smtp_tls_server, tls_dir):
    settings = SmtpSettings(
        host="127.0.0.1",
        port=smtp_tls_server.port,
        sender="g@x",
        user=SMTP_USER,
        password=Secret("wrong-pw-123"),
        starttls=True,
        ca_file=tls_dir / "cert.pem",
    )
    with pytest.raises(DeliveryError) as err:
        SmtpSender(settings).send(message())
    assert err.value.permanent
    assert "wrong-pw-123" not in str(err.value)
    assert smtp_tls_server.received == []


def test_untrusted_certificate_is_refused(smtp_tls_server):
    settings = SmtpSettings(
        host="127.0.0.1", port=smtp_tls_server.port, sender="g@x", starttls=True
    )
    with pytest.raises(DeliveryError, match="TLS failed") as err:
        SmtpSender(settings).send(message())
    assert err.value.permanent


def test_server_down_is_transient():
    settings = SmtpSettings(host="127.0.0.1", port=free_port(), sender="g@x", timeout_s=2)
    with pytest.raises(DeliveryError, match="ConnectionRefusedError") as err:
        SmtpSender(settings).send(message())
    assert not err.value.permanent


def test_attachments_travel_with_both_parts(smtp_server):
    msg = compose_email(
        sender="g@example.org",
        to=["ops@example.org"],
        subject="Weekly report",
        text="see attached",
        html="<p>see attached</p>",
        attachments=[("report.pdf", b"%PDF-1.7 fake", "application/pdf")],
    )
    SmtpSender(SmtpSettings(host="127.0.0.1", port=smtp_server.port, sender="g@x")).send(msg)
    [got] = smtp_server.received
    assert got.part("plain").strip() == "see attached"
    [pdf] = list(got.message.iter_attachments())
    assert pdf.get_filename() == "report.pdf" and pdf.get_content() == b"%PDF-1.7 fake"


def plain_auth_settings(port: int, **kw: object) -> SmtpSettings:
    return SmtpSettings(
        host="127.0.0.1",
        port=port,
        sender="g@x",
        user=SMTP_USER,
        password=Secret(SMTP_PASSWORD, "test"),
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.live
def test_a_password_is_not_sent_without_tls(smtp_plain_auth_server):
    with pytest.raises(
        DeliveryError, match="refusing to send the SMTP password without TLS"
    ) as err:
        SmtpSender(plain_auth_settings(smtp_plain_auth_server.port)).send(message())
    assert err.value.permanent and err.value.channel_wide
    assert SMTP_PASSWORD not in str(err.value)
    assert smtp_plain_auth_server.handler.authenticated == []
    assert smtp_plain_auth_server.received == []


@pytest.mark.live
def test_plaintext_auth_only_when_the_configuration_allows_it(smtp_plain_auth_server):
    settings = plain_auth_settings(smtp_plain_auth_server.port, allow_plaintext_auth=True)
    SmtpSender(settings).send(message())
    assert smtp_plain_auth_server.handler.authenticated == [SMTP_USER]
    assert len(smtp_plain_auth_server.received) == 1


@pytest.mark.live
def test_implicit_tls_smtps_delivers_with_auth(smtps_server, tls_dir):
    settings = plain_auth_settings(
        smtps_server.port, implicit_tls=True, ca_file=tls_dir / "cert.pem"
    )
    SmtpSender(settings).send(message())
    assert smtps_server.handler.authenticated == [SMTP_USER]
    [got] = smtps_server.received
    assert got.message["Subject"] == "Job 42 is idle"


@pytest.mark.live
def test_implicit_tls_verifies_the_certificate(smtps_server):
    settings = plain_auth_settings(smtps_server.port, implicit_tls=True)
    with pytest.raises(DeliveryError, match="TLS failed"):
        SmtpSender(settings).send(message())
    assert smtps_server.handler.authenticated == []
