"""The dashboard's data layer keeps working while the lake changes under it."""

from __future__ import annotations

import shutil
from pathlib import Path

from app import data
from warehouse import layout


def test_a_replaced_file_reopens_the_lake_instead_of_failing(tmp_path: Path, plain_lake: Path):
    lake = tmp_path / "lake"
    shutil.copytree(plain_lake, lake)
    root = str(lake)
    data.clear_caches()
    before = data.extent(root)

    # what compaction or a re-landed batch does: the file the views were opened on goes away
    for path in layout.table_files(lake, "cluster_occupancy"):
        path.rename(path.with_name("renamed-" + path.name))
    data.clear_caches()  # forget the cached frame, so the next call queries the lake
    data._connection(root)  # a connection opened on the old file names ...
    for path in layout.table_files(lake, "cluster_occupancy"):
        path.rename(path.with_name(path.name.replace("renamed-", "moved-")))

    assert data.extent(root).equals(before)  # ... is reopened, not an error


def test_node_health_sums_each_nodes_gpus_worst_first():
    import datetime as dt

    import polars as pl

    t = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
    gpus = pl.DataFrame(
        {
            "node": ["n1", "n1", "n2"],
            "xids": [2, 1, 5],
            "fatal_xids": [0, 0, 1],
            "ecc_dbe": [1, 0, 0],
            "row_remap_failures": [0, 0, 0],
            "throttle_events": [3, 4, 0],
            "offline_events": [0, 1, 0],
            "last_event_ts": [t, t + dt.timedelta(hours=1), t],
        }
    )

    nodes = data.node_health(gpus)

    assert nodes.rows() == [
        ("n2", 1, 5, 1, 0, 0, 0, 0, t),  # a fatal XID ranks first
        ("n1", 2, 3, 0, 1, 0, 7, 1, t + dt.timedelta(hours=1)),
    ]
