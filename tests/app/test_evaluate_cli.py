"""`gpuledger evaluate`: seed parsing, usage errors, and one tiny end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from app.cli import cli
from app.commands.evaluate import parse_seeds
from warehouse.connection import connect
from warehouse.lake import Lake

PHILLY = Path(__file__).resolve().parents[1] / "fixtures" / "philly"


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("100", (100,)), ("100-103", (100, 101, 102, 103)), ("100-101, 110,100", (100, 101, 110))],
)
def test_seeds_are_lists_and_ranges(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize(
    ("text", "message"), [("1o0", "'1o0'"), ("105-100", "ends before"), (",", "names no seed")]
)
def test_bad_seeds_are_named(text, message):
    with pytest.raises(ValueError, match=message):
        parse_seeds(text)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "5"], "for training and development"),
        (["--seeds", "1x"], "is not a seed"),
        (["--train-seeds", "100"], "training seeds must be 1-99"),
    ],
)
def test_usage_errors_exit_2(tmp_path, args, message):
    result = CliRunner().invoke(cli, ["evaluate", "--lake", str(tmp_path), *args])
    assert result.exit_code == 2
    assert message in result.output


def test_a_missing_philly_folder_is_one_error_line(tmp_path):
    result = CliRunner().invoke(
        cli, ["evaluate", "--lake", str(tmp_path), "--philly", str(tmp_path / "nope")]
    )
    assert result.exit_code == 1
    assert result.output.strip().endswith("no such folder")
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_a_tiny_evaluation_prints_and_lands_its_scores(tmp_path):
    lake = tmp_path / "lake"
    args = [
        "evaluate",
        "--seeds",
        "100",
        "--train-seeds",
        "1",
        "--gpus",
        "16",
        "--days",
        "2",
        "--philly",
        str(PHILLY),
        "--workdir",
        str(tmp_path / "work"),
        "--lake",
        str(lake),
        "-q",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    for detector in ("idle_job", "hung_job", "failing_gpu_model", "early_waste_model_30m"):
        assert detector in result.output
    assert "philly: 86 jobs" in result.output
    scores = (
        connect(lake, require=["evaluation_scores"]).sql("SELECT * FROM evaluation_scores").pl()
    )
    assert scores.height >= 10
    assert set(scores["setting"]) == {"default"}
    assert scores.filter(pl.col("detector") == "idle_job")["seeds"].to_list() == ["100"]
    # running again adds a second run, it does not replace or duplicate the first
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    runs = connect(lake).sql("SELECT count(DISTINCT run_id) AS n FROM evaluation_scores").pl()
    assert runs["n"][0] == 2


def test_train_on_a_missing_lake_is_one_error_line(tmp_path):
    result = CliRunner().invoke(cli, ["train", "--lake", str(tmp_path / "none")])
    assert result.exit_code == 1
    assert "has no data" in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_train_stores_the_models_the_history_can_teach(tmp_path):
    from collector.sim import SimConfig, simulate
    from warehouse.attribution import AttributionConfig, attribute

    lake = tmp_path / "lake"
    simulate(SimConfig(gpus=16, days=2, seed=4), Lake.at(lake))
    attribute(connect(lake), lake, AttributionConfig())
    result = CliRunner().invoke(cli, ["train", "--lake", str(lake), "--now", "2026-11-05"])
    assert result.exit_code == 0, result.output
    assert "early_waste_30m:" in result.output and "Stored in" in result.output
    card = (lake / "_state" / "models" / "early_waste_30m.json").read_text()
    assert '"trained_ts": "2026-11-05T00:00:00+00:00"' in card
    # M9: the one failure of this history fell in the training 70 %: the failing_gpu model
    # is stored, but nothing chose or checked its threshold, so it raises no critical finding
    failing = json.loads((lake / "_state" / "models" / "failing_gpu.json").read_text())
    assert failing["metrics"]["held_out_failures"] == 0 and failing["threshold"] is None
    assert (
        "failing_gpu: stored, but detect raises no findings from it: no GPU failure fell in "
        "its held-out data" in result.output
    )


@pytest.mark.slow
def test_train_refuses_a_now_before_the_history_it_learns_from(tmp_path):
    # `--now 1970-01-01` stored cards stamped before their own training window
    from collector.sim import SimConfig, simulate
    from warehouse.attribution import AttributionConfig, attribute

    lake = tmp_path / "lake"
    simulate(SimConfig(gpus=8, days=1, seed=4), Lake.at(lake))
    attribute(connect(lake), lake, AttributionConfig())
    result = CliRunner().invoke(cli, ["train", "--lake", str(lake), "--now", "1970-01-01"])
    assert result.exit_code == 1
    assert result.output.startswith(
        "Error: --now 1970-01-01T00:00:00+00:00 is before the end of the history the models "
        "learn from (2026-11-0"
    )
    assert len(result.output.strip().splitlines()) == 1
    assert not (lake / "_state" / "models").exists()


def test_a_model_not_trained_again_says_the_one_stored_before_stays_in_use(tmp_path):
    # "runtime_quantiles: not trained (...)" while detect went on with last month's model
    from app.commands.train import _kept
    from detectors.models.store import ModelCard, save

    lake = Lake.at(tmp_path)
    assert _kept(lake, "runtime_quantiles") == ""
    card = ModelCard(
        name="runtime_quantiles",
        features=("gpus",),
        trained_ts="2026-11-01T00:00:00+00:00",
        window_start=None,
        window_end=None,
        clusters=("sim",),
        rows=40,
        threshold=None,
    )
    save(lake, card, {})
    said = _kept(lake, "runtime_quantiles")
    assert said.startswith(
        "; the model stored before stays in use (runtime_quantiles trained "
        "2026-11-01T00:00:00+00:00): delete its files in "
    )
