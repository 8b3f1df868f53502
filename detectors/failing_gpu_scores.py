"""How well the health detectors warned of failing GPUs, against the simulator's `failing_gpu`
truth: recall, the share warned at least an hour ahead, the median lead time and false alarms
per 1,000 GPU-days, for each early-warning source and for all of them together.

An alarm is a health finding that says a GPU is failing (critical) or will fail (predicted): a
warning-only event report (one GSP XID in a day) is no alarm. Scored separately:

- `gpu_health_rules`: the event and counter rules (XIDs, double-bit ECC, row remaps);
- `gpu_health_trend`: the trend rule (detectors/rules/health_trend.py), which needs no history;
- `failing_gpu_model`: the trained model, where the site has failures of its own;
- `health_detectors`: every health rule together, what a site without a model gets;
- `health_detectors_and_model`: those and the model, what a site with one gets.
"""

from __future__ import annotations

import polars as pl

from detectors.evaluation import GPU_HEALTH_RULES, Score, score_gpu_detector

__all__ = ["FAILURE_GOAL", "TREND_RULES", "failure_goal_met", "score_failing_gpus"]

TREND_RULES = ("gpu_health_trend",)
MODEL = "failing_gpu_model"
FAILURE_GOAL = "recall >= 0.9, >= 70 % warned >= 1 h ahead, <= 1 false alarm per 1,000 GPU-days"
_GOAL_DETECTORS = ("gpu_health_trend", "health_detectors", "health_detectors_and_model")


def _alarms(findings: pl.DataFrame) -> pl.DataFrame:
    """The findings that call a GPU failing or about to fail; a model's are timed by detection."""
    alarm = (pl.col("severity") == "critical") | pl.col("predicted").fill_null(False)
    return findings.filter(alarm).with_columns(
        pl.when(pl.col("detector") == MODEL)
        .then(pl.col("detected_ts"))
        .otherwise(pl.coalesce("start_ts", "detected_ts"))
        .alias("start_ts")
    )


def score_failing_gpus(
    findings: pl.DataFrame,
    truth: pl.DataFrame,
    allocations: pl.DataFrame,
    gpu_days: float,
) -> list[Score]:
    """One `Score` per early-warning source (see the module docstring) for one seed."""
    alarms = _alarms(findings)
    rules = (*GPU_HEALTH_RULES, *TREND_RULES)
    plan: list[tuple[str, tuple[str, ...], str, str]] = [
        ("gpu_health_rules", GPU_HEALTH_RULES, "rule", "recall >= 0.9 and precision >= 0.8"),
        ("gpu_health_trend", TREND_RULES, "rule", FAILURE_GOAL),
        (
            MODEL,
            (MODEL,),
            "model",
            "warned >= 1 h ahead for >= 70 % at <= 1 false alarm per 1,000 GPU-days",
        ),
        ("health_detectors", rules, "rule", FAILURE_GOAL),
        ("health_detectors_and_model", (*rules, MODEL), "rule", FAILURE_GOAL),
    ]
    return [
        score_gpu_detector(
            alarms, truth, allocations, gpu_days, detectors, kind=kind, name=name, goal=goal
        )
        for name, detectors, kind, goal in plan
    ]


def failure_goal_met(score: Score) -> bool | None:
    """Whether a failing-GPU early-warning score meets the issue's bar (None: it has none)."""
    if score.detector not in _GOAL_DETECTORS:
        return None
    recall, ahead = score.recall, score.recall_lead_1h
    fa = score.false_alarms_per_1000_gpu_days
    if recall is None or ahead is None or fa is None:
        return False
    return recall >= 0.9 and ahead >= 0.7 and fa <= 1.0
