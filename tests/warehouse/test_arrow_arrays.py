"""Arrays built from their buffers equal pyarrow's own, and building them loads no pandas."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.arrow_arrays import (
    dates,
    empty_table,
    float64s,
    int64s,
    read_parquet,
    repeated_string,
    string_scalar,
    strings,
)
from warehouse.emissions import CarbonIntensity, ClusterIntensity, intensity_table

REPO = Path(__file__).resolve().parents[2]


def test_each_array_equals_pyarrows_from_the_same_values():
    texts = ["sim", None, "", "é✓", "a" * 9]

    assert strings(texts).equals(pa.array(texts, pa.string()))
    assert strings([]).equals(pa.array([], pa.string()))
    assert int64s([3, None, -1]).equals(pa.array([3, None, -1], pa.int64()))
    ts = pa.timestamp("ms", tz="UTC")
    assert int64s([0, None, 3_600_000], ts).equals(
        pa.array([0, None, 3_600_000], pa.int64()).cast(ts)
    )
    assert float64s([None, 2.5, -0.0]).equals(pa.array([None, 2.5, -0.0], pa.float64()))
    assert repeated_string("batch-1", 3).equals(pa.array(["batch-1"] * 3, pa.string()))
    assert repeated_string("", 2).equals(pa.array(["", ""], pa.string()))
    assert len(repeated_string("x", 0)) == 0
    days = [dt.date(2026, 3, 1), None, dt.date(1969, 12, 31)]
    assert dates(days).equals(pa.array(days, pa.date32()))
    assert string_scalar("é✓").equals(pa.scalar("é✓", pa.string()))
    schema = pa.schema([("cluster", pa.string()), ("day", pa.date32())])
    assert empty_table(schema).equals(schema.empty_table())


def test_the_carbon_intensity_table_holds_the_default_each_constant_and_each_hour():
    intensity = CarbonIntensity(
        default_g_per_kwh=400.0,
        clusters=(ClusterIntensity("a", 100.0, hours=((3600, 90.0), (7200, 80.0))),),
    )

    rows = intensity_table(intensity).to_pylist()

    assert [(r["cluster"], r["g_per_kwh"]) for r in rows] == [
        (None, 400.0), ("a", 100.0), ("a", 90.0), ("a", 80.0)
    ]  # fmt: skip
    assert [r["hour_start"] and r["hour_start"].timestamp() for r in rows] == [
        None, None, 3600, 7200
    ]  # fmt: skip


def test_a_parquet_file_reads_as_read_table_reads_it(tmp_path):
    table = pa.table({"cluster": ["a", None], "gpus": [1, 2]})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)

    assert read_parquet(path).equals(pq.read_table(path))
    assert read_parquet(path, ["gpus"]).equals(pq.read_table(path, columns=["gpus"]))


def test_the_carbon_intensity_table_loads_no_pandas():
    """`pa.array` of a list would import pandas (~0.25 CPU-s) in every command that connects."""
    code = (
        "import json, sys\n"
        "from warehouse.emissions import CarbonIntensity, intensity_table\n"
        "import warehouse.arrow_arrays as a\n"
        "intensity_table(CarbonIntensity(default_g_per_kwh=400.0))\n"
        "a.strings(['x', None]); a.int64s([1]); a.float64s([1.0]); a.repeated_string('x', 2)\n"
        "import datetime; a.dates([datetime.date(2026, 3, 1)]); a.string_scalar('x')\n"
        "print(json.dumps('pandas' in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) is False
