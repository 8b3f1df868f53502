"""Raw files are never rewritten: an external lake's bytes stay as its tool wrote them through
attribute, detect and a service round, and its marts equal those of the same rows landed with
their owners (the owners are decided in derived data, from the allocations)."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

from app.cli import cli
from app.pipeline import attribute, default_pipeline_config, detect
from collector.sim import SimConfig, simulate
from tests.marts import rows as r
from warehouse import layout
from warehouse.lake import Lake
from warehouse.schema import OWN_TABLES, RAW_TABLES
from warehouse.writer import BATCH_COLUMN

# what sources land; gpuledger's own outputs among the raw tables are detect's and evaluate's
COLLECTED = tuple(t for t in RAW_TABLES if t not in OWN_TABLES)


def external_copy(ours: Path, theirs: Path) -> None:
    """Every raw file of `ours` as another tool would write it into the layout: no `_batch`
    (so not gpuledger's to compact), other file names, and samples without any job_id."""
    for table in COLLECTED:
        for n, path in enumerate(layout.table_files(ours, table)):
            rows = pq.read_table(path)
            drop = [BATCH_COLUMN] + (["job_id", "hpc_job"] if table == "gpu_samples" else [])
            rows = rows.drop_columns([c for c in drop if c in rows.column_names])
            target = theirs / path.parent.relative_to(ours) / f"part-{n:05d}.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(rows, target)


def raw_digests(lake: Path) -> dict[str, str]:
    return {
        str(path.relative_to(lake)): hashlib.sha256(path.read_bytes()).hexdigest()
        for table in COLLECTED
        for path in layout.table_files(lake, table)
    }


@pytest.mark.slow
def test_an_external_lake_is_never_rewritten_and_gets_the_same_figures(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    made = simulate(SimConfig(gpus=16, days=2, seed=7), Lake.at(ours))
    external_copy(ours, theirs)
    before = raw_digests(theirs)
    assert sum(1 for p in before if p.startswith("gpu_samples/")) > 1
    runner = CliRunner()

    for command in (["attribute", "-q"], ["detect"]):
        result = runner.invoke(cli, [*command, "--lake", str(theirs)])
        assert result.exit_code == 0, result.output
    # a service round long after the data: closed days are due for compaction, the marts
    # are brought up to date, the detectors run
    later = dt.datetime(2026, 12, 31, tzinfo=dt.UTC)
    attribute(Lake.at(theirs), default_pipeline_config(), later, attempts=2)
    detect(Lake.at(theirs), default_pipeline_config(), later)

    assert raw_digests(theirs) == before
    runner.invoke(cli, ["attribute", "-q", "--lake", str(ours)], catch_exceptions=False)
    got, expected = r.marts_by_key(theirs), r.marts_by_key(ours)
    assert expected["job_usage"].height >= made.jobs // 2
    for name, frame in expected.items():
        assert_frame_equal(got[name], frame, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
