"""One waste detector per job: the most specific one is kept, other findings stay."""

from __future__ import annotations

import polars as pl

from detectors.rules.precedence import WASTE_PRECEDENCE, one_waste_detector


def frame(rows: list[tuple[str, str, str, str]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows, schema=["cluster", "detector", "subject_kind", "subject_id"], orient="row"
    )


def test_idle_comes_before_overallocated_and_other_findings_stay():
    found = one_waste_detector(
        frame(
            [
                ("c", "overallocated", "job", "1"),
                ("c", "idle_job", "job", "1"),
                ("c", "time_limit_excess", "job", "1"),
                ("c", "overallocated", "job", "2"),
                ("d", "idle_job", "job", "1"),  # another cluster's job 1
                ("c", "xid_hardware", "gpu", "GPU-1"),
            ]
        )
    )
    assert sorted(found.rows()) == [
        ("c", "idle_job", "job", "1"),
        ("c", "overallocated", "job", "2"),
        ("c", "time_limit_excess", "job", "1"),
        ("c", "xid_hardware", "gpu", "GPU-1"),
        ("d", "idle_job", "job", "1"),
    ]


def test_every_pair_keeps_the_earlier_detector():
    for i, first in enumerate(WASTE_PRECEDENCE):
        for later in WASTE_PRECEDENCE[i + 1 :]:
            found = one_waste_detector(frame([("c", later, "job", "1"), ("c", first, "job", "1")]))
            assert found["detector"].to_list() == [first]
