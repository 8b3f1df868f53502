"""The recommender kinds a configuration names (`[recommend.<kind>]`, checked without loading a
recommender) are the ones that run, each reading its own thresholds."""

from __future__ import annotations

import dataclasses

from detectors.recommend import KIND_FIELDS, RecommendConfig
from detectors.recommend.run import KINDS


def test_the_kinds_that_run_are_the_configurable_ones_in_the_same_order():
    assert tuple(KINDS) == tuple(KIND_FIELDS)


def test_each_kind_reads_the_thresholds_its_table_sets():
    config = RecommendConfig()
    for kind, (_recommender, part) in KINDS.items():
        assert part(config) is getattr(config, KIND_FIELDS[kind]), kind
    # and every table of thresholds in RecommendConfig is some kind's
    tables = {
        f.name
        for f in dataclasses.fields(config)
        if dataclasses.is_dataclass(getattr(config, f.name))
    }
    assert tables == set(KIND_FIELDS.values())
