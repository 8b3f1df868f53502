"""The Philly sample (tests/fixtures/philly) imported and attributed: the lake that
tests/importers/test_philly_import.py and tests/detectors/test_figures_bounded.py read, built
once per test run (tests/infra/lake_cache.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.sources.philly.trace import ImportResult, import_philly
from tests.infra.lake_cache import cached_lake
from warehouse.attribution import AttributionConfig, attribute
from warehouse.connection import connect
from warehouse.lake import Lake

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "philly"
CLUSTER = "philly"


def import_fixture(root: Path, directory: Path = FIXTURE) -> ImportResult:
    return import_philly(directory, CLUSTER, Lake.at(root), lines_per_batch=500)


def _imported_and_attributed(root: Path) -> None:
    result = import_fixture(root)
    assert result.malformed == {
        "cluster_job_log": 0,
        "cluster_gpu_util": 0,
        "cluster_machine_list": 0,
    }
    attribute(connect(root), root, AttributionConfig())


def attributed_philly_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of the imported and attributed Philly sample, the caller's to write to."""
    into = tmp_path_factory.mktemp("philly") / "lake"
    return cached_lake(tmp_path_factory, "philly-attributed", _imported_and_attributed, into)
