"""Print the report's HTML to PDF with headless Chromium (the Debian `chromium` package).

The browser is a seam: `print_pdf(html_path, pdf_path, browser=...)` takes the program to run,
so tests and sites with another Chromium build (`chromium-browser`, `google-chrome`) can pass it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from app.errors import AppError

__all__ = ["BROWSERS", "find_browser", "print_pdf"]

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PRINT_TIMEOUT_S = 120.0


def find_browser() -> str:
    """The first headless-capable Chromium on PATH; AppError saying how to install one."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    raise AppError(
        "no Chromium found on PATH to print the PDF (tried "
        + ", ".join(BROWSERS)
        + "); install it (Debian: apt-get install chromium) or use --no-pdf"
    )


def print_pdf(html_path: Path, pdf_path: Path, browser: str | None = None) -> Path:
    """Render `html_path` to `pdf_path` (A4, no header/footer); return `pdf_path`.

    Runs with its own throw-away profile and no network use beyond the local file.
    """
    program = browser or find_browser()
    with tempfile.TemporaryDirectory(prefix="gpuledger-chromium-") as profile:
        argv = [
            program,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            f"--user-data-dir={profile}",
            "--no-pdf-header-footer",
            "--run-all-compositor-stages-before-draw",
            f"--print-to-pdf={pdf_path}",
            html_path.resolve().as_uri(),
        ]
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=PRINT_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise AppError(
                f"{program} did not print the PDF within {PRINT_TIMEOUT_S:g} s"
            ) from None
        except OSError as exc:
            raise AppError(f"could not run {program!r}: {exc}") from None
    if done.returncode != 0 or not pdf_path.is_file() or pdf_path.stat().st_size == 0:
        lines = [ln for ln in (done.stderr or "").splitlines() if ln.strip()]
        detail = lines[-1] if lines else f"exit {done.returncode}"
        raise AppError(f"{program} could not print {html_path.name} to PDF: {detail}")
    return pdf_path
