"""Land a run's recommendations in the lake: each cluster's current advice, one row per rec_id.

A recommendation made again keeps its id and the `created_ts` of its first appearance (its
figures are updated); one the run no longer makes is removed, so the table holds the advice
that the latest replay supports rather than a history. Each cluster is rewritten atomically.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from warehouse import layout
from warehouse.lake import Lake
from warehouse.schema import TABLES
from warehouse.writer import conform, replace_partitions

__all__ = ["read_recommendations", "write_recommendations"]

SCHEMA: pa.Schema = TABLES["recommendations"].schema


def read_recommendations(lake: Lake, cluster: str | None = None) -> pa.Table:
    """Every recommendation stored in the lake (of `cluster` when given)."""
    parts = []
    for path in lake.table_files("recommendations"):
        if cluster is not None and f"cluster={layout.safe_name(cluster)}" not in path.parts:
            continue
        parts.append(pq.read_table(path).select(SCHEMA.names).cast(SCHEMA))
    return pa.concat_tables(parts) if parts else SCHEMA.empty_table()


def write_recommendations(lake: Lake, recs: pa.Table, clusters: Iterable[str] | None = None) -> int:
    """Make the stored recommendations of each cluster those of `recs`; return the rows stored.

    `clusters` names the clusters the run replayed (default: those in `recs`); a cluster in it
    without recommendations this run has its stored ones removed.
    """
    recs = conform(TABLES["recommendations"], recs)
    covered = set(recs.column("cluster").to_pylist()) | set(clusters or ())
    stored_rows = 0
    for cluster in sorted(covered):
        incoming = recs.filter(pc.equal(recs.column("cluster"), cluster))
        stored = read_recommendations(lake, cluster)
        first = dict(
            zip(
                stored.column("rec_id").to_pylist(),
                stored.column("created_ts").to_pylist(),
                strict=True,
            )
        )
        ids = incoming.column("rec_id").to_pylist()
        created = [
            first.get(i, ts)
            for i, ts in zip(ids, incoming.column("created_ts").to_pylist(), strict=True)
        ]
        incoming = incoming.set_column(
            SCHEMA.get_field_index("created_ts"),
            SCHEMA.field("created_ts"),
            pa.array(created, SCHEMA.field("created_ts").type),
        )
        if incoming.num_rows:
            replace_partitions(lake.root, "recommendations", incoming, cluster, batch_id="recs")
        else:
            base = lake.table_dir("recommendations") / (f"cluster={layout.safe_name(cluster)}")
            for path in lake.table_files("recommendations"):
                if base in path.parents:
                    path.unlink()
        stored_rows += incoming.num_rows
    return stored_rows
