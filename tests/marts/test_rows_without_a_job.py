"""Rows of another tool's `jobs` and `job_gpus` files without a job id (the contract requires
one; the project's writer refuses them) name no job and own no sample: the marts are those of
the lake without them, where such a row made `attribute` fail with a traceback."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.marts import rows as r
from warehouse.schema import TABLES


def _put(root: Path, table: str, rows: list[dict]) -> None:
    """`rows` written as another tool writes them (nulls where the contract allows none)."""
    schema = pa.schema([field.with_nullable(True) for field in TABLES[table].schema])
    folder = root / table / f"cluster={r.CLUSTER}" / f"date={r.T0.date()}"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), folder / "other.parquet")


def test_rows_without_a_job_id_name_no_job_and_own_no_sample(tmp_path):
    samples = r.samples(range(0, 600, 30), gpu_index=0, engine_active=0.5)
    jobs = [r.job("100", 0, 600)]
    job_gpus = [r.job_gpu("100", 0, 300)]
    # a job record and an allocation of GPU 0 without their id, the allocation over 300-600 s
    _put(tmp_path / "broken", "jobs", [r.job("100", 0, 600) | {"job_id": None}])
    _put(tmp_path / "broken", "job_gpus", [r.job_gpu("100", 300, 600) | {"job_id": None}])
    r.build_lake(tmp_path / "broken", samples=samples, jobs=jobs, job_gpus=job_gpus)
    r.build_lake(tmp_path / "clean", samples=samples, jobs=jobs, job_gpus=job_gpus)

    got, want = r.marts_by_key(tmp_path / "broken"), r.marts_by_key(tmp_path / "clean")
    for mart, frame in want.items():
        assert got[mart].equals(frame), mart
    assert got["job_usage"]["job_id"].to_list() == ["100"]
