"""Against a real Prometheus (promtool-loaded history): remote read lands exactly the rows the
JSON API lands — every table, every column, every label — and exactly what Prometheus holds."""

from __future__ import annotations

import pyarrow as pa
import pytest
from click.testing import CliRunner

from app.commands.prometheus import command_prometheus

pytestmark = pytest.mark.live

SELECTOR = 'cluster="hist"'


def _pull(server, history, lake, protocol: str, window: str) -> str:
    result = CliRunner().invoke(
        command_prometheus,
        [
            "--url", server.url, "--cluster", "hist", "--selector", SELECTOR,
            "--since", history.start.isoformat(), "--until", history.end.isoformat(),
            "--window", window, "--protocol", protocol, "--columns", "all",
            "--lake", str(lake), "--quiet",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output


def _sorted(table: pa.Table) -> pa.Table:
    table = table.drop_columns([c for c in table.column_names if c.startswith("_")])
    keys = [f.name for f in table.schema if not pa.types.is_nested(f.type)]
    return table.sort_by([(k, "ascending") for k in keys])


@pytest.mark.parametrize("window", ["1h", "30m"])
def test_remote_read_lands_what_the_json_api_lands(
    history, history_server, helpers, tmp_path, window
):
    over_json = _pull(history_server, history, tmp_path / "json", "json", window)
    over_read = _pull(history_server, history, tmp_path / "read", "remote-read", window)

    # the same summary: rows, windows, skipped values, checkpoint (the lake aside)
    assert over_read.replace("/read", "/json") == over_json
    for table in ("gpu_samples", "gpu_events", "job_gpus"):
        want = _sorted(helpers.read_lake(tmp_path / "json", table))
        got = _sorted(helpers.read_lake(tmp_path / "read", table))
        assert got.num_rows == want.num_rows > 0 or table == "gpu_events", table
        assert got.equals(want), table
    start_ms = int(history.start.timestamp() * 1000)
    end_ms = int(history.end.timestamp() * 1000)
    expected = helpers.read_prometheus(
        history_server, helpers.history_families, SELECTOR, start_ms, end_ms
    )
    compared = helpers.assert_lake_matches(
        helpers.read_lake(tmp_path / "read", "gpu_samples"), expected
    )
    assert compared["rows"] == history.samples
