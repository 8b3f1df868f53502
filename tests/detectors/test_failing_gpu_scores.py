"""Failing-GPU early warning scored by hand: which findings are alarms, how the rules, the trend
rule and the model are timed, and the issue's bar (recall, warned an hour ahead, false alarms)."""

from __future__ import annotations

import polars as pl
import pytest

from detectors.evaluation import Score, goal_met
from detectors.failing_gpu_scores import failure_goal_met, score_failing_gpus
from tests.detectors.test_evaluation import ALLOC, GPU_TRUTH, TS, h


def alarm_rows(rows):
    """rows: (detector, severity, predicted, gpu, start_h, detected_h)."""
    return pl.DataFrame(
        [
            {
                "finding_id": f"f{i}",
                "detector": d,
                "severity": sev,
                "predicted": p,
                "gpu_uuid": g,
                "start_ts": h(a),
                "detected_ts": h(t),
            }
            for i, (d, sev, p, g, a, t) in enumerate(rows)
        ],
        schema={
            "finding_id": pl.String,
            "detector": pl.String,
            "severity": pl.String,
            "predicted": pl.Boolean,
            "gpu_uuid": pl.String,
            "start_ts": TS,
            "detected_ts": TS,
        },
    )


def test_each_source_alone_and_together():
    found = alarm_rows(
        [
            ("gpu_health_trend", "warn", True, "G1", 36, 99),  # 4 h before G1 fails at 40 h
            ("xid_hardware", "critical", False, "G1", 40, 99),  # at the failure
            ("xid_hardware", "critical", False, "G2", 20, 99),  # at G2's failure
            ("failing_gpu_model", "critical", True, "G2", 0, 17),  # model: detected 3 h before
            ("xid_hardware", "warn", False, "G5", 3, 99),  # one GSP XID on a healthy GPU: no alarm
            ("gpu_health_trend", "warn", True, "G6", 3, 99),  # a healthy GPU: false alarm
        ]
    )
    scores = {s.detector: s for s in score_failing_gpus(found, GPU_TRUTH, ALLOC, 1000.0)}
    trend = scores["gpu_health_trend"]
    assert (trend.subjects, trend.found, trend.found_lead_1h, trend.false_alarms) == (2, 1, 1, 1)
    assert trend.leads_h == (4.0,)
    rules = scores["gpu_health_rules"]
    assert (rules.found, rules.found_lead_1h, rules.false_alarms) == (2, 0, 0)
    model = scores["failing_gpu_model"]
    assert (model.found, model.found_lead_1h, model.leads_h) == (1, 1, (3.0,))
    all_rules = scores["health_detectors"]
    assert (all_rules.recall, all_rules.recall_lead_1h) == (1.0, 0.5)
    assert all_rules.false_alarms_per_1000_gpu_days == pytest.approx(1.0)
    both = scores["health_detectors_and_model"]
    assert (both.recall, both.recall_lead_1h, both.false_alarms) == (1.0, 1.0, 1)
    assert sorted(both.leads_h) == [3.0, 4.0]
    assert failure_goal_met(both) is True and goal_met(both, []) is True
    assert failure_goal_met(all_rules) is False  # half warned an hour ahead


@pytest.mark.parametrize(
    ("found", "warned", "false_alarms", "met"),
    [(9, 7, 1, True), (8, 8, 0, False), (10, 6, 0, False), (10, 10, 3, False)],
)
def test_the_bar_is_recall_warned_ahead_and_false_alarms(found, warned, false_alarms, met):
    score = Score(
        "gpu_health_trend",
        "failing_gpu",
        "rule",
        subjects=10,
        found=found,
        found_lead_1h=warned,
        false_alarms=false_alarms,
        gpu_days=1000.0 if false_alarms < 3 else 2000.0,
    )
    assert failure_goal_met(score) is met
    assert failure_goal_met(Score("idle_job", "idle", "rule")) is None
