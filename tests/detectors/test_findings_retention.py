"""Findings' retention: a finding whose problem ended more than findings_days before the end of
its cluster's data goes; an open one, a recent one, another cluster's stay."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from detectors.findings import FINDINGS_SCHEMA, prune_findings, read_findings, write_findings
from warehouse.lake import Lake

END = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def finding(cluster: str, finding_id: str, end: dt.datetime | None) -> dict[str, object]:
    row = {name: None for name in FINDINGS_SCHEMA.names}
    return row | {
        "cluster": cluster,
        "finding_id": finding_id,
        "detector": "idle_job",
        "severity": "warn",
        "subject_kind": "job",
        "subject_id": finding_id,
        "start_ts": END - dt.timedelta(days=500),
        "end_ts": end,
        "detected_ts": END - dt.timedelta(days=500),
    }


def test_only_findings_ended_long_before_the_data_end_go(tmp_path):
    lake = Lake.at(tmp_path / "lake")
    rows = [
        finding("a", "old", END - dt.timedelta(days=40)),
        finding("a", "recent", END - dt.timedelta(days=10)),
        finding("a", "open", None),
        finding("b", "old-elsewhere", END - dt.timedelta(days=40)),  # b has no data end
    ]
    write_findings(lake, pa.Table.from_pylist(rows, FINDINGS_SCHEMA))
    ends = {"a": END}

    assert prune_findings(lake, ends, 30, dry_run=True) == 1
    assert read_findings(lake).num_rows == 4

    assert prune_findings(lake, ends, 30) == 1
    left = sorted(read_findings(lake).column("finding_id").to_pylist())
    assert left == ["old-elsewhere", "open", "recent"]
    assert prune_findings(lake, ends, 30) == 0
