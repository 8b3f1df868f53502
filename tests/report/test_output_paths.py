"""The weekly report's output path is built from the cluster's cleaned name, never the raw value
(#22 LOW 11): a cluster named with `/` or `..` cannot write outside --out."""

from __future__ import annotations

import dataclasses
import datetime as dt

from app.report.data import ReportSettings, assemble_report
from app.report.outputs import write_report
from app.report.week import IsoWeek
from tests.marts.rows import T0
from tests.report.lake import fairness_lake

NOW = T0 + dt.timedelta(days=10)


def test_a_cluster_name_with_slashes_and_dots_stays_inside_out(tmp_path, tmp_path_factory):
    con = fairness_lake(tmp_path_factory, tmp_path / "lake")
    report = assemble_report(con, "della", IsoWeek(2024, 2), ReportSettings(), NOW)
    hostile = dataclasses.replace(report, cluster="../../escaped/gpu farm")
    out = tmp_path / "deep" / "out"
    files = write_report(hostile, out, pdf=False)
    assert files.folder == out / "escaped_gpu_farm" / "2024-W02"
    assert files.html.name == "fairness-escaped_gpu_farm-2024-W02.html"
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "deep" / "escaped").exists()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "lake" not in p.parts]
    assert written and all(out in p.parents for p in written)
