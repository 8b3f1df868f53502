"""Values of another tool's lake files that the contract does not allow are one clear error
line (a string where a number belongs, an integer past its column's range, a column named in
upper case), and figures that are not numbers (NaN) print as unknown, not as a traceback or
invalid JSON."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner, Result

from app.cli import cli
from app.json_text import dumps
from app.sparkline import render_sparkline
from tests.marts import rows as r


def invoke(*args: str) -> Result:
    env = {k: None for k in os.environ if k.startswith("GPULEDGER_")}
    return CliRunner(env=env).invoke(cli, list(args))


def _lake(root: Path, engine_active: list[object]) -> None:
    """A job on one GPU whose samples another tool wrote, `engine_active` as given."""
    samples = r.table("gpu_samples", r.samples([0, 30, 60, 90], engine_active=0.5))
    folder = root / "gpu_samples" / f"cluster={r.CLUSTER}" / f"date={r.T0.date()}"
    folder.mkdir(parents=True)
    column = samples.schema.get_field_index("engine_active")
    written = samples.set_column(column, "engine_active", pa.array(engine_active))
    pq.write_table(written, folder / "part-0.parquet")
    r.land(root, "jobs", [r.job("100", 0, 120)])
    r.land(root, "job_gpus", [r.job_gpu("100", 0, 120)])


def test_a_string_where_the_contract_has_a_number_is_one_clear_error(tmp_path):
    _lake(tmp_path, ["0.5", "n/a", "0.5", "0.5"])
    result = invoke("attribute", "--lake", str(tmp_path), "-q")
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "a value in the lake does not fit" in errors[0], result.output
    assert "'n/a'" in errors[0] and "engine_active" in errors[0]
    [written] = (tmp_path / "gpu_samples").rglob("*.parquet")
    assert f"{str(written)!r} holds engine_active as string" in errors[0]


def test_an_integer_past_its_columns_range_names_its_file(tmp_path):
    _lake(tmp_path, [0.5, 0.5, 0.5, 0.5])
    [written] = (tmp_path / "gpu_samples").rglob("*.parquet")
    samples = pq.read_table(written)
    column = samples.schema.get_field_index("gpu_index")
    wide = pa.array([0, 0, 0, 99_999], pa.int64())
    pq.write_table(samples.set_column(column, "gpu_index", wide), written)

    result = invoke("attribute", "--lake", str(tmp_path), "-q")

    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "a value in the lake does not fit" in errors[0], result.output
    assert f"{str(written)!r} holds gpu_index as int64 (the contract's: int16)" in errors[0]


def test_a_contract_column_named_in_upper_case_is_one_clear_error(tmp_path):
    # read as the contract's `ts` and `node`, its values were null: every row left out unsaid
    _lake(tmp_path, [0.5, 0.5, 0.5, 0.5])
    [written] = (tmp_path / "gpu_samples").rglob("*.parquet")
    samples = pq.read_table(written)
    pq.write_table(
        samples.rename_columns(
            [c.upper() if c in ("ts", "node") else c for c in samples.schema.names]
        ),
        written,
    )
    result = invoke("attribute", "--lake", str(tmp_path), "-q")
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    assert "'TS' (the contract's 'ts')" in errors[0] and "'NODE'" in errors[0]
    assert str(written) in errors[0]


def test_a_nan_figure_prints_as_unknown(tmp_path):
    _lake(tmp_path, [0.5, math.nan, 0.5, 0.5])
    assert invoke("attribute", "--lake", str(tmp_path), "-q").exit_code == 0
    text = invoke("job", "100", "--lake", str(tmp_path))
    assert text.exit_code == 0, text.output
    as_json = invoke("job", "100", "--lake", str(tmp_path), "--format", "json")
    assert as_json.exit_code == 0, as_json.output
    json.loads(as_json.output, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))


def test_json_and_sparklines_take_nan_as_unknown():
    assert json.loads(dumps({"a": [math.nan, 1.5, math.inf], "b": -math.inf})) == {
        "a": [None, 1.5, None],
        "b": None,
    }
    assert render_sparkline([0.0, math.nan, 1.0, None]) == "▁ █ "
