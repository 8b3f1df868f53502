"""§7 of the weekly report: what each gain counts, nodes to drain never left out, readable
evidence, and a note for the recommendations that did not fit."""

from __future__ import annotations

import datetime as dt
import json
import re

import polars as pl
import pytest

from app.report.data import ReportSettings, assemble_report
from app.report.html import MAX_RECOMMENDATIONS
from app.report.outputs import write_report
from app.report.recs import evidence_figures, gain_text, pick
from app.report.week import IsoWeek
from tests.marts.rows import CLUSTER, T0, at, land
from tests.report.lake import build_fairness_lake

pytestmark = pytest.mark.slow

NOW = T0 + dt.timedelta(days=10)
WEEK = IsoWeek(2024, 9)
# the data replayed: 7 days, over W09
WINDOW = {"replayed_from": at(-4 * 86400).isoformat(), "replayed_until": at(3 * 86400).isoformat()}


def rec(rec_id: str, kind: str, gain: float | None, evidence: dict[str, object], scope: str):
    return {
        "cluster": CLUSTER,
        "rec_id": rec_id,
        "kind": kind,
        "scope": scope,
        "target": "slurm",
        "evidence": json.dumps(evidence | WINDOW, sort_keys=True),
        "expected_gain_gpu_h": gain,
        "risk": "some",
        "config": "# config",
        "created_ts": NOW + dt.timedelta(days=20),
    }


TIME_LIMIT = {
    "default_time_s": 81900,
    "gain_is": "GPU-hours of reservation released to backfill",
    "gain_kind": "backfill",
    "jobs": 550,
    "jobs_over_new_limit": 42,
    "max_time_s": 259200,
    "released_gpu_h": 7153.25,
    "runtime_p50_s": 15440.894,
    "time_limit_median_s": 36000.0,
}
DRAIN = {
    "cluster_failure_rate": 0.361072,
    "critical_findings": 1,
    "failed_gpu_h": 4.5,
    "failed_jobs": 5,
    "hw_event_kinds": "offline, xid 79",
    "hw_events": 2,
    "jobs": 13,
    "node_failure_rate": 0.384615,
}


def recommendations():
    """14 recommendations: the drain has the smallest gain, the time limit the largest (but
    reserved time released, not saved); one idle-cancel policy saves GPU-hours; eleven caps
    (no gain_kind stored: from before it was recorded) and a fair-share change (no gain)."""
    rows = [
        rec("t1", "time_limit", 7153.25, TIME_LIMIT, "partition=gpu"),
        rec("d1", "drain_node", 4.5, DRAIN | {"gain_kind": "failures_avoided"}, "node=gpu-022"),
        rec("i1", "idle_cancel_policy", 100.0, {"gain_kind": "saved"}, "cluster"),
        rec("f1", "fairshare_weight", None, {"flagged": ["bio"]}, "cluster"),
    ]
    rows += [
        rec(f"c{k:02d}", "gpu_cap", 200.0 + k, {"cap_gpus": 64, "peak_gpus": 100}, f"user=u{k}")
        for k in range(10)
    ]
    return rows


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("lake")
    land(root, "recommendations", recommendations())
    con = build_fairness_lake(root, recommendations=False)
    return assemble_report(con, CLUSTER, WEEK, ReportSettings(), NOW)


@pytest.fixture(scope="module")
def html(report, tmp_path_factory):
    files = write_report(report, tmp_path_factory.mktemp("out"), pdf=False)
    return files


def text_of(page: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", page).split())


def test_drains_first_then_savings_then_other_gains(report):
    recs = report.tables["recommendations"]
    order = recs.get_column("rec_id").to_list()
    caps = [f"c{k:02d}" for k in range(9, -1, -1)]
    assert order == ["d1", "i1", "t1", *caps, "f1"]
    kinds = dict(zip(order, recs.get_column("gain_kind").to_list(), strict=True))
    assert kinds["t1"] == "backfill" and kinds["i1"] == "saved"
    assert kinds["c00"] == "shifted"  # inferred from the kind when the evidence lacks it
    assert kinds["f1"] is None


def test_the_backfill_gain_is_labelled_for_what_it_is(html):
    text = text_of(html.html.read_text(encoding="utf-8"))
    assert "7,153.2 reserved GPU-h released to backfill in the 7.0 days of data replayed" in text
    assert "100.0 GPU-h saved in the 7.0 days" in text
    assert "expected gain" not in text
    assert "Evidence replayed over 26 Feb 2024 – 04 Mar 2024" in text


def test_evidence_is_a_short_readable_list_and_the_csv_keeps_the_json(html):
    text = text_of(html.html.read_text(encoding="utf-8"))
    assert '{"default_time_s"' not in text and "&#34;default_time_s" not in text
    assert "new DefaultTime 22:45:00" in text
    assert "median run 4.3 h" in text
    assert "2 hardware events (offline, xid 79)" in text
    csv = pl.read_csv(html.folder / "tables" / "recommendations.csv")
    [raw] = csv.filter(pl.col("rec_id") == "t1").get_column("evidence").to_list()
    assert json.loads(raw)["default_time_s"] == 81900


def test_what_did_not_fit_is_named_and_no_drain_is_left_out(html):
    page = html.html.read_text(encoding="utf-8")
    text = text_of(page)
    assert MAX_RECOMMENDATIONS == 12
    assert "2 more in recommendations.csv" in text
    assert "node=gpu-022" in text
    assert "fairshare_weight" not in text  # the last two: the fair-share change and c00
    assert "user=u0 " not in text and "user=u1 " in text


def test_pick_keeps_every_drain_even_past_the_limit():
    frame = pl.DataFrame(
        {
            "rec_id": ["d1", "d2", "d3", "s1", "s2"],
            "kind": ["drain_node"] * 3 + ["idle_cancel_policy", "gpu_cap"],
        }
    )
    rows, more = pick(frame, 2)
    assert [r["rec_id"] for r in rows] == ["d1", "d2", "d3"] and more == 2
    rows, more = pick(frame, 4)
    assert [r["rec_id"] for r in rows] == ["d1", "d2", "d3", "s1"] and more == 1


def test_figures_and_gain_text_for_odd_evidence():
    assert evidence_figures("time_limit", "not json") == []
    assert evidence_figures("unknown_kind", '{"kwh_saved": 40.0, "nested": {"a": 1}}') == [
        "kWh saved 40.0"
    ]
    assert gain_text(12.5, "saved", None, None) == "12.5 GPU-h saved"
    assert gain_text(None, None, None, None) is None


def test_figures_put_a_count_and_its_noun_in_the_same_number():
    assert evidence_figures("gpu_cap", '{"cap_gpus": 1, "peak_gpus": 3}') == [
        "cap 1 GPU",  # not "1 GPUs"
        "peak held 3 GPUs",
    ]
    drain = '{"hw_events": 1, "hw_event_kinds": "xid 79", "failed_jobs": 1, "jobs": 1}'
    assert evidence_figures("drain_node", drain) == [
        "1 hardware event (xid 79)",
        "1 of 1 job failed",
    ]
