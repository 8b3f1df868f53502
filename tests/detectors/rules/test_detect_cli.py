"""`gpuledger detect` end to end on a small simulated lake: findings land once, ids stay."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from detectors.findings import read_findings
from detectors.rules import DETECTORS
from warehouse.connection import connect
from warehouse.lake import Lake


def invoke(*args: str) -> Result:
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
    return runner.invoke(cli, list(args))


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("detect") / "lake"
    for args in (("simulate", "--gpus", "16", "--days", "1", "--quiet"), ("attribute", "--quiet")):
        result = invoke(*args, "--lake", str(root))
        assert result.exit_code == 0, result.output
    return root


@pytest.mark.slow
def test_detect_twice_stores_each_finding_once_and_keeps_ids(lake: Path) -> None:
    first = invoke("detect", "--lake", str(lake), "--now", "2026-12-01T00:00")
    assert first.exit_code == 0, first.output
    stored = read_findings(Lake.at(lake))
    n = stored.num_rows
    assert n > 0
    assert f"{n:,} findings: {n:,} new, 0 updated" in first.output
    assert "detector" in first.output.splitlines()[0]
    assert set(stored.column("detector").to_pylist()) <= set(DETECTORS) | {"bottleneck"}

    second = invoke("detect", "--lake", str(lake), "--now", "2026-12-02T00:00")
    assert second.exit_code == 0, second.output
    assert f"{n:,} findings: 0 new, " in second.output
    # the same run again: every finding is found as stored, none reported as updated
    third = invoke("detect", "--lake", str(lake), "--now", "2026-12-02T00:00")
    assert f"{n:,} findings: 0 new, 0 updated, {n:,} unchanged" in third.output
    again = read_findings(Lake.at(lake))
    assert sorted(again.column("finding_id").to_pylist()) == sorted(
        stored.column("finding_id").to_pylist()
    )
    # first detection time kept; the view over the lake holds no duplicate either
    assert set(again.column("detected_ts").to_pylist()) == set(
        stored.column("detected_ts").to_pylist()
    )
    con = connect(lake)
    [(total, distinct)] = con.sql(
        "SELECT count(*), count(DISTINCT cluster || finding_id) FROM findings"
    ).fetchall()
    assert total == distinct == n


@pytest.mark.slow
def test_detect_since_a_later_time_looks_at_less(lake: Path) -> None:
    result = invoke("detect", "--lake", str(lake), "--since", "2026-11-02T20:00", "-q")
    assert result.exit_code == 0, result.output
    assert len(result.output.strip().splitlines()) == 1


def _as_told(findings: pa.Table) -> list[tuple[object, ...]]:
    """What users and alerts see of each finding (a parallel sum's last bits aside)."""
    return [
        (f["finding_id"], f["severity"], f["message"], f["end_ts"], f["detected_ts"])
        + (round(f["gpu_h_at_stake"] or 0.0, 9), f["score"])
        for f in findings.to_pylist()
    ]


@pytest.mark.slow
def test_detect_since_stores_again_what_the_whole_data_shows(lake: Path) -> None:
    # H3: --since must not rewrite a finding under its id with the figures of a shorter window
    # (a job's "1.28 h of 1.28 h observed — its whole run", a user's "7 days" of one day)
    now = "2026-12-02T00:00"
    whole = invoke("detect", "--lake", str(lake), "--now", now, "-q")
    assert whole.exit_code == 0, whole.output
    stored = read_findings(Lake.at(lake)).sort_by("finding_id")
    before = _as_told(stored)
    for since in ("2026-11-02T16:00", "2026-11-02T20:00"):
        later = invoke("detect", "--lake", str(lake), "--now", now, "--since", since, "-q")
        assert later.exit_code == 0, later.output
        # it looks again at the findings seen since then (open, or ending then or later) ...
        end = stored.column("end_ts")
        cut = pa.scalar(dt.datetime.fromisoformat(since).replace(tzinfo=dt.UTC), end.type)
        seen = pc.sum(pc.or_kleene(pc.is_null(end), pc.greater_equal(end, cut))).as_py()
        assert 0 < seen < stored.num_rows
        # ... and finds each exactly as the whole data did: nothing new, nothing rewritten
        assert f"{seen:,} findings: 0 new, 0 updated, {seen:,} unchanged" in later.output
        assert _as_told(read_findings(Lake.at(lake)).sort_by("finding_id")) == before


def test_seen_since_keeps_open_findings_and_those_ending_from_then_on() -> None:
    import polars as pl

    from detectors.findings import FRAME_SCHEMA, seen_since, to_findings

    t = dt.datetime(2026, 11, 2, 12, tzinfo=dt.UTC)
    rows = []
    for job, end in (("ended", t - dt.timedelta(seconds=1)), ("at", t), ("open", None)):
        row = {c: None for c in FRAME_SCHEMA}
        row.update(cluster="c", detector="idle_job", severity="warn", subject_kind="job")
        row.update(subject_id=job, message="idle")
        row.update(anchor_ts=t - dt.timedelta(hours=5), end_ts=end)
        rows.append(row)
    found = to_findings(pl.DataFrame(rows, schema=FRAME_SCHEMA), t)
    assert seen_since(found, t).column("subject_id").to_pylist() == ["at", "open"]


def test_detect_on_an_empty_lake_says_to_build_the_marts(tmp_path: Path) -> None:
    result = invoke("detect", "--lake", str(tmp_path / "nothing"))
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "gpuledger attribute" in errors[0]
    assert "Traceback" not in result.output


def test_a_lake_of_telemetry_alone_gets_its_hardware_findings(tmp_path: Path) -> None:
    """No scheduler collected yet: attribute builds the sample buckets and no job_usage row,
    and detect stopped with "no data for 'job_usage'" beside an XID 79 in the lake."""
    from tests.marts import rows as r

    r.land(tmp_path, "gpu_samples", r.samples(range(0, 3600, 30), engine_active=0.5))
    r.land(tmp_path, "gpu_events", [r.event(600, "xid", 79)])
    assert invoke("attribute", "--lake", str(tmp_path), "-q").exit_code == 0
    unbuilt = invoke("detect", "--lake", str(tmp_path / "not-attributed"))

    result = invoke("detect", "--lake", str(tmp_path))

    assert result.exit_code == 0, result.output
    found = read_findings(Lake.at(tmp_path)).to_pylist()
    assert [(f["detector"], f["severity"]) for f in found if f["detector"] == "xid_hardware"] == [
        ("xid_hardware", "critical")
    ]
    assert unbuilt.exit_code == 1 and "gpuledger attribute" in unbuilt.output


def test_a_scheduler_record_landing_after_the_samples_makes_no_second_finding(
    tmp_path: Path,
) -> None:
    """The exporter's label mapped job j1's GPU from its first scrape (30 s); its record, landed
    after, starts at 0. A finding's id hashes the job's start: the idle_job found before the
    record was stored again beside the one found with it."""
    from tests.marts import rows as r

    busy = r.samples(range(30, 3600, 30), job_id="j1", engine_active=0.6)
    idle = r.samples(range(3600, 10800, 30), job_id="j1", engine_active=0.0)
    r.land(tmp_path, "gpu_samples", busy + idle)
    mapped = r.job_gpu("j1", 30, 10800) | {"mapping": "exporter-label"}
    r.land(tmp_path, "job_gpus", [mapped])
    for step in ("attribute", "detect"):
        assert invoke(step, "--lake", str(tmp_path)).exit_code == 0
    r.land(tmp_path, "jobs", [r.job("j1", 0, 10800)], batch_id="late")
    for step in ("attribute", "detect"):
        assert invoke(step, "--lake", str(tmp_path)).exit_code == 0

    idle_jobs = [
        (f["subject_id"], f["user"])
        for f in read_findings(Lake.at(tmp_path)).to_pylist()
        if f["detector"] == "idle_job"
    ]
    assert idle_jobs == [("j1", "alice")]


def test_detect_since_after_now_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke(
        "detect", "--lake", str(tmp_path), "--since", "2026-02-01", "--now", "2026-01-01"
    )
    assert result.exit_code == 2
    assert "must be before --now" in result.output


def test_detect_help_names_every_detector() -> None:
    result = invoke("detect", "--help")
    assert result.exit_code == 0
    for name in (
        "idle_job",
        "hung_job",
        "partial_idle",
        "stranded_gpus",
        "xid_hardware",
        "--since",
    ):
        assert name in result.output


@pytest.mark.slow
def test_a_second_producer_is_merged_and_a_malformed_one_refused(
    lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import polars as pl
    import pyarrow as pa

    from app.pipeline import round as detect
    from detectors.findings import FRAME_SCHEMA, to_findings
    from detectors.rules.base import EPOCH

    def model(con, now, since):
        row = {c: None for c in FRAME_SCHEMA}
        row.update(
            cluster="sim",
            detector="early_waste",
            severity="warn",
            subject_kind="job",
            subject_id="1000",
            anchor_ts=EPOCH,
            predicted=True,
            message="likely idle",
        )
        return to_findings(pl.DataFrame([row], schema=FRAME_SCHEMA), now)

    monkeypatch.setattr(detect, "FINDING_PRODUCERS", [*detect.FINDING_PRODUCERS, model])
    result = invoke("detect", "--lake", str(lake), "-q")
    assert result.exit_code == 0, result.output
    stored = read_findings(Lake.at(lake)).to_pylist()
    assert [f["predicted"] for f in stored if f["detector"] == "early_waste"] == [True]

    monkeypatch.setattr(detect, "FINDING_PRODUCERS", [lambda con, now, since: pa.table({"x": [1]})])
    bad = invoke("detect", "--lake", str(lake), "-q")
    assert bad.exit_code == 1
    assert "unknown column(s) ['x']" in bad.output and "Traceback" not in bad.output
