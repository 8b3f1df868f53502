"""Write a rendered report to disk: the HTML page, its PDF, and every table as CSV and Parquet."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.errors import AppError
from app.files_out import write_csv, write_parquet
from app.report.data import WeeklyReport
from app.report.html import data_uris, render_charts, render_html
from app.report.pdf import print_pdf
from warehouse.layout import safe_name

__all__ = ["ReportFiles", "write_report"]


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """Where one cluster's report for one week was written."""

    folder: Path
    html: Path
    pdf: Path | None
    tables: list[Path]
    charts: dict[str, bytes]


def write_report(
    report: WeeklyReport, out: Path, *, pdf: bool = True, browser: str | None = None
) -> ReportFiles:
    """Write `<out>/<cluster>/<week>/` (replacing a previous run's files of the same names).

    `<cluster>` is the cluster's cleaned folder name (as in the lake: `gpu farm` → `gpu_farm`),
    never the raw value, which comes from the data and could hold `/` or `..`.
    """
    cluster = safe_name(report.cluster)
    folder = out / cluster / safe_name(report.week.label)
    tables_dir = folder / "tables"
    try:
        tables_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AppError(
            f"cannot create the report folder {str(tables_dir)!r} ({exc.strerror or exc}); "
            f"expected --out {str(out)!r} to be a folder this user can write to"
        ) from exc
    charts = render_charts(report)
    stem = f"fairness-{cluster}-{safe_name(report.week.label)}"
    html = folder / f"{stem}.html"
    html.write_text(render_html(report, data_uris(charts)), encoding="utf-8")
    written: list[Path] = []
    for name, frame in report.tables.items():
        csv = tables_dir / f"{name}.csv"
        parquet = tables_dir / f"{name}.parquet"
        write_csv(frame, csv)
        write_parquet(frame, parquet)
        written += [csv, parquet]
    pdf_path = print_pdf(html, folder / f"{stem}.pdf", browser) if pdf else None
    return ReportFiles(folder, html, pdf_path, written, charts)
