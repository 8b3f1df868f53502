"""`gpuledger evaluate`'s early-waste rows: the model at its card's threshold (what `detect`
raises), and apart from it, named so, the rankings at equal recall."""

from __future__ import annotations

import polars as pl

from app.evaluation.run import SettingResult


def waste_rows(threshold: float | None) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "label": [True, True, True, True, False],
            "score": [0.9, 0.8, 0.7, 0.3, 0.1],
            "baseline": [0.5, 0.5, 0.5, 0.5, 0.5],
            "threshold": [threshold] * 5,
        },
        schema_overrides={"threshold": pl.Float64},
    )


def by_name(threshold: float | None) -> dict[str, tuple[int, float | None]]:
    result = SettingResult("default", (100,))
    result.waste_rows[30] = [waste_rows(threshold)]
    return {s.detector: (s.flagged, s.recall) for s in result.finish()}


def test_the_early_waste_model_is_scored_at_its_cards_threshold() -> None:
    # it printed recall 0.81 at a threshold picked on the scored seed's labels; the card's
    # threshold, the one detect raises findings with, gave 0.70 on that seed
    scores = by_name(0.75)
    assert scores["early_waste_model_30m"] == (2, 0.5)
    assert scores["early_waste_ranking_30m"] == (4, 1.0)  # the threshold reaching 0.8 here
    assert scores["early_waste_baseline_30m"] == (5, 1.0)


def test_an_early_waste_model_that_raises_nothing_is_scored_as_raising_nothing() -> None:
    assert by_name(None)["early_waste_model_30m"] == (0, 0.0)
