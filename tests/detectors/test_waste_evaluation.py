"""The job waste detectors scored together (issue #27's figures) on hand-made truth."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from detectors.evaluation import goal_met
from detectors.waste_evaluation import WasteScore, score_waste

T0 = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)


def truth(rows: list[tuple[str, str, float]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "subject_kind": ["job"] * len(rows),
            "subject_id": [r[0] for r in rows],
            "label": [r[1] for r in rows],
            "start_ts": [T0] * len(rows),
            "end_ts": [T0 + dt.timedelta(hours=r[2]) for r in rows],
        }
    )


def findings(rows: list[tuple[str, str]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "subject_kind": ["job"] * len(rows),
            "subject_id": [r[0] for r in rows],
            "detector": [r[1] for r in rows],
        },
        schema={"subject_kind": pl.String, "subject_id": pl.String, "detector": pl.String},
    )


TRUTH = truth(
    [
        ("1", "idle", 3.0),
        ("2", "idle", 2.0),
        ("3", "overallocated", 5.0),
        ("4", "hung", 0.2),  # too short to count against recall
        ("5", "workload:inference", 9.0),
        ("6", "workload:inference", 9.0),
        ("7", "workload:finetune", 4.0),
    ]
)


def test_job_level_kind_and_detector_figures():
    found = findings(
        [
            ("1", "idle_job"),
            ("2", "overallocated"),  # found, but named wrong
            ("4", "hung_job"),  # right, though not counted for recall
            ("5", "memory_hold"),  # a healthy service flagged
            ("7", "time_limit_excess"),  # not a waste detector: ignored
        ]
    )
    s = score_waste(found, TRUTH, gpu_days=500.0, min_truth_s={"hung": 1800.0})
    assert (s.truth_jobs, s.flagged_jobs, s.right_jobs, s.found_jobs) == (3, 4, 3, 2)
    assert s.kinds["idle"] == (2, 2) and s.kinds["overallocated"] == (1, 0)
    assert s.kinds["hung"] == (0, 0) and s.kind_recall("hung") is None
    assert s.right_detector == 1 and s.right_detector_rate == pytest.approx(0.5)
    assert (s.services, s.services_flagged) == (2, 1)
    row = s.as_score()
    assert row.detector == "waste_jobs"
    assert row.precision == pytest.approx(3 / 4) and row.recall == pytest.approx(2 / 3)
    assert row.false_alarms_per_1000_gpu_days == pytest.approx(2.0)
    assert row.extra["recall_overallocated"] == 0.0
    assert goal_met(row, [row]) is False


def test_seeds_pool_by_adding_counts_and_a_clean_run_meets_the_goal():
    found = findings([("1", "idle_job"), ("2", "idle_job"), ("3", "overallocated")])
    one = score_waste(found, TRUTH, gpu_days=100.0, min_truth_s={"hung": 1800.0})
    both = one.combine(one)
    assert both.truth_jobs == 6 and both.kinds["idle"] == (4, 4) and both.gpu_days == 200.0
    assert goal_met(both.as_score(), []) is True
    assert WasteScore().combine(one) == one
