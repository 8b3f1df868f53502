"""A lake that costs seconds is built once per run and each caller writes to its own copy
(tests/infra/lake_cache.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.infra.lake_cache import cached_lake


def test_a_lake_is_built_once_and_each_caller_gets_its_own_copy(tmp_path_factory):
    builds: list[Path] = []

    def build(root: Path) -> None:
        builds.append(root)
        root.mkdir(parents=True)
        (root / "table.parquet").write_text("rows")

    first = cached_lake(tmp_path_factory, "test-once", build, tmp_path_factory.mktemp("a") / "l")
    second = cached_lake(tmp_path_factory, "test-once", build, tmp_path_factory.mktemp("b") / "l")

    assert len(builds) == 1 and first != second
    (first / "table.parquet").write_text("changed by its test")
    assert (second / "table.parquet").read_text() == "rows"
    assert (builds[0] / "table.parquet").read_text() == "rows"


def test_a_build_that_failed_half_way_is_built_again(tmp_path_factory):
    def broken(root: Path) -> None:
        root.mkdir(parents=True)
        (root / "half.parquet").write_text("half")
        raise RuntimeError("the build failed")

    def build(root: Path) -> None:
        root.mkdir(parents=True)
        (root / "whole.parquet").write_text("whole")

    with pytest.raises(RuntimeError):
        cached_lake(tmp_path_factory, "test-retry", broken, tmp_path_factory.mktemp("c") / "l")
    got = cached_lake(tmp_path_factory, "test-retry", build, tmp_path_factory.mktemp("d") / "l")

    assert sorted(p.name for p in got.iterdir()) == ["whole.parquet"]
