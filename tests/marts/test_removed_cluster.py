"""A whole build of the summary marts replaces them whole: a cluster whose data left the lake
leaves no rows behind (before, its partitions stayed, and `attribute --force` reported 0 rows
beside its old figures)."""

from __future__ import annotations

import shutil

from tests.marts import rows as r
from warehouse.attribution import AttributionConfig, build_marts
from warehouse.connection import connect
from warehouse.schema import MARTS

H = 3600.0


def _clusters(root, mart: str) -> set[str]:
    con = connect(root)
    try:
        return {c for (c,) in con.sql(f"SELECT DISTINCT cluster FROM {mart}").fetchall()}
    finally:
        con.close()


def test_a_cluster_removed_from_the_lake_leaves_no_rows_in_the_marts(tmp_path):
    other = {"cluster": "gone"}
    r.build_lake(
        tmp_path,
        samples=r.samples(range(0, int(H), 30), engine_active=0.5)
        + [row | other for row in r.samples(range(0, int(H), 30), engine_active=0.2)],
        jobs=[r.job("j1", 0, H), r.job("j2", 0, H) | other],
        job_gpus=[r.job_gpu("j1", 0, H), r.job_gpu("j2", 0, H) | other],
    )
    assert _clusters(tmp_path, "cluster_occupancy") == {r.CLUSTER, "gone"}
    for table in ("gpu_samples", "jobs", "job_gpus"):  # the operator drops the cluster
        shutil.rmtree(tmp_path / table / "cluster=gone")

    con = connect(tmp_path)
    build_marts(con, tmp_path, AttributionConfig())  # (as the next attribute would)
    con.close()

    for mart in MARTS:
        assert "gone" not in _clusters(tmp_path, mart), mart
    assert _clusters(tmp_path, "job_usage") == {r.CLUSTER}
