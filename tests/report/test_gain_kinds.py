"""What a recommendation's gain counts (gain_kind) and the order recommendations are shown in
are defined once, in the recommendations_latest view, and the weekly report and the dashboard
read them from it: the same rows give the same kinds in the same order on both."""

from __future__ import annotations

import re

import sql
from tests.dashboard.factories import make_recommendation
from tests.marts.rows import land
from warehouse import queries
from warehouse.connection import connect


def test_the_kind_to_gain_kind_mapping_is_written_once():
    mapping = re.compile(r"WHEN\s+'gpu_cap'\s+THEN\s+'shifted'")
    holders = [name for name in sql.names() if mapping.search(sql.load(name))]
    assert holders == ["views/recommendations_latest"]
    for reader in ("report/recommendations_weekly", "dashboard/recommendation_list"):
        assert "FROM recommendations_latest" in sql.load(reader)


def test_report_and_dashboard_agree_on_gain_kinds_and_order(tmp_path):
    land(
        tmp_path,
        "recommendations",
        [
            make_recommendation("r1", gain=5.0, created_h=1),
            make_recommendation("r1", gain=50.0, created_h=9),  # the newer version wins
            make_recommendation("r2", kind="gpu_cap", gain=20.0),  # stored before gain_kind
            make_recommendation("r4", kind="time_limit", gain=500.0)
            | {"evidence": '{"gain_kind": "backfill"}'},
            make_recommendation("r5", kind="drain_node", gain=1.0),
            make_recommendation("r6", kind="power_cap") | {"expected_gain_gpu_h": None},  # last
            make_recommendation("r7", kind="mig_packing", gain=8.0),
        ],
    )
    expected = [
        ("r5", "failures_avoided"),  # nodes to drain first
        ("r1", "saved"),  # then GPU-hours saved, largest first
        ("r7", "saved"),
        ("r4", "backfill"),  # then gains that are not savings
        ("r2", "shifted"),
        ("r6", None),
    ]
    with connect(tmp_path) as con:
        week = {"week_start_e": 0.0, "week_end_e": 4e9}
        report = queries.run(con, "report/recommendations_weekly", cluster="sim", **week)
        board = queries.run(con, "dashboard/recommendation_list", cluster="sim", needle="")
    assert report.select("rec_id", "gain_kind").rows() == expected
    assert board.select("rec_id", "gain_kind").rows() == expected
