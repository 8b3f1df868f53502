"""Score the job waste detectors together, as issue #27 asks: job-level precision and recall
(a job flagged by any waste detector against any waste label), recall per waste kind, the share
of waste jobs whose finding names the right detector, false alarms per 1,000 GPU-days, and how
many healthy services (bursty inference, resting part of the time) were flagged as waste.

Pure functions over polars frames; `WasteScore.combine` pools seeds by adding counts.
`WasteScore.as_score` gives the one `Score` row (`waste_jobs`) the evaluation table and
`evaluation_scores` hold, its per-kind figures in `extra` (the `detail` column).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from detectors.evaluation import Score

__all__ = ["SERVICE_WORKLOAD", "WASTE_DETECTOR", "WasteScore", "score_waste", "waste_goal_met"]

# truth label -> the job detector that describes it
WASTE_DETECTOR: dict[str, str] = {
    "idle": "idle_job",
    "memory_hold": "memory_hold",
    "hung": "hung_job",
    "partial_idle": "partial_idle",
    "overallocated": "overallocated",
}
SERVICE_WORKLOAD = "workload:inference"  # healthy services; bursty in the hard setting
GOAL = (
    "job precision and recall >= 0.95, every kind's recall >= 0.9, the right detector for "
    ">= 0.9, no healthy service flagged"
)


@dataclass(frozen=True, slots=True)
class WasteScore:
    """Counts over one or more seeds (they add up)."""

    truth_jobs: int = 0  # jobs with a waste label long enough to count for recall
    flagged_jobs: int = 0  # jobs with a waste finding
    right_jobs: int = 0  # ... that have a waste label (any span)
    found_jobs: int = 0  # truth jobs with a waste finding
    right_detector: int = 0  # truth jobs whose finding is the detector of one of their labels
    services: int = 0  # healthy service jobs (SERVICE_WORKLOAD)
    services_flagged: int = 0  # ... with a waste finding
    gpu_days: float = 0.0
    kinds: dict[str, tuple[int, int]] = field(default_factory=dict)  # label -> (truth, found)

    def combine(self, other: WasteScore) -> WasteScore:
        kinds = {
            k: (
                self.kinds.get(k, (0, 0))[0] + other.kinds.get(k, (0, 0))[0],
                self.kinds.get(k, (0, 0))[1] + other.kinds.get(k, (0, 0))[1],
            )
            for k in dict.fromkeys([*self.kinds, *other.kinds])
        }
        return WasteScore(
            truth_jobs=self.truth_jobs + other.truth_jobs,
            flagged_jobs=self.flagged_jobs + other.flagged_jobs,
            right_jobs=self.right_jobs + other.right_jobs,
            found_jobs=self.found_jobs + other.found_jobs,
            right_detector=self.right_detector + other.right_detector,
            services=self.services + other.services,
            services_flagged=self.services_flagged + other.services_flagged,
            gpu_days=self.gpu_days + other.gpu_days,
            kinds=kinds,
        )

    @property
    def false_alarms(self) -> int:
        return self.flagged_jobs - self.right_jobs

    @property
    def right_detector_rate(self) -> float | None:
        return self.right_detector / self.found_jobs if self.found_jobs else None

    def kind_recall(self, label: str) -> float | None:
        truth, found = self.kinds.get(label, (0, 0))
        return found / truth if truth else None

    def as_score(self) -> Score:
        """The `waste_jobs` row: job-level counts, per-kind recall and rates in `extra`."""
        extra: dict[str, float | None] = {
            f"recall_{label}": self.kind_recall(label) for label in WASTE_DETECTOR
        }
        extra |= {
            f"truth_{label}": float(self.kinds.get(label, (0, 0))[0]) for label in WASTE_DETECTOR
        }
        extra["right_detector_rate"] = self.right_detector_rate
        extra["services"] = float(self.services)
        extra["services_flagged"] = float(self.services_flagged)
        return Score(
            detector="waste_jobs",
            label="waste",
            kind="rule",
            subjects=self.truth_jobs,
            flagged=self.flagged_jobs,
            true_positives=self.right_jobs,
            found=self.found_jobs,
            false_alarms=self.false_alarms,
            gpu_days=self.gpu_days,
            goal=GOAL,
            extra=extra,
        )


def score_waste(
    findings: pl.DataFrame,
    truth: pl.DataFrame,
    gpu_days: float,
    min_truth_s: dict[str, float] | None = None,
) -> WasteScore:
    """Score the job waste findings (`findings` columns) against `truth` (`sim_truth`).

    `min_truth_s` (label -> seconds): a shorter truth span does not count against recall (no
    rule with that minimum duration can see it) but a finding on it is still right.
    """
    minimum = min_truth_s or {}
    waste = findings.filter(
        (pl.col("subject_kind") == "job") & pl.col("detector").is_in(list(WASTE_DETECTOR.values()))
    )
    flagged: dict[str, set[str]] = {}
    for job, detector in waste.select("subject_id", "detector").iter_rows():
        flagged.setdefault(job, set()).add(detector)
    jobs = truth.filter(pl.col("subject_kind") == "job")
    spans = jobs.filter(pl.col("label").is_in(list(WASTE_DETECTOR))).with_columns(
        ((pl.col("end_ts") - pl.col("start_ts")).dt.total_milliseconds() / 1000).alias("span_s")
    )
    labelled: dict[str, set[str]] = {}
    counted: dict[str, set[str]] = {}
    for job, label, span_s in spans.select("subject_id", "label", "span_s").iter_rows():
        labelled.setdefault(job, set()).add(label)
        if span_s is not None and span_s >= minimum.get(label, 0.0):
            counted.setdefault(job, set()).add(label)
    kinds = {
        label: (
            sum(1 for ls in counted.values() if label in ls),
            sum(1 for j, ls in counted.items() if label in ls and j in flagged),
        )
        for label in WASTE_DETECTOR
    }
    found = [j for j in counted if j in flagged]
    right_detector = sum(
        1 for j in found if flagged[j] & {WASTE_DETECTOR[label] for label in counted[j]}
    )
    services = set(jobs.filter(pl.col("label") == SERVICE_WORKLOAD)["subject_id"].to_list())
    return WasteScore(
        truth_jobs=len(counted),
        flagged_jobs=len(flagged),
        right_jobs=sum(1 for j in flagged if j in labelled),
        found_jobs=len(found),
        right_detector=right_detector,
        services=len(services),
        services_flagged=len(services & set(flagged)),
        gpu_days=gpu_days,
        kinds=kinds,
    )


def waste_goal_met(score: Score) -> bool | None:
    """Whether a `waste_jobs` row meets issue #27's acceptance bars (None: not that row)."""
    if score.detector != "waste_jobs":
        return None
    p, r, e = score.precision, score.recall, score.extra
    kinds = [e.get(f"recall_{label}") for label in WASTE_DETECTOR]
    right = e.get("right_detector_rate")
    return (
        p is not None
        and r is not None
        and p >= 0.95
        and r >= 0.95
        and all(k is None or k >= 0.9 for k in kinds)
        and right is not None
        and right >= 0.9
        and not e.get("services_flagged")
    )
