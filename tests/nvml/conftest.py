"""Fixtures of the NVML agent tests: a fake `/proc` tree, a settable clock, a lake reader."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse import layout

T0 = dt.datetime(2026, 11, 2, 8, 0, 0, tzinfo=dt.UTC)


class FakeProc:
    """A `/proc` tree under tmp_path: `add(pid, cgroup_text, environ=…)` creates one process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def add(self, pid: int, cgroup: str, environ: dict[str, str] | None = None) -> None:
        folder = self.root / str(pid)
        folder.mkdir(exist_ok=True)
        (folder / "cgroup").write_text(cgroup.strip() + "\n", encoding="utf-8")
        if environ is not None:
            raw = b"".join(f"{k}={v}".encode() + b"\0" for k, v in environ.items())
            (folder / "environ").write_bytes(raw)

    def remove(self, pid: int) -> None:
        folder = self.root / str(pid)
        for child in folder.iterdir():
            child.unlink()
        folder.rmdir()


@pytest.fixture
def proc(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path / "proc")


class Clock:
    """Returns `now`; `advance(s)` moves it on."""

    def __init__(self, start: dt.datetime) -> None:
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def t0() -> dt.datetime:
    return T0


@pytest.fixture
def read_lake() -> Callable[[Path, str], pa.Table]:
    """Every row of `table` in the lake at `root` (without `_batch`), in a stable order."""

    def _read(root: Path, table: str) -> pa.Table:
        files = layout.table_files(root, table)
        if not files:
            return pa.table({})
        return pa.concat_tables([pq.read_table(f) for f in files]).drop_columns(["_batch"])

    return _read
