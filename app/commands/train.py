"""`gpuledger train`: fit the predictive models on the lake's own history and store them."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import click

from app.errors import AppError, reports_errors
from app.options import Timestamp, lake_option

if TYPE_CHECKING:
    from detectors.models.store import ModelCard
    from warehouse.lake import Lake

__all__ = ["command"]


@click.command(name="train")
@lake_option
@click.option(
    "--now",
    type=Timestamp(),
    default=None,
    help="Stamp the model cards with this time (ISO, UTC; not before the history they learn "
    "from) [default: now].",
)
@reports_errors
def command(lake: Lake, now: dt.datetime | None) -> None:
    """Train the predictive models on the lake's history and store them in <lake>/_state/models.

    \b
    failing_gpu         P(uncorrectable error / XID 48, 79, 94, 95 / row-remap failure within
                        24 h) per GPU-hour, from corrected-ECC trend, XIDs, temperature,
                        throttling and remaps
    early_waste_15m/30m P(a job is idle or under 20 % busy for most of its run), 15 / 30 min in
    runtime_quantiles   p50 / p90 run time at submission, for time-limit right-sizing
    lemon_node          IsolationForest over node-days
    Each model is scored on a time split (first 70 % of the history vs the rest) and stored
    with a JSON card (training window, features, metrics, alarm threshold). `gpuledger detect`
    then adds their predictions to the findings. Build the marts first (`gpuledger attribute`).
    A model the history cannot teach (no failure yet, too few jobs) is skipped with the reason.
    A failing_gpu model whose alarm threshold could not be chosen on failures it did not train
    on (none fell in the held-out 30 %, or none was warned of), or an early_waste model whose
    held-out part holds no wasteful job, is stored, but detect raises no findings from it
    until a later train can check it; the output says so.
    """
    from detectors.models.store import model_dir
    from detectors.models.training import history_end, load_data, train_all

    con = lake.connect(require=["gpu_samples", "jobs", "gpu_job_buckets"])
    data = load_data(con)
    end = history_end(data)
    if now is not None and end is not None and now < end:
        raise AppError(
            f"--now {now.isoformat()} is before the end of the history the models learn from "
            f"({end.isoformat()}): a model is trained after what it learns from"
        )
    trained = train_all(data, lake, now or dt.datetime.now(dt.UTC))
    if not trained.cards:
        raise AppError(
            "no model could be trained: "
            + "; ".join(f"{k}: {v}" for k, v in sorted(trained.skipped.items()))
        )
    for name, card in sorted(trained.cards.items()):
        figures = ", ".join(
            f"{k} {v:.3g}" for k, v in sorted(card.metrics.items()) if k.startswith("test_") and v
        )
        click.echo(
            f"{name}: {card.rows:,} rows {card.window_start} .. {card.window_end}"
            + (f"; {figures}" if figures else "")
        )
        why = _not_evaluated(card)
        if why is not None:
            click.echo(f"{name}: stored, but detect raises no findings from it: {why}")
    for name, why in sorted(trained.skipped.items()):
        click.echo(f"{name}: not trained ({why}){_kept(lake, name)}", err=True)
    click.echo(f"Stored in {model_dir(lake)}.")


def _not_evaluated(card: ModelCard) -> str | None:
    """Why `detect` raises no findings from a stored model whose alarm threshold nothing
    checked (None: it raises them)."""
    from detectors.models import early_waste, failing_gpu
    from detectors.models.training import FAILING_GPU

    if card.name == FAILING_GPU:
        return failing_gpu.not_evaluated(card)
    if card.name.startswith("early_waste_"):
        return early_waste.not_evaluated(card)
    return None


def _kept(lake: Lake, name: str) -> str:
    """What stays in use of a model this run could not train: the one a train stored before
    (detect goes on using it), said with when it was trained and how to stop it."""
    from detectors.models.store import ModelCard, model_dir

    kept = []
    for card_path in sorted(model_dir(lake).glob(f"{name}*.json")):
        try:
            card = ModelCard.from_json(card_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        kept.append(f"{card.name} trained {card.trained_ts}")
    if not kept:
        return ""
    return (
        f"; the model stored before stays in use ({', '.join(kept)}): delete its files in "
        f"{model_dir(lake)} to stop it"
    )
