"""Building the marts twice changes nothing the second time; raw files are never rewritten."""

from __future__ import annotations

import duckdb
import polars as pl
from polars.testing import assert_frame_equal

from tests.marts import rows as r
from warehouse import writer
from warehouse.attribution import AttributionConfig, attribute, build_marts
from warehouse.connection import WarehouseConfig, connect, open_engine, register_table
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


def _update(root) -> tuple[list[str], list[str]]:
    """Bring the marts up to date as `gpuledger attribute` does (no connection over the whole
    lake, app.pipeline.round); return the days built whole and the days whose tail was."""
    result = attribute(None, root, AttributionConfig())
    return (
        [day.isoformat() for _, day in result.days.rebuilt],
        [day.isoformat() for _, day in result.days.tails],
    )


def _raw_bytes(root) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for table in ("gpu_samples", "job_gpus")
        for p in sorted((root / table).rglob("*.parquet"))
    }


def _buckets(root) -> duckdb.DuckDBPyConnection:
    """A connection with the one view read here: gpu_job_buckets (as `connect` makes it)."""
    con = open_engine(WarehouseConfig(root))
    register_table(con, root, "gpu_job_buckets")
    return con


def _owners(root) -> list[tuple]:
    con = _buckets(root)
    return con.sql(
        "SELECT bucket, job_id, observed_s FROM gpu_job_buckets ORDER BY bucket, job_id"
    ).fetchall()


def test_attributing_twice_builds_nothing_the_second_time_and_never_touches_raw_files(tmp_path):
    rows = r.mixed_lake()
    r.land(tmp_path, "gpu_samples", rows["samples"])
    r.land(tmp_path, "job_gpus", rows["job_gpus"])
    raw = _raw_bytes(tmp_path)
    assert not any(row.get("job_id") for row in rows["samples"])  # owners come from job_gpus

    assert _update(tmp_path) == (["2024-03-01"], [])  # one cluster, one day
    owners = _owners(tmp_path)
    assert {job for _, job, _ in owners} >= {row["job_id"] for row in rows["job_gpus"]}
    assert _update(tmp_path) == ([], [])  # nothing changed: nothing built
    assert _owners(tmp_path) == owners
    assert _raw_bytes(tmp_path) == raw


def test_a_late_allocation_rebuilds_the_days_it_covers_and_no_other(tmp_path):
    day = 86_400
    r.land(tmp_path, "gpu_samples", r.samples([*range(0, 300, 30), *range(day, day + 300, 30)]))
    r.land(tmp_path, "job_gpus", [r.job_gpu("j1", 0, 90)], batch_id="early")
    assert _update(tmp_path) == (["2024-03-01", "2024-03-02"], [])
    raw = _raw_bytes(tmp_path)

    # The scheduler reports a job on the second day later: only that day is built again.
    r.land(tmp_path, "job_gpus", [r.job_gpu("j2", day + 150, None)], batch_id="late")
    assert _update(tmp_path) == (["2024-03-02"], [])
    assert _owned_samples(tmp_path, "j2") == 5  # 150 … 270: the job is still running
    assert _update(tmp_path) == ([], [])

    # Re-landing the same scheduler window changes its file, not the allocations: nothing.
    writer.write_batch(
        tmp_path, "job_gpus", r.table("job_gpus", [r.job_gpu("j2", day + 150, None)]), "late"
    )
    assert _update(tmp_path) == ([], [])
    # The job's end lands: only the day it ends on is built again.
    writer.write_batch(
        tmp_path, "job_gpus", r.table("job_gpus", [r.job_gpu("j2", day + 150, day + 240)]), "late"
    )
    assert _update(tmp_path) == (["2024-03-02"], [])
    assert _owned_samples(tmp_path, "j2") == 3  # 150, 180, 210
    assert _raw_bytes(tmp_path) != raw  # job_gpus landed again; the sample files are as they were
    assert {k: v for k, v in _raw_bytes(tmp_path).items() if k.startswith("gpu_samples")} == {
        k: v for k, v in raw.items() if k.startswith("gpu_samples")
    }


def test_an_end_landing_just_after_midnight_rebuilds_the_day_before_too(tmp_path):
    # the day before's last sample stood, as built while the job ran, for its whole step into
    # the new day: an end 10 s after midnight left it there (observed 90 s of 70 held) where a
    # build from scratch stops it at the end
    day = 86_400
    r.land(tmp_path, "gpu_samples", r.samples([day - 60, day - 30, day + 30, day + 60]))
    r.land(tmp_path, "job_gpus", [r.job_gpu("j1", day - 60, None)], batch_id="gpus")
    assert _update(tmp_path) == (["2024-03-01", "2024-03-02"], [])

    r.land(tmp_path, "job_gpus", [r.job_gpu("j1", day - 60, day + 10)], batch_id="gpus")
    assert _update(tmp_path) == (["2024-03-01", "2024-03-02"], [])
    [(observed,)] = (
        _buckets(tmp_path)
        .sql("SELECT sum(observed_s) FROM gpu_job_buckets WHERE job_id = 'j1'")
        .fetchall()
    )
    assert observed == 70.0  # 30 + 30 + 10: as a build from scratch counts it


def _owned_samples(root, job_id: str) -> int:
    [(n,)] = (
        _buckets(root)
        .sql(
            "SELECT coalesce(sum(samples), 0) FROM gpu_job_buckets WHERE job_id = $j",
            params={"j": job_id},
        )
        .fetchall()
    )
    return int(n)
