"""`gpuledger evaluate`: score the rules and models against the simulator's ground truth on
seeds never used in training or development, at the default and the hard setting."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.errors import AppError, reports_errors
from app.options import NonEmptyPath, lake_option

if TYPE_CHECKING:
    from warehouse.lake import Lake

__all__ = ["command", "parse_seeds"]


MOST_SEEDS = 1000


def parse_seeds(text: str) -> tuple[int, ...]:
    """`"100-104,110"` → (100, 101, 102, 103, 104, 110); raises ValueError naming the bad part."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ValueError(f"{part!r} is not a seed or a range like 100-104") from None
        if last < first:
            raise ValueError(f"{part!r}: the range ends before it starts")
        if len(seeds) + last - first + 1 > MOST_SEEDS:  # (100-99999999999: a MemoryError)
            raise ValueError(f"{text!r} names more than {MOST_SEEDS:,} seeds (each a whole run)")
        seeds.extend(range(first, last + 1))
    if not seeds:
        raise ValueError(f"{text!r} names no seed")
    return tuple(dict.fromkeys(seeds))


class Seeds(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """Seeds as a list and ranges: 100-104,110."""

    name = "seeds"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        try:
            return parse_seeds(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _waste_detail(extra: dict[str, float | None]) -> str:
    """The `waste_jobs` row's figures: right detector, recall per kind, services flagged."""
    from detectors.waste_evaluation import WASTE_DETECTOR

    kinds = ", ".join(
        f"{label} {_fmt(extra.get(f'recall_{label}'))} of {int(extra.get(f'truth_{label}') or 0)}"
        for label in WASTE_DETECTOR
    )
    return (
        f"; right detector {_fmt(extra.get('right_detector_rate'))}; recall {kinds}; healthy "
        f"services flagged {int(extra.get('services_flagged') or 0)} of "
        f"{int(extra.get('services') or 0)}"
    )


@click.command(name="evaluate")
@click.option(
    "--seeds",
    type=Seeds(),
    default="100-104",
    show_default=True,
    help="Unseen simulator seeds to score on (100 and up; 1-99 are for training/development).",
)
@click.option(
    "--train-seeds",
    type=Seeds(),
    default="1-6",
    show_default=True,
    help="Seeds the models are trained on (1-99).",
)
@click.option(
    "--hard",
    is_flag=True,
    help="Also score the hard setting (noisier telemetry, subtler failures, idle jobs woken by "
    "periodic small kernels, bursty healthy services, late hangs, util-only nodes, exporter "
    "outages); the models are then trained on both settings.",
)
@click.option(
    "--gpus",
    type=click.IntRange(8, 4096),
    default=64,
    show_default=True,
    help="GPUs per simulated fleet.",
)
@click.option(
    "--days",
    type=click.IntRange(2, 60),
    default=7,
    show_default=True,
    help="Days per simulated seed.",
)
@click.option(
    "--philly",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also run the idle rules on a Philly trace folder (e.g. tests/fixtures/philly).",
)
@click.option(
    "--workdir",
    type=NonEmptyPath(file_okay=False, path_type=Path),
    default=None,
    help="Keep the simulated lakes and the trained models here (reused by the next run); "
    "default: a temporary folder, removed afterwards.",
)
@lake_option
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
@reports_errors
def command(
    seeds: tuple[int, ...],
    train_seeds: tuple[int, ...],
    hard: bool,
    gpus: int,
    days: int,
    philly: Path | None,
    workdir: Path | None,
    lake: Lake,
    quiet: bool,
) -> None:
    """Score every rule and model against the simulator's ground truth (sim_truth).

    \b
    Simulates --train-seeds and trains the models on them (failing GPU, early waste at 15 and
    30 min, run-time quantiles, lemon nodes), then simulates the unseen --seeds, runs the rules
    and the models on each and pools the scores per setting:
      precision, recall    per detector against the matching sim_truth label
      >=1h                 share of failing GPUs warned at least an hour before they failed
      lead h               median hours of warning (models) or of delay after the problem
                           began (rules acting once their minimum duration has passed)
      FA/1kGd              false alarms per 1,000 GPU-days
      net GPU-h            GPU-hours acting on the findings would have saved minus those it
                           would have disrupted (see detectors/evaluation.py)
    The `waste_jobs` row scores the job waste detectors together: a job flagged by any of them
    against any waste label (FA/1kGd: flagged jobs with none), then the share of waste jobs
    whose finding names the right detector, recall per waste kind, and healthy (bursty, with
    --hard) inference services flagged (detectors/waste_evaluation.py).
    Failing GPUs are scored per early-warning source: gpu_health_rules (XIDs, ECC, row
    remaps), gpu_health_trend (the corrected-ECC trend rule, no history needed),
    failing_gpu_model (trained on the site's own failures), health_detectors (every health
    rule) and health_detectors_and_model; an alarm is a critical or predicted finding.
    Early waste is compared with a user-history-only baseline at equal recall (0.8).
    Prints one table and lands it in the lake as `evaluation_scores`. Simulated fleets
    default to 64 GPUs x 7 days with 4 failing GPUs per 100 GPU-weeks, so there is something
    to score; about 10-20 s per seed and setting on a 2-core machine, plus training.
    """
    from app.evaluation.run import FIRST_UNSEEN_SEED, EvaluationPlan, evaluate_philly, run_plan
    from detectors.evaluation import goal_met, scores_table
    from warehouse.writer import write_batch

    early = [s for s in seeds if s < FIRST_UNSEEN_SEED]
    if early:
        raise click.BadParameter(
            f"seeds {early!r} are for training and development; score on {FIRST_UNSEEN_SEED}+",
            param_hint="--seeds",
        )
    late = [s for s in train_seeds if not 1 <= s < FIRST_UNSEEN_SEED]
    if late:
        raise click.BadParameter(
            f"training seeds must be 1-{FIRST_UNSEEN_SEED - 1}, got {late!r}",
            param_hint="--train-seeds",
        )
    if philly is not None and not philly.is_dir():
        raise AppError(f"--philly {str(philly)!r}: no such folder")
    plan = EvaluationPlan(
        seeds=seeds,
        train_seeds=train_seeds,
        settings=("default", "hard") if hard else ("default",),
        gpus=gpus,
        days=days,
    )
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    work = workdir or Path(tempfile.mkdtemp(prefix="gpuledger-evaluate-"))
    say = (lambda _: None) if quiet else (lambda m: click.echo(f"evaluate: {m}", err=True))
    try:
        trained, results = run_plan(plan, work, now, say)
        philly_result = evaluate_philly(philly, work, now) if philly is not None else None
    finally:
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    triples = []
    header = (
        f"{'setting':8} {'detector':30} {'kind':5} {'truth':>5} {'flagged':>7} "
        f"{'precision':>9} {'recall':>6} {'>=1h':>5} {'lead h':>6} {'FA/1kGd':>7} "
        f"{'net GPU-h':>10}  goal"
    )
    click.echo(header)
    for result in results:
        seeds_text = ",".join(str(s) for s in result.seeds)
        scores = result.finish()
        for s in scores:
            triples.append((result.setting, seeds_text, s))
            met = goal_met(s, scores)
            verdict = "" if met is None else ("MET " if met else "MISSED ")
            extra = ""
            if s.detector.startswith("early_waste") and s.extra.get("average_precision"):
                extra = f" AP {s.extra['average_precision']:.3f}"
            if s.detector == "runtime_quantiles_model":
                e = s.extra
                extra = (
                    f" p90 coverage {_fmt(e.get('p90_coverage'))}, MAE log p50 "
                    f"{_fmt(e.get('mae_p50_log'))} vs last-2 "
                    f"{_fmt(e.get('mae_baseline_last2_log'))}"
                )
            if s.detector == "waste_jobs":
                extra = _waste_detail(s.extra)
            lead = s.recall_lead_1h if s.label == "failing_gpu" else None
            click.echo(
                f"{result.setting:8} {s.detector:30} {s.kind:5} {s.subjects:>5} {s.flagged:>7} "
                f"{_fmt(s.precision):>9} {_fmt(s.recall):>6} {_fmt(lead):>5} "
                f"{_fmt(s.lead_h_median, 1):>6} {_fmt(s.false_alarms_per_1000_gpu_days):>7} "
                f"{s.gpu_h_saved - s.gpu_h_disrupted:>10.1f}  {verdict}{s.goal}{extra}"
            )
    if philly_result is not None:
        r = philly_result
        click.echo(
            f"philly: {r.jobs} jobs ({r.jobs_observed} with samples); idle rules flagged "
            f"{r.flagged} ({r.flagged_gpu_h:.1f} GPU-h idle); {r.zero_util_flagged} of the "
            f"{r.zero_util_jobs} jobs whose GPUs read 0 % throughout are among them"
        )
    for name, card in sorted(trained.cards.items()):
        click.echo(
            f"model {name}: trained on {card.rows:,} rows of {', '.join(card.clusters)}, "
            f"threshold {_fmt(card.threshold, 3)}",
            err=True,
        )
    for name, why in sorted(trained.skipped.items()):
        click.echo(f"model {name}: not trained ({why})", err=True)
    run_id = uuid.uuid4().hex[:12]
    table = scores_table(triples, run_id, now)
    write_batch(lake.root, "evaluation_scores", table, f"evaluation-{run_id}")
    click.echo(f"Wrote {table.num_rows} scores to {lake.root} (evaluation_scores, run {run_id}).")
