"""Landing batches: partitioned by cluster and UTC date, atomic, idempotent, not world-readable."""

from __future__ import annotations

import datetime as dt
import os
import stat
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.infra.examples import examples
from warehouse import writer
from warehouse.arrow_arrays import TIMESTAMP
from warehouse.connection import connect

UTC = dt.UTC


def count(root: Path, view: str) -> int:
    with connect(root) as con:
        [(n,)] = con.sql(f"SELECT count(*) FROM {view}").fetchall()
    return n


def relative(root: Path, paths: list[Path]) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in paths)


def test_same_batch_id_twice_gives_the_same_rows(lake, make_samples, t0):
    batch = make_samples([t0 + dt.timedelta(seconds=30 * i) for i in range(5)])

    writer.write_batch(lake, "gpu_samples", batch, "prom-della-2024-03-01T12")
    writer.write_batch(lake, "gpu_samples", batch, "prom-della-2024-03-01T12")

    assert count(lake, "gpu_samples") == 5


def _column_encodings(path: Path) -> dict[str, set[str]]:
    """Each column's encodings in every row group of the Parquet file at `path`."""
    meta = pq.ParquetFile(path).metadata
    found: dict[str, set[str]] = {}
    for group in range(meta.num_row_groups):
        for i in range(meta.num_columns):
            column = meta.row_group(group).column(i)
            found.setdefault(column.path_in_schema, set()).update(column.encodings)
    return found


def test_raw_files_keep_dictionaries_and_day_partitions_split_their_floats(lake, make_samples, t0):
    """Raw files (and the summary marts): a dictionary on every column, so that a damaged data
    page fails to decode (tests/warehouse/test_damaged_pages.py); the sample-level marts' day
    partitions: floats byte-stream-split, the rest dictionaries. Both read back as landed."""
    batch = make_samples([t0 + dt.timedelta(seconds=30 * i) for i in range(50)])
    [raw] = writer.write_batch(lake, "gpu_samples", batch, "b1")
    mart = pa.table(
        {
            "cluster": ["della"] * 3,
            "date": [t0.date()] * 3,
            "device": ["GPU-1"] * 3,
            "job_id": ["1", "2", "3"],
            "observed_s": [1.5, 2.25, 0.0],
        }
    )
    written = writer.replace_partition(
        lake,
        "job_gpu_daily",
        writer.conform(writer.spec("job_gpu_daily"), mart),
        "della",
        t0.date(),
    )
    assert written == 3
    [built] = (lake / "job_gpu_daily").rglob("*.parquet")
    for path, derived in ((raw, False), (built, True)):
        found = _column_encodings(path)
        for field in pq.read_schema(path):
            if pa.types.is_boolean(field.type):
                continue  # Parquet has no dictionary of booleans: they are bit-packed
            split = derived and pa.types.is_floating(field.type)
            expected = "BYTE_STREAM_SPLIT" if split else "RLE_DICTIONARY"
            assert expected in found[field.name], (path.name, field.name, found[field.name])
    back = pq.read_table(raw).drop_columns([writer.BATCH_COLUMN])
    assert back.equals(writer.conform(writer.spec("gpu_samples"), batch))
    rows = pq.read_table(built).select(["job_id", "observed_s"]).to_pylist()
    assert rows == [
        {"job_id": "1", "observed_s": 1.5},
        {"job_id": "2", "observed_s": 2.25},
        {"job_id": "3", "observed_s": 0.0},
    ]


def test_relanding_a_batch_replaces_its_rows(lake, make_samples, t0):
    times = [t0 + dt.timedelta(seconds=30 * i) for i in range(3)]
    writer.write_batch(lake, "gpu_samples", make_samples(times, power_w=100.0), "w1")

    writer.write_batch(lake, "gpu_samples", make_samples(times, power_w=250.0), "w1")

    with connect(lake) as con:
        rows = con.sql("SELECT DISTINCT power_w FROM gpu_samples").fetchall()
    assert rows == [(250.0,)]


def test_a_different_batch_id_adds_rows(lake, make_samples, t0):
    writer.write_batch(lake, "gpu_samples", make_samples([t0, t0]), "w1")
    writer.write_batch(lake, "gpu_samples", make_samples([t0], node="g002"), "w2")

    assert count(lake, "gpu_samples") == 3


def test_rows_are_split_by_cluster_and_utc_date(lake, make_samples):
    before_midnight = dt.datetime(2024, 3, 1, 23, 59, 59, 999_000, tzinfo=UTC)
    midnight = dt.datetime(2024, 3, 2, tzinfo=UTC)
    batch = pa.concat_tables(
        [
            make_samples([before_midnight, midnight, midnight]),
            make_samples([midnight], cluster="tiger"),
        ]
    )

    written = writer.write_batch(lake, "gpu_samples", batch, "w1")

    expected = [
        "gpu_samples/cluster=della/date=2024-03-01/w1.parquet",
        "gpu_samples/cluster=della/date=2024-03-02/w1.parquet",
        "gpu_samples/cluster=tiger/date=2024-03-02/w1.parquet",
    ]
    assert relative(lake, written) == expected
    landed = [p for p in lake.rglob("*") if p.is_file() and "_state" not in p.parts]
    assert relative(lake, landed) == expected  # and nothing else (the table lock is state)
    rows = {p.relative_to(lake).parent.as_posix(): pq.read_table(p).num_rows for p in written}
    assert rows == {
        "gpu_samples/cluster=della/date=2024-03-01": 1,
        "gpu_samples/cluster=della/date=2024-03-02": 2,
        "gpu_samples/cluster=tiger/date=2024-03-02": 1,
    }
    day_one = pq.read_table(lake / expected[0])
    assert day_one.column("ts").to_pylist() == [before_midnight]


def test_batch_ids_and_cluster_names_become_safe_file_names(lake, make_samples, t0):
    [path] = writer.write_batch(
        lake, "gpu_samples", make_samples([t0], cluster="../etc"), "window 1/2"
    )

    assert lake in path.parents
    assert path.relative_to(lake).as_posix() == (
        "gpu_samples/cluster=etc/date=2024-03-01/window_1_2.parquet"
    )


def test_jobs_without_submit_time_are_placed_by_updated_time(lake):
    batch = pa.table(
        {
            "cluster": ["della"],
            "job_id": ["42"],
            "submit_ts": pa.array([None], TIMESTAMP),
            "source": ["slurm"],
            "updated_ts": pa.array([dt.datetime(2024, 5, 6, 7, tzinfo=UTC)], TIMESTAMP),
        }
    )

    [path] = writer.write_batch(lake, "jobs", batch, "sacct")

    assert path.parent.name == "date=2024-05-06"


def test_marts_without_date_column_are_partitioned_by_cluster_only(lake):
    batch = pa.table({"cluster": ["della", "tiger"], "job_id": ["1", "2"]})

    written = writer.write_batch(lake, "job_usage", batch, "mart")

    assert relative(lake, written) == [
        "job_usage/cluster=della/mart.parquet",
        "job_usage/cluster=tiger/mart.parquet",
    ]


def test_no_temporary_files_are_left_behind(lake, make_samples, t0):
    for i in range(3):
        writer.write_batch(lake, "gpu_samples", make_samples([t0, t0 + dt.timedelta(days=1)]), "w")
        writer.write_batch(lake, "gpu_samples", make_samples([t0]), f"w{i}")
    writer.compact(lake, "gpu_samples")

    leftovers = [p for p in lake.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]
    assert leftovers == []


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(
    lake, make_samples, t0, monkeypatch
):
    [path] = writer.write_batch(lake, "gpu_samples", make_samples([t0]), "w1")
    before = path.read_bytes()

    class HalfWriter:  # writes a few bytes, then the disk is full
        def __init__(self, where, schema, **kwargs):
            self.where = where

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write_table(self, table, row_group_size=None):
            self.where.write(b"PAR1 and then the disk filled up")
            raise OSError("No space left on device")

    monkeypatch.setattr(writer.pq, "ParquetWriter", HalfWriter)
    from warehouse.errors import NotWritable

    # one clear error naming the file, not a traceback of the write
    with pytest.raises(NotWritable, match="cannot write .*w1.parquet.*No space left"):
        writer.write_batch(lake, "gpu_samples", make_samples([t0, t0]), "w1")

    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["w1.parquet"]


def test_files_and_folders_are_not_world_readable(lake, make_samples, t0):
    old = os.umask(0o000)  # even under a permissive umask
    try:
        writer.write_batch(lake, "gpu_samples", make_samples([t0, t0 + dt.timedelta(days=1)]), "w1")
        writer.write_batch(lake, "gpu_samples", make_samples([t0]), "w2")
        writer.compact(lake, "gpu_samples")
        with connect(lake):  # creates <root>/_state
            pass
    finally:
        os.umask(old)

    entries = [lake, *lake.rglob("*")]
    assert sum(p.is_file() and "_state" not in p.parts for p in entries) == 2  # one per date
    assert (lake / "_state").is_dir()
    loose = {
        p.relative_to(lake.parent).as_posix(): oct(stat.S_IMODE(p.stat().st_mode))
        for p in entries
        if p.stat().st_mode & 0o007
    }
    assert loose == {}


_instants = st.datetimes(
    min_value=dt.datetime(2023, 12, 30), max_value=dt.datetime(2024, 1, 2), timezones=st.just(UTC)
).map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))


@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(times=st.lists(_instants, min_size=1, max_size=20), relandings=st.integers(1, 3))
def test_every_row_lands_once_in_the_partition_of_its_utc_date(make_samples, times, relandings):
    batch = make_samples(times)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for _ in range(relandings):
            written = writer.write_batch(root, "gpu_samples", batch, "w")

        assert sum(pq.read_table(p).num_rows for p in written) == len(times)
        for path in written:
            day = dt.date.fromisoformat(path.parent.name.removeprefix("date="))
            stamps = pq.read_table(path).column("ts").to_pylist()
            assert {t.astimezone(UTC).date() for t in stamps} == {day}
        files = [p.name for p in root.rglob("*") if p.is_file() and "_state" not in p.parts]
        assert sorted(files) == ["w.parquet"] * len(written)


def test_a_file_that_cannot_be_written_is_one_clear_error_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    from warehouse.errors import NotWritable

    # a name the file system refuses (too long for the temporary file): a real OSError
    path = tmp_path / ("x" * 240 + ".parquet")
    with pytest.raises(NotWritable, match="cannot write .*expected a folder this user can write"):
        writer.atomic_write(pa.table({"a": [1]}), path, None)
    assert list(tmp_path.iterdir()) == []


def test_retracting_an_import_leaves_only_what_it_landed_again(lake, make_samples, t0):
    # an updated import lands fewer days and batches than the last: the last one's other rows
    # go, also from a compacted file, and other batches' rows stay
    day = dt.timedelta(days=1)
    writer.write_batch(lake, "gpu_samples", make_samples([t0, t0 + day]), "imp-a-util-0")
    writer.write_batch(lake, "gpu_samples", make_samples([t0 + 2 * day]), "imp-a-util-1")
    writer.write_batch(lake, "gpu_samples", make_samples([t0 + day]), "prom-a")
    writer.compact(lake, "gpu_samples")  # day 2: one file holding imp-a-util-0 and prom-a
    landed = writer.write_batch(lake, "gpu_samples", make_samples([t0]), "imp-a-util-0")
    before = count(lake, "gpu_samples")

    changed = writer.retract_batches(lake, "gpu_samples", "della", "imp-a-", landed)

    assert changed == 2  # the compacted day and imp-a-util-1's file
    assert count(lake, "gpu_samples") == before - 2
    from warehouse import layout

    files = layout.table_files(lake, "gpu_samples")
    rows = sorted(
        (r["ts"], r["_batch"])
        for f in files
        for r in pq.read_table(f, columns=["ts", "_batch"]).to_pylist()
    )
    assert rows == [(t0, "imp-a-util-0"), (t0 + day, "prom-a")]


def test_a_batch_just_landed_is_kept_after_a_compaction_merged_its_file(lake, make_samples, t0):
    # a compaction between the import's landing and its retraction merged the new file away:
    # kept by path, the import's new rows went with the old
    landed = writer.write_batch(lake, "gpu_samples", make_samples([t0]), "imp-a-util-0")
    writer.write_batch(lake, "gpu_samples", make_samples([t0]), "prom-a")
    writer.compact(lake, "gpu_samples")
    assert not landed[0].exists()

    assert writer.retract_batches(lake, "gpu_samples", "della", "imp-a-", landed) == 0
    assert count(lake, "gpu_samples") == 2
