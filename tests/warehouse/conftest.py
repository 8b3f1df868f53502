"""Fixtures of the warehouse tests: a lake root under tmp_path and batch builders.

The builders are handed out as fixtures (not imported from a helper module) so that the tests
work under any pytest import mode without a `tests/__init__.py`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pytest

from warehouse.arrow_arrays import TIMESTAMP

UTC = dt.UTC
T0 = dt.datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def _samples(
    times: Sequence[dt.datetime],
    *,
    cluster: str = "della",
    node: str = "g001",
    gpu_index: int = 0,
    power_w: float | None = 300.0,
) -> pa.Table:
    """gpu_samples rows for one GPU at `times`, with only a few metric columns filled."""
    n = len(times)
    return pa.table(
        {
            "ts": pa.array(list(times), TIMESTAMP),
            "cluster": pa.array([cluster] * n, pa.string()),
            "node": pa.array([node] * n, pa.string()),
            "gpu_index": pa.array([gpu_index] * n, pa.int16()),
            "gpu_uuid": pa.array([f"GPU-{node}-{gpu_index}"] * n, pa.string()),
            "interval_s": pa.array([30.0] * n, pa.float32()),
            "gpu_util_pct": pa.array([float(i % 101) for i in range(n)], pa.float32()),
            "power_w": pa.array([power_w] * n, pa.float32()),
            "source": pa.array(["sim"] * n, pa.string()),
        }
    )


SampleFactory = Callable[..., pa.Table]


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """A lake root that does not exist yet (the writer creates it)."""
    return tmp_path / "lake"


@pytest.fixture(scope="session")
def make_samples() -> SampleFactory:
    """Build gpu_samples rows: make_samples([t0, t1], cluster="della", node="g001").

    Session-scoped because it is a pure function (Hypothesis tests may use it).
    """
    return _samples


@pytest.fixture
def t0() -> dt.datetime:
    return T0
