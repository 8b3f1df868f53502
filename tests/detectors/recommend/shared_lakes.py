"""Hand-made recommender lakes that two test files build alike (each kind's own tests, and
tests/detectors/recommend/test_replayed_kinds.py): built once per run and copied to each file
that asks (tests/infra/lake_cache.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.infra.lake_cache import cached_lake
from warehouse.connection import connect


def shared_lake(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Any]
) -> duckdb.DuckDBPyConnection:
    """A connection over this caller's own copy of the lake `build(root)` makes (its marts
    built), built once per run under `name`."""
    into = tmp_path_factory.mktemp(name) / "lake"
    return connect(cached_lake(tmp_path_factory, f"recommend-{name}", build, into))
