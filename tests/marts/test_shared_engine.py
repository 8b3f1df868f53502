"""One engine for an attribution pass: the per-day pass builds in the engine `attribute` opens,
and `clear_engine` leaves it as bare as a new one for the summary marts' update."""

from __future__ import annotations

from pathlib import Path

from polars.testing import assert_frame_equal

from tests.marts import rows as r
from warehouse.attribution import AttributionConfig, attribute
from warehouse.connection import WarehouseConfig, connect, open_engine
from warehouse.partitions import build_sample_marts, clear_engine

_CATALOG = (
    "SELECT table_name FROM duckdb_tables() WHERE NOT internal "
    "UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal"
)


def _land(root: Path) -> None:
    for name, table_rows in r.mixed_lake().items():
        r.land(root, {"samples": "gpu_samples"}.get(name, name), table_rows)


def test_the_per_day_pass_leaves_its_tables_in_a_given_engine_and_clear_engine_drops_them(
    tmp_path: Path,
) -> None:
    _land(tmp_path)
    engine = open_engine(WarehouseConfig(root=tmp_path))
    try:
        report = build_sample_marts(
            WarehouseConfig(root=tmp_path), AttributionConfig().values(), engine=engine
        )
        assert report.rebuilt
        left = {name for (name,) in engine.execute(_CATALOG).fetchall()}
        assert "job_gpus" in left  # the allocations it held, still there for the caller
        clear_engine(engine)
        assert engine.execute(_CATALOG).fetchall() == []
    finally:
        engine.close()


def test_attribute_without_a_connection_builds_the_marts_of_one_with_a_connection(
    tmp_path: Path,
) -> None:
    """The summary marts built whole in the shared engine equal those built in a caller's
    connection (where the per-day pass's leftovers never were)."""
    alone, given = tmp_path / "alone", tmp_path / "given"
    for root in (alone, given):
        _land(root)
    attribute(None, alone, AttributionConfig())
    con = connect(given)
    try:
        attribute(con, given, AttributionConfig())
    finally:
        con.close()
    got, expected = r.marts_by_key(alone), r.marts_by_key(given)
    assert got.keys() == expected.keys()
    for name, frame in expected.items():
        assert frame.height > 0, name  # every mart has rows to compare
        assert_frame_equal(got[name], frame, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
