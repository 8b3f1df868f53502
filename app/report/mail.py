"""Email the report: a multipart message with the HTML body, its charts inline (cid:), the PDF
attached, and a plain-text summary for clients that show no HTML.

Delivery is the alerts' SMTP sender (`app.alerts.smtp.SmtpSender`, configured by the
`[alerts]` section: smtp_host, smtp_port, STARTTLS, AUTH, email_from); this module only builds
the message, because the report needs related (inline) images the alerts' plain composer lacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from app.report.data import WeeklyReport
from app.report.html import render_html
from app.report.outputs import ReportFiles
from detectors.wording import counted

__all__ = ["build_message"]


def _summary(report: WeeklyReport) -> str:
    s = report.scalars
    if not report.has_data:
        queued = s.get("pending_job_h") or 0.0
        waited = (
            f" Yet jobs waited in the queue: {queued:,.0f} job-hours (was the cluster down or "
            "full?)."
            if queued
            else ""
        )
        return (
            f"No GPU jobs ran on {report.cluster} in week {report.week.label}; there is "
            f"nothing to compare against entitlements.{waited} The lake has data for "
            f"{report.cluster} in {report.data_weeks.span}."
        )
    jain = s.get("jain_index")
    lines = [
        f"GPU fairness report for {report.cluster}, week {report.week.label}",
        "",
        f"GPU-hours allocated by the scheduler: {s['alloc_gpu_h']:.1f}",
        "GPU-hours wasted: "
        + (
            "unknown (no GPU telemetry)"
            if s.get("waste_gpu_h") is None
            else f"{s['waste_gpu_h']:.1f}"
        ),
        f"Jain's index over {counted(s['jain_accounts'], 'account')} with demand: "
        + ("n/a" if jain is None else f"{jain:.3f}"),
        f"Jobs queued at {s['queue_at']}: {s['jobs_pending_at_end']}",
        "",
        *(f"Note: {note}" for note in report.notes),
        *(f"- {line}" for line in report.headlines),
        "",
        "The full report is in the HTML part and the attached PDF.",
    ]
    return "\n".join(lines)


def build_message(
    report: WeeklyReport, files: ReportFiles, sender: str, recipients: Sequence[str]
) -> EmailMessage:
    """The message: text summary, HTML with inline charts, PDF attachment (when printed)."""
    message = EmailMessage()
    message["Subject"] = f"GPU fairness report — {report.cluster} — {report.week.label}"
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    message["Date"] = formatdate(usegmt=True)
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
