"""Score findings against the simulator's ground truth (`sim_truth`): precision, recall, lead
time, false alarms per 1,000 GPU-days, and GPU-hours a detector would have saved minus those it
would have disrupted.

Pure functions over polars frames, one `Score` per detector (or detector group) and seed;
`Score.combine` pools seeds by adding counts, so pooled precision and recall are ratios of sums.
What "saved" and "disrupted" mean:

- job detectors (idle, partially idle, hung, …): acting when the detector could first fire
  (a rule's finding: its span start + the rule's minimum duration, since a replay stamps every
  rule finding with the run's time; a model's: its detection time) would
  have freed `gpus × (job end − fire time)` of a job that truly had the problem, and would have
  thrown away `gpus × (fire time − job start)` of work of a job that did not;
- GPU-failure detectors: a warning at least `min_lead_h` ahead lets the jobs on the GPU
  checkpoint and move, saving the work they had done since they started; every false alarm
  costs a needless drain of `DRAIN_COST_GPU_H`.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
from dataclasses import dataclass, field, replace

import polars as pl
import pyarrow as pa

from warehouse.schema import TABLES

__all__ = [
    "DRAIN_COST_GPU_H",
    "GPU_HEALTH_RULES",
    "JobTarget",
    "Score",
    "goal_met",
    "score_gpu_detector",
    "score_job_detector",
    "score_node_detector",
    "score_ranking",
    "score_threshold",
    "scores_table",
]

DRAIN_COST_GPU_H = 12.0  # one GPU out for a test-and-return cycle after a false alarm
GPU_HEALTH_RULES = ("xid_hardware", "ecc_dbe", "row_remap_failure", "row_remap_pending")


@dataclass(frozen=True, slots=True)
class JobTarget:
    """A detector scored on subjects (jobs or users) that carry a truth label.

    `min_truth_s`: truth spans shorter than this do not count against recall (no rule with a
    minimum duration can see them) but still count as correct when flagged.
    `fire_delay_s`: from the finding's span start to when the detector could have acted.
    """

    detectors: tuple[str, ...]
    label: str
    subject_kind: str = "job"
    min_truth_s: float = 0.0
    fire_delay_s: float = 0.0
    goal: str = ""


@dataclass(frozen=True, slots=True)
class Score:
    """One detector's figures on one or more seeds (counts add up across seeds)."""

    detector: str
    label: str
    kind: str  # "rule" or "model"
    subjects: int = 0  # truth subjects that count for recall
    flagged: int = 0  # findings (or flagged subjects)
    true_positives: int = 0  # findings that were right
    found: int = 0  # truth subjects found
    found_lead_1h: int = 0  # ... at least an hour before the event (predictions)
    false_alarms: int = 0
    gpu_days: float = 0.0
    gpu_h_saved: float = 0.0
    gpu_h_disrupted: float = 0.0
    leads_h: tuple[float, ...] = ()
    goal: str = ""
    extra: dict[str, float | None] = field(default_factory=dict)

    @property
    def precision(self) -> float | None:
        return self.true_positives / self.flagged if self.flagged else None

    @property
    def recall(self) -> float | None:
        return self.found / self.subjects if self.subjects else None

    @property
    def recall_lead_1h(self) -> float | None:
        return self.found_lead_1h / self.subjects if self.subjects else None

    @property
    def false_alarms_per_1000_gpu_days(self) -> float | None:
        return 1000 * self.false_alarms / self.gpu_days if self.gpu_days else None

    @property
    def lead_h_median(self) -> float | None:
        return statistics.median(self.leads_h) if self.leads_h else None

    def combine(self, other: Score) -> Score:
        """Pool two seeds' scores of the same detector."""
        extra: dict[str, float | None] = {
            k: v for k, v in (self.extra | other.extra).items() if v is not None
        }
        return replace(
            self,
            subjects=self.subjects + other.subjects,
            flagged=self.flagged + other.flagged,
            true_positives=self.true_positives + other.true_positives,
            found=self.found + other.found,
            found_lead_1h=self.found_lead_1h + other.found_lead_1h,
            false_alarms=self.false_alarms + other.false_alarms,
            gpu_days=self.gpu_days + other.gpu_days,
            gpu_h_saved=self.gpu_h_saved + other.gpu_h_saved,
            gpu_h_disrupted=self.gpu_h_disrupted + other.gpu_h_disrupted,
            leads_h=self.leads_h + other.leads_h,
            extra=extra,
        )


def _hours(expr: pl.Expr) -> pl.Expr:
    return expr.dt.total_seconds() / 3600.0


def score_job_detector(
    findings: pl.DataFrame,
    truth: pl.DataFrame,
    jobs: pl.DataFrame,
    target: JobTarget,
    kind: str = "rule",
    name: str | None = None,
) -> Score:
    """Score the findings of `target.detectors` on jobs (or users) against `target.label`.

    `findings` has the `findings` columns, `truth` the `sim_truth` ones, and `jobs` has
    `job_id, gpus, start_ts, end_ts` (for saved / disrupted GPU-hours; users get none).
    A subject flagged several times counts once.
    """
    mine = findings.filter(
        pl.col("detector").is_in(list(target.detectors))
        & (pl.col("subject_kind") == target.subject_kind)
    )
    fire = (
        pl.when(pl.lit(kind == "model"))
        .then(pl.col("detected_ts"))
        .otherwise(
            pl.coalesce("start_ts", "detected_ts") + pl.duration(seconds=target.fire_delay_s)
        )
    )
    flagged = (
        mine.with_columns(fire.alias("fire_ts")).group_by("subject_id").agg(pl.col("fire_ts").min())
    )
    labelled = truth.filter(
        (pl.col("label") == target.label) & (pl.col("subject_kind") == target.subject_kind)
    ).with_columns(_hours(pl.col("end_ts") - pl.col("start_ts")).alias("span_h"))
    all_true = set(labelled["subject_id"].to_list())
    countable = set(
        labelled.filter(pl.col("span_h") * 3600 >= target.min_truth_s)["subject_id"].to_list()
    )
    hits = set(flagged["subject_id"].to_list())
    saved = disrupted = 0.0
    leads: list[float] = []
    if target.subject_kind == "job" and flagged.height:
        joined = flagged.join(
            jobs.select(pl.col("job_id").alias("subject_id"), "gpus", "start_ts", "end_ts"),
            on="subject_id",
            how="left",
        ).with_columns(pl.col("subject_id").is_in(list(all_true)).alias("right"))
        after = _hours(pl.col("end_ts") - pl.col("fire_ts")).clip(lower_bound=0)
        before = _hours(pl.col("fire_ts") - pl.col("start_ts")).clip(lower_bound=0)
        gpus = pl.col("gpus").cast(pl.Float64)
        saved = float(joined.filter(pl.col("right")).select((gpus * after).sum()).item() or 0.0)
        disrupted = float(
            joined.filter(~pl.col("right")).select((gpus * before).sum()).item() or 0.0
        )
        delays = joined.filter(pl.col("right")).join(
            labelled.select("subject_id", pl.col("start_ts").alias("truth_start")),
            on="subject_id",
        )
        leads = [
            float(x)
            for x in delays.select(_hours(pl.col("fire_ts") - pl.col("truth_start")))
            .to_series()
            .drop_nulls()
            .to_list()
        ]
    return Score(
        detector=name or "+".join(target.detectors),
        label=target.label,
        kind=kind,
        subjects=len(countable),
        flagged=len(hits),
        true_positives=len(hits & all_true),
        found=len(hits & countable),
        false_alarms=len(hits - all_true),
        gpu_h_saved=saved,
        gpu_h_disrupted=disrupted,
        leads_h=tuple(leads),  # for jobs: detection delay after the problem began, hours
        goal=target.goal,
    )


def score_gpu_detector(
    findings: pl.DataFrame,
    truth: pl.DataFrame,
    allocations: pl.DataFrame,
    gpu_days: float,
    detectors: tuple[str, ...],
    *,
    kind: str,
    name: str,
    min_lead_h: float = 1.0,
    grace_h: float = 1.0,
    goal: str = "",
) -> Score:
    """Score GPU findings of `detectors` against `failing_gpu` truth spans [degrading, failed].

    A finding is right when it names a failing GPU at a time inside the span or up to
    `grace_h` after the failure (a rule reacting to the failure itself). Its time is
    `detected_ts` for a model and the span start for a rule (even a rule's `predicted`
    precursor finding: a replay stamps rule findings with the run's time). Lead = failure −
    that time.
    `allocations` (`job_gpus`: job_id, gpu_uuid, start_ts, end_ts) give the work at risk.
    """
    mine = findings.filter(
        pl.col("detector").is_in(list(detectors)) & pl.col("gpu_uuid").is_not_null()
    ).with_columns(
        pl.when(pl.lit(kind == "model"))
        .then(pl.col("detected_ts"))
        .otherwise(pl.coalesce("start_ts", "detected_ts"))
        .alias("at")
    )
    failing = truth.filter(
        (pl.col("label") == "failing_gpu") & (pl.col("subject_kind") == "gpu")
    ).select(
        pl.col("subject_id").alias("gpu_uuid"),
        pl.col("start_ts").alias("degrade_ts"),
        pl.col("end_ts").alias("fail_ts"),
    )
    pairs = (
        mine.select("finding_id", "gpu_uuid", "at")
        .join(failing, on="gpu_uuid", how="inner")
        .filter(
            (pl.col("at") >= pl.col("degrade_ts"))
            & (pl.col("at") <= pl.col("fail_ts") + pl.duration(hours=grace_h))
        )
        .with_columns(_hours(pl.col("fail_ts") - pl.col("at")).alias("lead_h"))
    )
    right = set(pairs["finding_id"].to_list())
    first = pairs.group_by("gpu_uuid", "fail_ts").agg(pl.col("lead_h").max())
    warned = first.filter(pl.col("lead_h") >= min_lead_h)
    saved = _work_at_risk(warned, allocations)
    n_false = mine.height - len(right)
    return Score(
        detector=name,
        label="failing_gpu",
        kind=kind,
        subjects=failing.height,
        flagged=mine.height,
        true_positives=len(right),
        found=first.height,
        found_lead_1h=warned.height,
        false_alarms=n_false,
        gpu_days=gpu_days,
        gpu_h_saved=saved,
        gpu_h_disrupted=n_false * DRAIN_COST_GPU_H,
        leads_h=tuple(float(x) for x in first["lead_h"].to_list()),
        goal=goal,
    )


def score_node_detector(
    findings: pl.DataFrame,
    truth: pl.DataFrame,
    gpu_nodes: pl.DataFrame,
    detector: str,
    *,
    goal: str = "",
) -> Score:
    """Score node findings (e.g. lemon nodes) against node trouble in the truth: a node that is
    thermal, drained, or holds a failing GPU during the finding's span. Recall is over nodes
    with any such trouble. `gpu_nodes` maps `gpu_uuid` to `node`."""
    mine = findings.filter(
        (pl.col("detector") == detector) & (pl.col("subject_kind") == "node")
    ).select("finding_id", pl.col("subject_id").alias("node"), "start_ts", "end_ts")
    node_truth = truth.filter(
        (pl.col("subject_kind") == "node") & pl.col("label").is_in(["thermal", "drained"])
    ).select(pl.col("subject_id").alias("node"), "start_ts", "end_ts")
    gpu_truth = (
        truth.filter((pl.col("subject_kind") == "gpu") & (pl.col("label") == "failing_gpu"))
        .join(gpu_nodes, left_on="subject_id", right_on="gpu_uuid")
        .select("node", "start_ts", "end_ts")
    )
    trouble = pl.concat([node_truth, gpu_truth], how="vertical_relaxed").rename(
        {"start_ts": "t_start", "end_ts": "t_end"}
    )
    pairs = mine.join(trouble, on="node").filter(
        (pl.col("t_start") < pl.col("end_ts"))
        & (pl.col("t_end").is_null() | (pl.col("t_end") > pl.col("start_ts")))
    )
    right = set(pairs["finding_id"].to_list())
    troubled = set(trouble["node"].to_list())
    found = set(pairs["node"].to_list())
    return Score(
        detector=detector,
        label="node_trouble",
        kind="model",
        subjects=len(troubled),
        flagged=mine.height,
        true_positives=len(right),
        found=len(found & troubled),
        false_alarms=mine.height - len(right),
        goal=goal,
    )


def _work_at_risk(failures: pl.DataFrame, allocations: pl.DataFrame) -> float:
    """GPU-hours done by the jobs holding each failed GPU when it failed (lost without warning)."""
    if failures.is_empty() or allocations.is_empty():
        return 0.0
    per_job_gpus = allocations.group_by("job_id").agg(pl.len().alias("gpus"))
    on_gpu = allocations.join(failures.select("gpu_uuid", "fail_ts"), on="gpu_uuid").filter(
        (pl.col("start_ts") <= pl.col("fail_ts"))
        & (pl.col("end_ts").is_null() | (pl.col("end_ts") >= pl.col("fail_ts")))
    )
    hit = on_gpu.join(per_job_gpus, on="job_id").select(
        (pl.col("gpus") * _hours(pl.col("fail_ts") - pl.col("start_ts"))).sum()
    )
    return float(hit.item() or 0.0)


def score_threshold(
    name: str,
    label: str,
    labels: list[bool],
    scores: list[float],
    threshold: float | None,
    goal: str = "",
) -> Score:
    """A model's alarms at `threshold`, the one on its card (what `detect` raises findings
    with; None: it raises none): its precision and recall there, as counts. Unlike
    `score_ranking`, nothing here is chosen on the scored labels."""
    import numpy as np

    y = np.array(labels, dtype=bool)
    s = np.array(scores, dtype=float)
    flag = s >= threshold if threshold is not None else np.zeros(len(y), dtype=bool)
    hits = int((flag & y).sum())
    return Score(
        detector=name,
        label=label,
        kind="model",
        subjects=int(y.sum()),
        flagged=int(flag.sum()),
        true_positives=hits,
        found=hits,
        false_alarms=int((flag & ~y).sum()),
        goal=goal,
        extra={"threshold": threshold},
    )


def score_ranking(
    name: str,
    label: str,
    labels: list[bool],
    scores: list[float],
    recall: float,
    goal: str = "",
) -> Score:
    """A ranking (a model's scores) at the best threshold reaching `recall`: its precision and
    recall there, as counts; `extra` holds the threshold-free average precision. The threshold
    is picked on the scored labels themselves, which no deployed model can do: this compares
    rankings (a model with a baseline at equal recall), it is not what a site gets
    (`score_threshold` is)."""
    import numpy as np
    from sklearn.metrics import average_precision_score

    y = np.array(labels, dtype=int)
    s = np.array(scores, dtype=float)
    positives = int(y.sum())
    if positives == 0 or positives == len(y):
        return Score(detector=name, label=label, kind="model", subjects=positives, goal=goal)
    order = np.argsort(-s, kind="stable")
    ss, tp = s[order], np.cumsum(y[order])
    n = np.arange(1, len(y) + 1)
    cut = np.r_[ss[1:] != ss[:-1], True] & (tp / positives >= recall)
    best = int(np.argmax(np.where(cut, tp / n, -1.0)))
    return Score(
        detector=name,
        label=label,
        kind="model",
        subjects=positives,
        flagged=int(n[best]),
        true_positives=int(tp[best]),
        found=int(tp[best]),
        false_alarms=int(n[best] - tp[best]),
        goal=goal,
        extra={"average_precision": float(average_precision_score(y, s))},
    )


def goal_met(score: Score, scores: list[Score]) -> bool | None:
    """Whether `score` meets the issue's acceptance goal for its detector (None: no goal).

    The early-waste model's ranking at 30 min must beat the user-history baseline's precision
    at the same recall; the others have fixed bars.
    """
    from detectors.failing_gpu_scores import failure_goal_met

    failing = failure_goal_met(score)
    if failing is not None:
        return failing
    p, r = score.precision, score.recall
    if score.detector == "waste_jobs":
        from detectors.waste_evaluation import waste_goal_met

        return waste_goal_met(score)
    if score.detector in ("idle_job", "partial_idle"):
        return p is not None and r is not None and p >= 0.95 and r >= 0.95
    if score.detector in ("hung_job", "gpu_health_rules"):
        return p is not None and r is not None and p >= 0.8 and r >= 0.9
    if score.detector == "failing_gpu_model":
        fa = score.false_alarms_per_1000_gpu_days
        lead = score.recall_lead_1h
        return lead is not None and fa is not None and lead >= 0.7 and fa <= 1.0
    if score.detector == "early_waste_ranking_30m":
        base = next((s for s in scores if s.detector == "early_waste_baseline_30m"), None)
        if base is None or p is None or base.precision is None:
            return None
        return p > base.precision
    return None


def scores_table(
    scores: list[tuple[str, str, Score]],
    run_id: str,
    created: dt.datetime,
    cluster: str = "evaluation",
) -> pa.Table:
    """The `evaluation_scores` rows of `(setting, seeds, score)` triples."""
    schema = TABLES["evaluation_scores"].schema

    def _f(x: float | None) -> float | None:
        return None if x is None else float(x)

    by_setting: dict[str, list[Score]] = {}
    for setting, _, s in scores:
        by_setting.setdefault(setting, []).append(s)
    rows = [
        {
            "cluster": cluster,
            "run_id": run_id,
            "created_ts": created,
            "setting": setting,
            "seeds": seeds,
            "detector": s.detector,
            "label": s.label,
            "kind": s.kind,
            "subjects": s.subjects,
            "flagged": s.flagged,
            "true_positives": s.true_positives,
            "precision": _f(s.precision),
            "recall": _f(s.recall),
            "recall_lead_1h": _f(s.recall_lead_1h) if s.label == "failing_gpu" else None,
            "lead_h_median": _f(s.lead_h_median),
            "false_alarms": s.false_alarms,
            "false_alarms_per_1000_gpu_days": _f(s.false_alarms_per_1000_gpu_days),
            "gpu_h_saved": s.gpu_h_saved,
            "gpu_h_disrupted": s.gpu_h_disrupted,
            "net_gpu_h": s.gpu_h_saved - s.gpu_h_disrupted,
            "average_precision": _f(s.extra.get("average_precision")),
            "goal": s.goal,
            "met": goal_met(s, by_setting[setting]),
            "detail": json.dumps(s.extra, sort_keys=True) if s.extra else None,
        }
        for setting, seeds, s in scores
    ]
    return pa.Table.from_pylist(rows, schema=schema)
