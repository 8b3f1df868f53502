"""Finding ids are stable and the lake keeps one row per finding, whatever runs again."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl

from detectors.findings import (
    FRAME_SCHEMA,
    finding_id,
    read_findings,
    to_findings,
    write_findings,
)
from tests.detectors.rules.lake import at
from warehouse.lake import Lake


def frame(rows):
    return pl.DataFrame(
        [{c: row.get(c) for c in FRAME_SCHEMA} for row in rows], schema=FRAME_SCHEMA
    )


def row(subject, gpu_h, cluster="della", anchor_s=0.0):
    return {
        "cluster": cluster,
        "detector": "idle_job",
        "severity": "warn",
        "subject_kind": "job",
        "subject_id": subject,
        "anchor_ts": at(anchor_s),
        "gpu_h_at_stake": gpu_h,
        "message": f"job {subject}",
        "evidence": "{}",
    }


def test_the_id_is_a_function_of_cluster_detector_subject_and_anchor_only():
    base = finding_id("a", "idle_job", "job", "1", at(0))
    assert base == finding_id("a", "idle_job", "job", "1", at(0))
    others = {
        finding_id("b", "idle_job", "job", "1", at(0)),
        finding_id("a", "hung_job", "job", "1", at(0)),
        finding_id("a", "idle_job", "user", "1", at(0)),
        finding_id("a", "idle_job", "job", "2", at(0)),
        finding_id("a", "idle_job", "job", "1", at(1)),
    }
    assert base not in others and len(others) == 5


def test_writing_twice_keeps_one_row_per_finding_and_the_first_detection_time(tmp_path):
    first = to_findings(frame([row("1", 1.0), row("2", 2.0)]), detected_ts=at(3600))
    assert write_findings(Lake.at(tmp_path), first).new == 2

    again = to_findings(frame([row("2", 5.0), row("3", 3.0)]), detected_ts=at(7200))
    result = write_findings(Lake.at(tmp_path), again)

    assert (result.new, result.updated, result.unchanged) == (1, 1, 0)
    stored = {r["subject_id"]: r for r in read_findings(Lake.at(tmp_path)).to_pylist()}
    assert sorted(stored) == ["1", "2", "3"]
    assert stored["2"]["gpu_h_at_stake"] == 5.0  # the new figures
    assert stored["2"]["detected_ts"] == at(3600)  # first raised at the first run
    assert stored["3"]["detected_ts"] == at(7200)


def test_a_findings_start_on_a_pruned_day_stays_when_it_is_found_again_from_the_days_kept(
    tmp_path,
):
    """After `prune`, detect finds a GPU's trend again from the days kept: its start moved
    past the pruned days (the probe's gpu_health_trend lost 10 hours of lead time). On a day
    not pruned, a later start found again is taken."""
    from tests.marts import rows as r
    from warehouse.partitions import mark_pruned

    lake = Lake.at(tmp_path / "lake")
    r.build_lake(lake.root, samples=r.samples(range(0, 86400 * 2, 3600))).close()
    day0 = r.T0.date()

    def write(subject: str, start: dt.datetime) -> None:
        found = {**row(subject, 1.0, cluster=r.CLUSTER), "start_ts": start}
        write_findings(lake, to_findings(frame([found]), detected_ts=r.at(2 * 86400)))

    write("trend", r.at(3600))  # on day 0, which is pruned below
    write("other", r.at(86400 + 3600))  # on day 1, kept
    mark_pruned(lake.root, (r.CLUSTER, day0), 300)
    write("trend", r.at(86400 + 7200))
    write("other", r.at(86400 + 7200))

    starts = {f["subject_id"]: f["start_ts"] for f in read_findings(lake).to_pylist()}
    assert starts == {"trend": r.at(3600), "other": r.at(86400 + 7200)}


def test_a_finding_found_again_as_stored_counts_as_unchanged(tmp_path):
    first = to_findings(frame([row("1", 1.0), row("2", 2.0)]), detected_ts=at(3600))
    write_findings(Lake.at(tmp_path), first)
    again = to_findings(frame([row("1", 1.0), row("2", 2.5)]), detected_ts=at(7200))
    result = write_findings(Lake.at(tmp_path), again)
    assert (result.new, result.updated, result.unchanged) == (0, 1, 1)


def test_clusters_are_kept_apart(tmp_path):
    write_findings(Lake.at(tmp_path), to_findings(frame([row("1", 1.0, "a")]), at(0)))
    write_findings(Lake.at(tmp_path), to_findings(frame([row("1", 1.0, "b")]), at(0)))
    assert sorted(read_findings(Lake.at(tmp_path)).column("cluster").to_pylist()) == ["a", "b"]
    assert read_findings(Lake.at(tmp_path), "a").num_rows == 1


def test_a_producer_reporting_one_problem_twice_gives_one_row():
    table = to_findings(frame([row("1", 1.0), row("1", 9.0)]), at(0))
    assert table.num_rows == 1
    assert table.column("gpu_h_at_stake").to_pylist() == [1.0]


def test_no_findings_writes_nothing(tmp_path):
    empty = to_findings(pl.DataFrame(schema=FRAME_SCHEMA), at(0))
    assert write_findings(Lake.at(tmp_path), empty).new == 0
    assert read_findings(Lake.at(tmp_path)).num_rows == 0
    assert isinstance(at(0), dt.datetime)


def test_a_finding_whose_producer_left_the_message_null_still_says_what_it_is():
    # a producer's text template turns null when one of its figures is null (pl.format);
    # the stored finding must still read as something on the dashboards and in alerts
    rows = [row("1", 1.0), {**row("2", 2.0), "message": None}]
    table = to_findings(frame(rows), at(0))
    messages = dict(zip(table["subject_id"].to_pylist(), table["message"].to_pylist(), strict=True))
    assert messages["1"] == rows[0]["message"]
    assert messages["2"] == "idle_job finding on job 2"


def test_a_parallel_sums_last_bits_are_no_change_even_across_a_rounding_boundary(tmp_path):
    # the two values of one idle job's mean power fraction in two runs on the bench lake: 12
    # significant digits split them (-3.4404063735e-06 against -3.44040637349e-06)
    stored, found = -3.440406373495001e-06, -3.440406373494999e-06
    first = [
        row("1", 1.0) | {"evidence": json.dumps({"power_frac_mean": stored, "spans": 1})},
        row("2", 2.0 + 1e-15),
        row("3", 3.0) | {"evidence": json.dumps({"x": [0.5, None]})},
        row("4", 4.0) | {"evidence": json.dumps({"jobs": 1_000_000_000})},
    ]
    write_findings(Lake.at(tmp_path), to_findings(frame(first), detected_ts=at(3600)))
    again = [
        row("1", 1.0) | {"evidence": json.dumps({"power_frac_mean": found, "spans": 1})},
        row("2", 2.0),
        row("3", 3.0) | {"evidence": json.dumps({"x": [0.5 + 1e-3, None]})},  # a real change
        row("4", 4.0) | {"evidence": json.dumps({"jobs": 1_000_000_001})},  # counts: exact
    ]
    result = write_findings(Lake.at(tmp_path), to_findings(frame(again), detected_ts=at(7200)))
    assert (result.new, result.updated, result.unchanged) == (0, 2, 2)
