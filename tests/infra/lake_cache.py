"""Lakes that cost seconds to build, built once per test run and copied to each test file that
asks for one.

The pytest-xdist workers of one run share the cache folder (the run's base temporary folder,
above each worker's own); a lock file lets one of them build a lake while the others wait for
it. Run without xdist, the cache is the session's temporary folder. Each caller gets its own
`shutil.copytree` copy, so a test that writes to its lake (detect lands findings, an import
lands batches) never changes what another reads.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

XDIST_WORKER_ENV = "PYTEST_XDIST_WORKER"


def cache_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where this run keeps its built lakes: shared by the run's xdist workers."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get(XDIST_WORKER_ENV) else base) / "lake-cache"
    folder.mkdir(exist_ok=True)
    return folder


def cached_lake(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    build: Callable[[Path], None],
    into: Path,
) -> Path:
    """A copy at `into` of the lake `build(root)` makes: built once per run under `name`."""
    folder = cache_folder(tmp_path_factory)
    built, done = folder / name, folder / f"{name}.done"
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                shutil.rmtree(built, ignore_errors=True)  # a build that failed half-way
                build(built)
                done.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    shutil.copytree(built, into)
    return into
