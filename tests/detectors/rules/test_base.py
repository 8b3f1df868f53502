"""Windows, anchors and threshold metadata shared by every rule."""

from __future__ import annotations

import datetime as dt

import polars as pl

from detectors.rules import FAMILIES
from detectors.rules.base import EPOCH, Window, as_of, period_anchor, threshold_docs
from detectors.rules.run import RULES
from warehouse import queries

UTC = dt.UTC


def test_period_anchor_is_the_start_of_the_period_holding_the_time():
    week = dt.timedelta(days=7)
    # 1970-01-01 was a Thursday: 7-day periods start on Thursdays at 00:00 UTC
    thursday = dt.datetime(2026, 11, 5, tzinfo=UTC)
    assert period_anchor(thursday, week) == thursday
    assert period_anchor(thursday + dt.timedelta(days=6, hours=23), week) == thursday
    assert period_anchor(thursday + week, week) == thursday + week
    assert period_anchor(EPOCH, week) == EPOCH


def test_as_of_is_the_latest_data_or_now_if_earlier():
    frame = pl.DataFrame(
        {
            "start_ts": [dt.datetime(2026, 1, 1, tzinfo=UTC), dt.datetime(2026, 1, 3, tzinfo=UTC)],
            "end_ts": [dt.datetime(2026, 1, 2, tzinfo=UTC), None],
        }
    )
    late = Window(now=dt.datetime(2026, 12, 1, tzinfo=UTC))
    early = Window(now=dt.datetime(2026, 1, 2, 12, tzinfo=UTC))
    assert as_of(frame, late, "start_ts", "end_ts") == dt.datetime(2026, 1, 3, tzinfo=UTC)
    assert as_of(frame, early, "start_ts", "end_ts") == early.now
    assert as_of(frame.clear(), late, "start_ts", "end_ts") == late.now


def test_every_rule_names_a_shipped_query_and_binds_exactly_its_parameters(tmp_path):
    from warehouse.connection import connect

    con = connect(tmp_path / "lake")
    from detectors.rules import RuleConfig

    window = Window(now=dt.datetime(2026, 1, 1, tzinfo=UTC))
    for rule in RULES:
        assert set(rule.params(RuleConfig(), window)) == queries.parameters(con, rule.query)


def test_every_threshold_says_which_way_is_stricter():
    for kind in FAMILIES.values():
        for name, _, _, stricter in threshold_docs(kind):
            assert stricter in ("up", "down", None), name


def test_a_rule_config_is_built_from_a_settings_mapping():
    import pytest

    from detectors.rules import RuleConfig, RuleConfigError, rule_config_from

    config = rule_config_from({"idle": {"idle_minutes": 30}, "efficiency": {"user_top_n": 5.0}})
    assert config.idle.idle_minutes == 30.0 and isinstance(config.idle.idle_minutes, float)
    assert config.efficiency.user_top_n == 5 and isinstance(config.efficiency.user_top_n, int)
    assert config.health == RuleConfig().health  # the rest keeps its defaults
    for bad, message in [
        ({"idel": {}}, "detect.idel: no such rule family"),
        ({"idle": {"idle_minute": 1}}, "detect.idle.idle_minute: no such threshold"),
        ({"idle": {"idle_minutes": "1h"}}, "detect.idle.idle_minutes: expected a number, got '1h'"),
        ({"efficiency": {"user_top_n": 2.5}}, "expected a whole number, got 2.5"),
    ]:
        with pytest.raises(RuleConfigError, match=message):
            rule_config_from(bad)
