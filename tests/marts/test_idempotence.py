"""Building the marts, or re-attributing, twice changes nothing the second time."""

from __future__ import annotations

import polars as pl
from polars.testing import assert_frame_equal

from tests.marts import rows as r
from warehouse import writer
from warehouse.attribution import AttributionConfig, build_marts, reattribute
from warehouse.connection import connect
from warehouse.schema import MARTS


def snapshot(con) -> dict[str, pl.DataFrame]:
    """Every mart, in key order."""
    frames = {}
    for name, spec in MARTS.items():
        frame = con.table(name).pl()
        frames[name] = frame.sort(list(spec.key), nulls_last=True)
    return frames


def test_building_the_marts_twice_gives_the_same_marts(tmp_path):
    con = r.build_lake(tmp_path, **r.mixed_lake())
    first = snapshot(con)
    files = {name: sorted(p.name for p in (tmp_path / name).rglob("*.parquet")) for name in MARTS}

    counts = build_marts(con, tmp_path, AttributionConfig())

    second = snapshot(connect(tmp_path))
    assert counts == {name: frame.height for name, frame in first.items()}
    for name in MARTS:
        assert first[name].height > 0, name
        assert_frame_equal(second[name], first[name], check_exact=False, rel_tol=1e-12)
        assert sorted(p.name for p in (tmp_path / name).rglob("*.parquet")) == files[name]


def test_reattributing_twice_rewrites_nothing_the_second_time(tmp_path):
    rows = r.mixed_lake()
    r.land(tmp_path, "gpu_samples", rows["samples"])
    r.land(tmp_path, "job_gpus", rows["job_gpus"])
    con = connect(tmp_path)

    checked, rewritten, changed = reattribute(con, tmp_path)
    assert checked == rewritten == 1  # one sample file (one cluster, one day)
    assert changed > 0
    owners = con.sql("SELECT ts, node, gpu_index, job_id FROM gpu_samples ORDER BY ALL").pl()

    assert reattribute(con, tmp_path) == (0, 0, 0)  # nothing changed: nothing checked
    assert reattribute(connect(tmp_path), tmp_path) == (0, 0, 0)
    assert_frame_equal(
        con.sql("SELECT ts, node, gpu_index, job_id FROM gpu_samples ORDER BY ALL").pl(), owners
    )


def test_a_late_allocation_is_picked_up_and_then_left_alone(tmp_path):
    r.land(tmp_path, "gpu_samples", r.samples(range(0, 300, 30)))
    r.land(tmp_path, "job_gpus", [r.job_gpu("j1", 0, 90)], batch_id="early")
    con = connect(tmp_path)
    assert reattribute(con, tmp_path) == (1, 1, 3)  # 0, 30, 60

    # The scheduler reports a second job later: the file is checked again, 3 more samples move.
    r.land(tmp_path, "job_gpus", [r.job_gpu("j2", 150, 240)], batch_id="late")
    assert reattribute(con, tmp_path) == (1, 1, 3)  # 150, 180, 210
    assert reattribute(con, tmp_path) == (0, 0, 0)

    # Re-landing the same scheduler window changes the file's mtime, not its owners.
    writer.write_batch(
        tmp_path, "job_gpus", r.table("job_gpus", [r.job_gpu("j2", 150, 240)]), "late"
    )
    assert reattribute(con, tmp_path) == (1, 0, 0)
