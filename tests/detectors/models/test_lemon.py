"""The lemon-node finding's message: the reasons its node-day has data for."""

from __future__ import annotations

import datetime as dt

import polars as pl

from detectors.models import _lemon, lemon
from detectors.models.store import ModelCard
from detectors.models.training import TrainingData


def node_days(sbe: float | None) -> pl.DataFrame:
    """Twenty quiet node-days and one whose five jobs all failed; `sbe`: every corrected-ECC
    count (None: the nodes report no ECC fields, as Philly's do not)."""
    n = 21
    failed = [0] * (n - 1) + [5]
    return pl.DataFrame(
        {
            "cluster": ["c"] * n,
            "node": [f"n{i}" for i in range(n)],
            "day": [dt.date(2026, 11, 2)] * n,
            "sbe_max": [sbe] * n,
            "remap_pending_frac": [0.0] * n,
            "throttle_frac": [0.0] * n,
            "temp_mean": [40.0] * n,
            "xids": [0] * n,
            "jobs_ended": [5] * n,
            "jobs_failed": failed,
        },
        schema_overrides={"sbe_max": pl.Float64},
    )


def findings(days: pl.DataFrame) -> pl.DataFrame:
    rows = lemon.frame(days)
    data = TrainingData(pl.DataFrame(), pl.DataFrame(), pl.DataFrame(), {}, days)
    card = ModelCard(
        "lemon_node", lemon.FEATURES, "2026-11-03T00:00:00+00:00", None, None, (), 0, None
    )
    return _lemon(data, card, lemon.fit(rows))


def test_a_node_without_ecc_data_is_said_with_the_reasons_it_has() -> None:
    # the message was null (pl.format of a null), and the finding read "lemon_node_model
    # finding on node m172"
    found = findings(node_days(None)).filter(pl.col("subject_id") == "n20")
    assert found["message"].to_list() == [
        "Node n20 on 2026-11-02: unlike the rest of the fleet (XIDs 0, failed jobs 5 of 5); "
        "a lemon-node candidate to drain and test"
    ]


def test_a_node_with_ecc_data_says_its_corrected_errors_too() -> None:
    found = findings(node_days(3.0)).filter(pl.col("subject_id") == "n20")
    assert found["message"].to_list() == [
        "Node n20 on 2026-11-02: unlike the rest of the fleet (XIDs 0, failed jobs 5 of 5, "
        "corrected ECC 3); a lemon-node candidate to drain and test"
    ]
    assert lemon.message("n1", dt.date(2026, 11, 2), None, None, None, None) == (
        "Node n1 on 2026-11-02: unlike the rest of the fleet; a lemon-node candidate to drain "
        "and test"
    )
