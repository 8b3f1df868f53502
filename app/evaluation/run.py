"""What `gpuledger evaluate` does: simulate training and unseen seeds, train the models on the
first, run the rules and models on the second, and score both against `sim_truth`.

Every simulated lake lives in a work folder (never the user's lake); the user's lake receives
only the `evaluation_scores` rows. Seeds 1-99 are for training and development; unseen seeds
(100 and up) are for scoring.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from detectors.evaluation import (
    JobTarget,
    Score,
    score_job_detector,
    score_node_detector,
    score_ranking,
    score_threshold,
)
from detectors.failing_gpu_scores import score_failing_gpus
from detectors.models.training import TrainingResult
from detectors.waste_evaluation import WasteScore, score_waste
from warehouse.lake import Lake

__all__ = [
    "FIRST_UNSEEN_SEED",
    "EvaluationPlan",
    "SettingResult",
    "evaluate_philly",
    "run_plan",
]

FIRST_UNSEEN_SEED = 100
EARLY_WASTE_RECALL = 0.8  # the recall at which the model and the baseline are compared


@dataclass(frozen=True, slots=True)
class EvaluationPlan:
    """Which seeds, how big a fleet, and which settings to evaluate."""

    seeds: tuple[int, ...]
    train_seeds: tuple[int, ...]
    settings: tuple[str, ...]  # "default" and/or "hard"
    gpus: int = 64
    days: int = 7
    failure_rate: float = 4.0  # failing GPUs per 100 GPU-weeks (4× the default: more to score)


@dataclass(slots=True)
class SettingResult:
    """Pooled scores of one setting over the unseen seeds."""

    setting: str
    seeds: tuple[int, ...]
    scores: dict[str, Score] = field(default_factory=dict)
    waste_rows: dict[int, list[pl.DataFrame]] = field(default_factory=dict)
    runtime_rows: list[pl.DataFrame] = field(default_factory=list)
    waste: WasteScore = field(default_factory=WasteScore)  # the job waste detectors together

    def add(self, score: Score) -> None:
        """Pool `score` with the same detector's scores of earlier seeds."""
        key = score.detector
        self.scores[key] = self.scores[key].combine(score) if key in self.scores else score

    def finish(self) -> list[Score]:
        """Every score, with early waste at its card's threshold and as rankings, and the
        run-time figures, over all seeds."""
        from detectors.models.runtime import metrics as runtime_metrics

        out = list(self.scores.values())
        if self.waste.truth_jobs or self.waste.flagged_jobs:
            out.append(self.waste.as_score())
        for minutes, parts in sorted(self.waste_rows.items()):
            rows = pl.concat(parts, how="vertical_relaxed")
            labels = rows["label"].cast(pl.Boolean).to_list()
            # what a site gets: the card's threshold, the one `detect` raises findings with
            threshold = rows["threshold"].max()  # (one model: null where it raises none)
            out.append(
                score_threshold(
                    f"early_waste_model_{minutes}m",
                    "wasteful_job",
                    labels,
                    rows["score"].to_list(),
                    threshold if isinstance(threshold, float) else None,
                    "at the card's threshold (as detect raises it)",
                )
            )
            # the rankings, model and baseline at equal recall: each threshold picked on these
            # very labels (no deployed model can), so named apart from the model's own row
            ranked = f"ranking only: the threshold reaching recall {EARLY_WASTE_RECALL} here"
            goal = f"; precision above the baseline's at recall {EARLY_WASTE_RECALL}"
            out.append(
                score_ranking(
                    f"early_waste_ranking_{minutes}m",
                    "wasteful_job",
                    labels,
                    rows["score"].to_list(),
                    EARLY_WASTE_RECALL,
                    ranked + (goal if minutes == 30 else ""),
                )
            )
            out.append(
                score_ranking(
                    f"early_waste_baseline_{minutes}m",
                    "wasteful_job",
                    labels,
                    rows["baseline"].to_list(),
                    EARLY_WASTE_RECALL,
                    ranked,
                )
            )
        if self.runtime_rows:
            figures = runtime_metrics(pl.concat(self.runtime_rows, how="vertical_relaxed"))
            out.append(
                Score(
                    detector="runtime_quantiles_model",
                    label="runtime",
                    kind="model",
                    extra={k: None if v is None else float(v) for k, v in figures.items()},
                    goal="p90 coverage near 0.9",
                )
            )
        return out


def _lake(plan: EvaluationPlan, work: Path, setting: str, seed: int) -> tuple[Path, str]:
    """The lake folder (named by everything that shapes it, so a reuse is always right) and
    the cluster name of one simulated seed."""
    cluster = f"sim-s{seed}" + ("-hard" if setting == "hard" else "")
    folder = f"{cluster}-{plan.gpus}g-{plan.days}d-f{plan.failure_rate:g}"
    return work / folder, cluster


def _simulated(plan: EvaluationPlan, work: Path, setting: str, seed: int) -> Lake:
    """A simulated, attributed lake for (setting, seed), reused when already in `work`."""
    from app.pipeline import attribute, default_pipeline_config
    from collector.sim import SimConfig, simulate

    root, cluster = _lake(plan, work, setting, seed)
    done = root / "_state" / "evaluate.done"
    if done.is_file():
        return Lake(root)
    cfg = SimConfig(
        cluster=cluster,
        gpus=plan.gpus,
        days=plan.days,
        seed=seed,
        hard=setting == "hard",
        failure_rate=plan.failure_rate,
    )
    simulate(cfg, Lake(root))
    # the defaults the rules were tuned with (a configuration file would move the goalposts)
    attribute(Lake(root), default_pipeline_config(), dt.datetime.now(dt.UTC))
    done.write_text("ok\n")
    return Lake(root)


def _targets(idle_minutes: float, hung_minutes: float, whole_job_minutes: float) -> list[JobTarget]:
    both95 = "precision >= 0.95 and recall >= 0.95"
    return [
        JobTarget(
            ("idle_job",),
            "idle",
            min_truth_s=whole_job_minutes * 60,
            fire_delay_s=idle_minutes * 60,
            goal=both95,
        ),
        JobTarget(
            ("partial_idle",),
            "partial_idle",
            min_truth_s=idle_minutes * 60,
            fire_delay_s=idle_minutes * 60,
            goal=both95,
        ),
        JobTarget(
            ("hung_job",),
            "hung",
            min_truth_s=hung_minutes * 60,
            fire_delay_s=hung_minutes * 60,
            goal="recall >= 0.9 and precision >= 0.8",
        ),
        JobTarget(
            ("memory_hold",),
            "memory_hold",
            min_truth_s=idle_minutes * 60,
            fire_delay_s=idle_minutes * 60,
        ),
        JobTarget(("overallocated",), "overallocated"),
        JobTarget(("time_limit_excess",), "time_limit_excess"),
        JobTarget(("stranded_gpus",), "stranded_gpus"),
        JobTarget(("low_efficiency_user",), "wasteful_user", subject_kind="user"),
    ]


def _score_seed(lake: Lake, trained: Lake, result: SettingResult, now: dt.datetime) -> None:
    """Run the rules and the models on one unseen seed's lake and pool its scores."""
    from app.pipeline import default_pipeline_config, rule_findings
    from detectors.models import early_waste, model_frames, predict_frames, runtime
    from detectors.models.compute import one_thread
    from detectors.models.store import load
    from detectors.models.training import RUNTIME, early_waste_name, load_data

    con = lake.connect()
    pipeline = default_pipeline_config()
    config = pipeline.rule_config("idle_job")  # the defaults (no [detect.…] table)
    rules = pl.DataFrame(rule_findings(con, pipeline, now))
    data = load_data(con)
    with one_thread():
        models = pl.DataFrame(predict_frames(model_frames(trained, data, now), now))
        for minutes, early in sorted(data.early.items()):
            if not _trained(trained, early_waste_name(minutes)):
                continue
            card, model = load(trained, early_waste_name(minutes))
            rows = early_waste.frame(data.jobs, early, minutes).filter(
                pl.col("label").is_not_null()
            )
            # the threshold detect uses: none where the card's could not be chosen
            deployed = None if early_waste.not_evaluated(card) else card.threshold
            scored = early_waste.score(model, rows).select(
                "label", "score", "baseline", pl.lit(deployed, pl.Float64).alias("threshold")
            )
            result.waste_rows.setdefault(minutes, []).append(scored)
        if _trained(trained, RUNTIME):
            _, quantiles = load(trained, RUNTIME)
            result.runtime_rows.append(
                runtime.predict_quantiles(quantiles, runtime.frame(data.jobs)).select(
                    "log_runtime",
                    "p50_s",
                    "p90_s",
                    "user_last2_log_runtime",
                    "time_limit_s",
                    "gpus",
                )
            )
    findings = pl.concat([rules, models], how="vertical_relaxed")
    truth = con.sql("SELECT * FROM sim_truth").pl()
    jobs = con.sql("SELECT job_id, gpus, start_ts, end_ts FROM jobs_latest").pl()
    allocations = con.sql("SELECT job_id, gpu_uuid, start_ts, end_ts FROM job_gpus").pl()
    gpu_nodes = con.sql("SELECT DISTINCT gpu_uuid, node FROM gpus").pl()
    gpu_days = data.hourly.height / 24.0
    con.close()

    idle = config.idle
    targets = _targets(idle.idle_minutes, idle.hung_minutes, idle.whole_job_min_minutes)
    for target in targets:
        result.add(score_job_detector(findings, truth, jobs, target))
    shortest = {t.label: t.min_truth_s for t in targets}
    result.waste = result.waste.combine(score_waste(rules, truth, gpu_days, shortest))
    for score in score_failing_gpus(findings, truth, allocations, gpu_days):
        result.add(score)
    result.add(score_node_detector(findings, truth, gpu_nodes, "lemon_node_model"))


def _trained(lake: Lake, name: str) -> bool:
    from detectors.models.store import model_dir

    return (model_dir(lake) / f"{name}.json").is_file()


def _data_end(lake: Lake) -> dt.datetime:
    con = lake.connect()
    end = con.execute("SELECT max(ts) FROM gpu_samples").fetchone()
    con.close()
    if end is None or end[0] is None:
        raise ValueError(f"{lake}: no samples")
    value: dt.datetime = end[0]
    return value


def run_plan(
    plan: EvaluationPlan,
    work: Path,
    now: dt.datetime,
    say: Callable[[str], None] = lambda _: None,
) -> tuple[TrainingResult, list[SettingResult]]:
    """Train on `plan.train_seeds`, score `plan.seeds`; return the model cards and results."""
    from detectors.models.training import TrainingData, load_data, train_all

    train = Lake(work / "train")
    parts = []
    for setting in plan.settings:
        for seed in plan.train_seeds:
            say(f"simulating training seed {seed} ({setting})")
            con = _simulated(plan, work, setting, seed).connect()
            parts.append(load_data(con))
            con.close()
    say("training the models")
    # this run's models only: one an earlier run in this work folder trained, that this run's
    # history cannot teach, was scored as if this run had trained it
    import shutil

    from detectors.models.store import model_dir

    shutil.rmtree(model_dir(train), ignore_errors=True)
    trained = train_all(TrainingData.concat(parts), train, now)
    for name, why in trained.skipped.items():
        say(f"not trained: {name}: {why}")
    results = []
    for setting in plan.settings:
        result = SettingResult(setting, plan.seeds)
        for seed in plan.seeds:
            say(f"simulating and scoring unseen seed {seed} ({setting})")
            lake = _simulated(plan, work, setting, seed)
            _score_seed(lake, train, result, _data_end(lake))
        results.append(result)
    return trained, results


@dataclass(frozen=True, slots=True)
class PhillyResult:
    """The idle rules on the Philly sample: jobs, how many and how much they flagged."""

    jobs: int
    jobs_observed: int
    flagged: int
    flagged_gpu_h: float
    zero_util_jobs: int  # jobs whose every observed sample read 0 % utilisation
    zero_util_flagged: int


def evaluate_philly(directory: Path, work: Path, now: dt.datetime) -> PhillyResult:
    """Import the Philly sample at `directory`, attribute it, run the idle rules.

    Philly has no ground truth; the check is that jobs whose GPUs read 0 % for their whole
    observed run are the ones flagged (the trace reports only nvidia-smi utilisation).
    """
    from app.pipeline import attribute, default_pipeline_config, rule_findings
    from collector.sources.philly.trace import import_philly

    lake = Lake(work / "philly")
    import_philly(directory, "philly", lake)
    pipeline = default_pipeline_config()
    attribute(lake, pipeline, now)
    con = lake.connect()
    findings = pl.DataFrame(rule_findings(con, pipeline, now))
    idle = findings.filter(pl.col("detector") == "idle_job")
    usage = con.sql("SELECT job_id, observed_gpu_h, gpu_util_pct_mean FROM job_usage").pl()
    n_jobs = con.execute("SELECT count(*) FROM jobs_latest").fetchone()
    con.close()
    observed = usage.filter(pl.col("observed_gpu_h") > 0)
    zero = set(observed.filter(pl.col("gpu_util_pct_mean") == 0)["job_id"].to_list())
    flagged = set(idle["subject_id"].to_list())
    return PhillyResult(
        jobs=int(n_jobs[0]) if n_jobs else 0,
        jobs_observed=observed.height,
        flagged=len(flagged),
        flagged_gpu_h=float(idle["gpu_h_at_stake"].sum() or 0.0),
        zero_util_jobs=len(zero),
        zero_util_flagged=len(zero & flagged),
    )
