"""The rendered report: self-contained HTML, a PDF that is not blank, every table as files,
a clear page for an empty week, and the email with its charts inline."""

from __future__ import annotations

import datetime as dt
import re
import socket
import threading
from email import message_from_bytes, policy
from email.message import EmailMessage

import polars as pl
import pypdfium2
import pytest
from aiosmtpd.controller import Controller

from app.alerts.smtp import SmtpSender, SmtpSettings
from app.report.data import ReportSettings, assemble_report
from app.report.mail import build_message
from app.report.outputs import write_report
from app.report.week import IsoWeek
from tests.infra.live import live_service
from tests.marts.rows import T0
from tests.report.lake import fairness_lake

pytestmark = pytest.mark.slow

NOW = T0 + dt.timedelta(days=10)
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)
CSS_URL = re.compile(r"url\(\s*['\"]?\s*(?:https?:)?//", re.IGNORECASE)
IMPORT = re.compile(r"@import", re.IGNORECASE)


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    return fairness_lake(tmp_path_factory)


@pytest.fixture(scope="module")
def written(con, tmp_path_factory):
    """The report's HTML, charts and tables (no PDF: that needs Chromium, see `written_pdf`)."""
    settings = ReportSettings(cost_per_gpu_h=2.5, cost_per_kwh=0.12)
    report = assemble_report(con, "della", IsoWeek(2024, 9), settings, NOW)
    return report, write_report(report, tmp_path_factory.mktemp("out"), pdf=False)


@pytest.fixture(scope="module")
@live_service
def written_pdf(written, tmp_path_factory):
    """The same report printed to PDF by the real headless Chromium."""
    report, _ = written
    return report, write_report(report, tmp_path_factory.mktemp("out-pdf"))


def test_html_is_self_contained(written):
    _, files = written
    html = files.html.read_text(encoding="utf-8")
    assert not EXTERNAL.search(html), EXTERNAL.search(html)
    assert not CSS_URL.search(html)
    assert not IMPORT.search(html)
    images = re.findall(r"<img[^>]+src=\"([^\"]+)\"", html)
    assert len(images) == 4  # usage, waits, waste trend, cluster frame
    assert all(src.startswith("data:image/png;base64,") for src in images)
    assert "<link" not in html and "<script" not in html


def test_html_shows_the_hand_computed_numbers(written):
    _, files = written
    html = files.html.read_text(encoding="utf-8")
    expected = ["GPU fairness report — della", "2024-W09", "physics", "0.900", "60.0 %"]
    expected += ["75.0 %", "40.0", "$1", "idle_cancel_policy", "power_cap_candidate"]
    expected += ["Training throughput", '<td class="n">1,000</td>', "0.6 %"]  # j1's MFU
    for text in expected:
        assert text in html, text
    assert "built-in method" not in html and "bound method" not in html
    words = re.sub(r"<[^>]+>", " ", html).lower().split()
    assert "none" not in words and "nan" not in words and "null" not in words


@pytest.mark.live
def test_pdf_renders_and_is_not_blank(written_pdf):
    _, files = written_pdf
    assert files.pdf is not None
    pdf = pypdfium2.PdfDocument(str(files.pdf))
    try:
        assert len(pdf) >= 2
        page = pdf[0]
        image = page.render(scale=0.5).to_pil().convert("L")
        histogram = image.histogram()
        dark = sum(histogram[:128]) / sum(histogram)
        # Text, tables and charts: some ink, but mostly paper.
        assert 0.005 < dark < 0.5, dark
        text = page.get_textpage().get_text_range()
        assert "GPU fairness report" in text
    finally:
        pdf.close()


def test_every_table_is_written_as_csv_and_parquet(written):
    report, files = written
    names = {p.name for p in files.tables}
    for table, frame in report.tables.items():
        assert f"{table}.csv" in names and f"{table}.parquet" in names
        back = pl.read_parquet(files.folder / "tables" / f"{table}.parquet")
        assert back.height == frame.height and back.columns == frame.columns
    accounts = pl.read_csv(files.folder / "tables" / "accounts.csv")
    assert set(accounts.get_column("account")) == {"physics", "bio"}


def test_a_week_without_data_renders_a_page_that_says_so(con, tmp_path):
    report = assemble_report(con, "della", IsoWeek(2024, 2), ReportSettings(), NOW)
    files = write_report(report, tmp_path, pdf=False)
    html = files.html.read_text(encoding="utf-8")
    assert "No GPU jobs ran on della in week 2024-W02" in html
    assert "The lake has data for della in 2024-W09 to 2024-W10" in " ".join(html.split())
    assert "<img" not in html
    assert files.pdf is None
    assert (files.folder / "tables" / "accounts.csv").exists()


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_first_week_with_data_has_no_week_over_week_change(written):
    # W09 is the lake's first week: W08 is unknown, so no "+0.5 on last week" in red.
    _, files = written
    text = text_of(files.html.read_text(encoding="utf-8"))
    assert "+0.5" not in text and "+0.4" not in text
    assert "The lake has no data for 2024-W08" in text
    assert "over the 1 week with data among the last 4" in text
    assert "no data for 2024-W08 to compare" in text  # the waste headline, instead of +0.5


def test_recommendations_are_shown_by_the_evidence_they_cover(written):
    _, files = written
    text = text_of(files.html.read_text(encoding="utf-8"))
    assert "gpu_cap" in text  # r4: made 30 days later, evidence covers the week
    assert "Evidence replayed over 20 Feb 2024 – 31 Mar 2024" in text
    assert "made 2024-03-31" in text


def test_why_there_are_no_recommendations(con, tmp_path_factory):
    import dataclasses

    from app.report.html import render_html

    bare = fairness_lake(tmp_path_factory, recommendations=False)
    report = assemble_report(bare, "della", IsoWeek(2024, 9), ReportSettings(), NOW)
    text = text_of(render_html(report, {}))
    assert "No recommendations stored for della: `gpuledger detect` has not run" in text
    stored = dataclasses.replace(report, scalars={**report.scalars, "recommendations_stored": 5})
    stored.scalars["recommendations_made_last"] = T0 + dt.timedelta(days=30)
    text = text_of(render_html(stored, {}))
    assert "None of the 5 recommendations stored for della covers 2024-W09" in text
    assert "latest made 2024-03-31" in text
    assert "has not run" not in text


def test_equal_shares_are_said_before_the_headlines_and_in_the_email_text(tmp_path_factory):
    from app.report.html import render_html
    from app.report.mail import _summary

    bare = fairness_lake(tmp_path_factory, associations=False)
    report = assemble_report(bare, "della", IsoWeek(2024, 9), ReportSettings(), NOW)
    text = text_of(render_html(report, {}))
    note = "No entitlements known: every account with usage or demand is given an equal share"
    assert text.count(note) == 1
    assert text.index(note) < text.index("1. Usage vs entitlement")
    if report.headlines:
        assert text.index(note) < text.index(report.headlines[0])
    assert note in _summary(report)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Inbox:
    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.done = threading.Event()

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        self.messages.append(envelope.original_content or envelope.content)
        self.done.set()
        return "250 OK"


@pytest.mark.live
def test_email_is_multipart_with_inline_charts_and_the_pdf(written_pdf):
    report, files = written_pdf
    inbox = Inbox()
    port = free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        message = build_message(report, files, "gpuledger@test", ["lead@test", "ops@test"])
        SmtpSender(SmtpSettings("127.0.0.1", port, "gpuledger@test")).send(message)
        assert inbox.done.wait(10)
    finally:
        controller.stop()
    got = message_from_bytes(inbox.messages[0], _class=EmailMessage, policy=policy.default)
    assert got["To"] == "lead@test, ops@test"
    assert "2024-W09" in got["Subject"]
    html_part = got.get_body(preferencelist=("html",))
    html = html_part.get_content()
    cids = set(re.findall(r'src="cid:([^"]+)"', html))
    inline = {
        p["Content-ID"].strip("<>") for p in got.walk() if p.get_content_type() == "image/png"
    }
    assert len(cids) == 4 and cids == inline
    assert "data:image" not in html  # inline parts, not base64 in the body
    [pdf] = [p for p in got.iter_attachments() if p.get_content_type() == "application/pdf"]
    assert pdf.get_content()[:5] == b"%PDF-"
    assert "Jain's index" in got.get_body(preferencelist=("plain",)).get_content()


def test_an_unreachable_mail_server_is_one_clear_error(written):
    from app.errors import AppError

    report, files = written
    message = build_message(report, files, "a@test", ["b@test"])
    with pytest.raises(AppError, match="SMTP 127.0.0.1:1"):
        SmtpSender(SmtpSettings("127.0.0.1", 1, "a@test", timeout_s=2)).send(message)
