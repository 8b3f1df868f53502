"""Email the report: a multipart message with the HTML body, its charts inline (cid:), the PDF
attached, and a plain-text summary for clients that show no HTML. Sent with smtplib.

The SMTP settings are a small frozen type the command line fills from its options or the
`GPULEDGER_ALERTS_*` environment (DESIGN §7); `send` takes a connection factory as a seam.
"""

from __future__ import annotations

import smtplib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import make_msgid

from app.errors import AppError
from app.report.data import WeeklyReport
from app.report.html import render_html
from app.report.outputs import ReportFiles

__all__ = ["SmtpSettings", "build_message", "send"]


@dataclass(frozen=True, slots=True)
class SmtpSettings:
    host: str
    port: int = 25
    sender: str = "gpuledger@localhost"
    user: str | None = None
    password: str | None = None
    starttls: bool = False
    timeout_s: float = 30.0


def _summary(report: WeeklyReport) -> str:
    s = report.scalars
    if not report.has_data:
        return (
            f"No GPU jobs ran or waited on {report.cluster} in week {report.week.label}; "
            "there is nothing to report."
        )
    jain = s.get("jain_index")
    return (
        f"GPU fairness report for {report.cluster}, week {report.week.label}\n\n"
        f"GPU-hours allocated: {s['alloc_gpu_h']:.1f}\n"
        f"GPU-hours wasted: {s['waste_gpu_h']:.1f}\n"
        f"Jain's index over {s['accounts_with_demand']} account(s) with demand: "
        f"{'n/a' if jain is None else f'{jain:.3f}'}\n"
        f"Jobs queued at week end: {s['jobs_pending_at_end']}\n\n"
        "The full report is in the HTML part and the attached PDF."
    )


def build_message(
    report: WeeklyReport, files: ReportFiles, sender: str, recipients: Sequence[str]
) -> EmailMessage:
    """The message: text summary, HTML with inline charts, PDF attachment (when printed)."""
    message = EmailMessage()
    message["Subject"] = f"GPU fairness report — {report.cluster} — {report.week.label}"
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    message.set_content(_summary(report))
    cids = {name: make_msgid(domain="gpuledger.local") for name in files.charts}
    html = render_html(report, {name: f"cid:{cid[1:-1]}" for name, cid in cids.items()})
    message.add_alternative(html, subtype="html")
    html_part = message.get_body(preferencelist=("html",))
    assert isinstance(html_part, EmailMessage)
    for name, png in files.charts.items():
        html_part.add_related(png, maintype="image", subtype="png", cid=cids[name])
    if files.pdf is not None:
        message.add_attachment(
            files.pdf.read_bytes(),
            maintype="application",
            subtype="pdf",
            filename=files.pdf.name,
        )
    return message


def _open(host: str, port: int, timeout_s: float) -> smtplib.SMTP:
    return smtplib.SMTP(host, port, timeout=timeout_s)


def send(
    message: EmailMessage,
    settings: SmtpSettings,
    connect: Callable[[str, int, float], smtplib.SMTP] | None = None,
) -> None:
    """Deliver `message`; AppError naming the server when it cannot."""
    try:
        opened = (connect or _open)(settings.host, settings.port, settings.timeout_s)
        with opened as smtp:
            if settings.starttls:
                smtp.starttls()
            if settings.user:
                smtp.login(settings.user, settings.password or "")
            smtp.send_message(message)
    except (OSError, smtplib.SMTPException) as exc:
        raise AppError(
            f"could not send the report through {settings.host}:{settings.port}: {exc}"
        ) from None
