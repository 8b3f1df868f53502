"""register_files remembers each file set's columns (warehouse/file_columns.py): a view over
files seen before is bound once, and reads what a view bound from scratch reads; a file
rewritten since is bound anew."""

from __future__ import annotations

import datetime as dt

import pyarrow.parquet as pq

from warehouse import file_columns, layout, writer
from warehouse.connection import connect


def _view(lake, table: str):
    with connect(lake) as con:
        relation = con.table(table)
        return list(zip(relation.columns, map(str, relation.types), strict=True)), sorted(
            relation.fetchall(), key=repr
        )


def test_a_view_over_files_seen_before_reads_what_a_fresh_binding_reads(lake, make_samples, t0):
    writer.write_batch(lake, "gpu_samples", make_samples([t0], node="g001"), "w1")
    writer.write_batch(lake, "gpu_samples", make_samples([t0], node="g002"), "w2")
    key = file_columns.files_key(layout.table_files(lake, "gpu_samples"))
    file_columns._COLUMNS.pop(key, None)  # as in a new process

    first = _view(lake, "gpu_samples")
    assert file_columns.columns(key) is not None  # remembered by the first binding
    again = _view(lake, "gpu_samples")

    assert again == first
    assert len(first[1]) == 2


def test_a_file_rewritten_since_is_bound_anew(lake, make_samples, t0):
    writer.write_batch(lake, "gpu_samples", make_samples([t0], node="g001"), "w1")
    (path,) = layout.table_files(lake, "gpu_samples")
    with connect(lake) as con:
        assert con.sql("SELECT gpu_uuid FROM gpu_samples").fetchall() == [("GPU-g001-0",)]

    # another tool writes the same path again, without gpu_uuid and with a row more
    theirs = make_samples([t0, t0 + dt.timedelta(minutes=1)], node="g001").drop_columns(
        ["gpu_uuid"]
    )
    pq.write_table(theirs, path)

    with connect(lake) as con:
        got = con.sql("SELECT gpu_uuid FROM gpu_samples").fetchall()
    assert got == [(None,), (None,)]
