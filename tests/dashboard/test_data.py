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
