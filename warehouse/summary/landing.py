"""Landing the summary marts' rows: a whole mart cluster by cluster, only the date partitions
whose rows changed, or one-row-per-job marts with the jobs in scope replaced.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from warehouse import layout
from warehouse.arrow_arrays import dates, empty_table, int64s, read_parquet, string_scalar
from warehouse.schema import MARTS
from warehouse.summary.scope import _folder_keys
from warehouse.writer import replace_partition, replace_partitions

if TYPE_CHECKING:
    pass


def land_mart(root: Path, mart: str, result: pa.Table) -> int:
    """Replace every partition of `mart` by `result`, cluster by cluster; return its rows.

    A cluster's folder that `result` has no rows of (its data removed from the lake, or all of
    it gone from what the mart reads) goes too: the whole build left it, so a removed cluster's
    figures stayed in the mart, and `attribute --force` said 0 rows beside them."""
    schema = MARTS[mart].schema
    table = result.select(schema.names).cast(schema)
    clusters = pc.unique(table.column("cluster")).to_pylist()
    for cluster in clusters:
        rows = table.filter(pc.equal(table.column("cluster"), string_scalar(cluster)))
        replace_partitions(root, mart, rows, cluster)
    kept = {layout.safe_name(c) for c in clusters if c is not None}
    for path in layout.table_files(root, mart):
        folder = _cluster_folder(layout.table_dir(root, mart), path)
        if folder is not None and folder not in kept:
            path.unlink(missing_ok=True)
    return int(table.num_rows)


def _cluster_folder(base: Path, path: Path) -> str | None:
    """The `cluster=` folder name right under the mart's folder that holds `path` (None: a
    file outside the layout, another tool's, left as it is)."""
    parts = path.relative_to(base).parts
    key, sep, value = parts[0].partition("=") if len(parts) > 1 else ("", "", "")
    return value if sep and key == "cluster" else None


def _day_column(mart: str, table: pa.Table) -> pa.ChunkedArray:
    """The UTC day of each row of `mart` (a mart with a date column)."""
    column = MARTS[mart].date_column
    assert column is not None
    values = table.column(column)
    if not pa.types.is_date32(values.type):
        values = pc.cast(pc.cast(values, pa.timestamp("ms", tz="UTC")), pa.date32())
    return values


def _partition_day(mart: str, table: pa.Table) -> list[dt.date | None]:
    if MARTS[mart].date_column is None:
        return [None] * table.num_rows
    return list(_day_column(mart, table).to_pylist())


def _land_changed(
    root: Path, mart: str, result: pa.Table, partitions: set[tuple[str, dt.date]] | None = None
) -> None:
    """Write the date partitions of `mart` whose rows differ from `result`'s; remove those
    `result` has no rows for. With `partitions` (cluster, day), only those are considered."""
    schema = MARTS[mart].schema
    table = result.select(schema.names).cast(schema)
    if partitions is not None and table.num_rows and MARTS[mart].date_column is not None:
        # only the rows of those days are looked at, one by one below: the result of a mart
        # whose SQL reads all days (cluster_occupancy's bucket grid) is cut first, at once
        days = dates(sorted({day for _, day in partitions}))
        table = table.filter(pc.is_in(_day_column(mart, table), days))  # a null day: false
    groups: dict[tuple[str, dt.date], list[int]] = {}
    clusters = table.column("cluster").to_pylist()
    for row, (cluster, day) in enumerate(zip(clusters, _partition_day(mart, table), strict=True)):
        if day is not None and (partitions is None or (cluster, day) in partitions):
            groups.setdefault((cluster, day), []).append(row)
    folders = _folder_keys(groups)
    considered = None if partitions is None else _folder_keys(partitions)
    present: set[tuple[str, dt.date]] = set()
    if considered is None:
        for path in layout.table_files(root, mart):
            if (found := layout.partition_key(path)) is not None:
                present.add(found)
    else:  # only those partitions' folders: not a listing of the mart's whole history
        for key in considered:
            present.update({key} if layout.partition_files(root, mart, key) else set())
    for folder_key in sorted(present - folders):
        if considered is None or folder_key in considered:
            replace_partition(root, mart, empty_table(schema), folder_key[0], folder_key[1])
    for (cluster, day), rows in sorted(groups.items()):
        part = table.take(int64s(rows))
        folder = layout.partition_dir(root, mart, cluster, day)
        old = [read_parquet(p).select(schema.names) for p in sorted(folder.glob("*.parquet"))]
        if old and pa.concat_tables(old).cast(schema).equals(part):
            continue
        replace_partition(root, mart, part, cluster, day)


def _merge_jobs(root: Path, mart: str, new: pa.Table, scope: pa.Table) -> pa.Table:
    """`mart` (one row per job) with the rows of the jobs in `scope` replaced by `new`'s,
    landed for the clusters in scope; return the whole merged mart."""
    schema = MARTS[mart].schema
    old_files = layout.table_files(root, mart)
    old = [read_parquet(p, columns=schema.names).cast(schema) for p in old_files]
    fresh = new.select(schema.names).cast(schema)
    parts = [fresh]
    clusters = set(scope.column("cluster").to_pylist())
    for table in old:
        for cluster in pc.unique(table.column("cluster")).to_pylist():
            rows = table.filter(pc.equal(table.column("cluster"), string_scalar(cluster)))
            if cluster in clusters:
                in_scope = scope.filter(pc.equal(scope.column("cluster"), string_scalar(cluster)))
                rows = rows.filter(pc.invert(pc.is_in(rows.column("job_id"), in_scope["job_id"])))
            parts.append(rows)
    merged = pa.concat_tables(parts).sort_by([("cluster", "ascending"), ("job_id", "ascending")])
    for cluster in sorted(clusters):
        replace_partitions(
            root,
            mart,
            merged.filter(pc.equal(merged.column("cluster"), string_scalar(cluster))),
            cluster,
        )
    return merged
