"""The columns a Prometheus pull fills by default are those something downstream reads, and the
puller asks only for their families (collector/sources/prometheus/columns.py)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from collector.errors import ConfigError
from collector.sources.dcgm_exporter.fields import METRIC_COLUMNS
from collector.sources.prometheus.columns import (
    ALL_COLUMNS,
    READ_COLUMNS,
    families_of,
    parse_columns,
)
from collector.sources.prometheus.pull import PullConfig, pull
from collector.sources.prometheus.spans import EVENT_COLUMNS
from warehouse.lake import Lake

REPO = Path(__file__).resolve().parents[2]


def _readers() -> list[Path]:
    """The code that reads gpu_samples' metric columns: SQL (the bench's synthetic lake aside),
    detectors, and the app's charts and pages (commands and the bench aside)."""
    sql = [p for p in (REPO / "sql").rglob("*.sql") if "bench" not in p.parts]
    detectors = list((REPO / "detectors").rglob("*.py"))
    app = [
        p
        for p in (REPO / "app").rglob("*.py")
        if not {"bench", "commands"} & set(p.relative_to(REPO / "app").parts)
    ]
    return sql + detectors + app


def test_the_default_columns_are_exactly_those_the_code_reads_and_the_events_need():
    text = "\n".join(p.read_text(encoding="utf-8") for p in _readers())
    read = {c for c in METRIC_COLUMNS if re.search(rf"\b{c}\b", text)}

    assert set(READ_COLUMNS) == read | set(EVENT_COLUMNS)
    assert len(READ_COLUMNS) == 20 and set(ALL_COLUMNS) - set(READ_COLUMNS) == {
        "sm_occupancy",
        "fb_free_mib",
        "mem_temp_c",
        "mem_clock_mhz",
    }


def test_columns_are_read_all_or_a_list():
    assert parse_columns("read") == READ_COLUMNS
    assert parse_columns(" all ") == ALL_COLUMNS
    assert parse_columns("power_w, gpu_util_pct") == ("gpu_util_pct", "power_w")  # table order
    for bad in ("", "power", "gpu_util_pct,nope", ","):
        with pytest.raises(ConfigError, match="expected read, all"):
            parse_columns(bad)
    assert families_of(("fb_used_mib",)) == {
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_USED_BYTES",
        "dcgm_fb_used",
    }
    with pytest.raises(ConfigError, match="columns"):
        PullConfig(cluster="c", columns=("nope",)).validate()
    with pytest.raises(ConfigError, match="protocol"):
        PullConfig(cluster="c", protocol="grpc").validate()


class _Held:
    """A JSON-only server holding one family of a read column and one of an unread column."""

    url = "http://fake:9090"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def family_names(self, match: str, start_s: float, end_s: float) -> list[str]:
        return ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_FREE"]

    def range_vector(self, query: str, at_s: float) -> bytes:
        self.asked.append(query.split("[")[0])
        return b'{"status":"success","data":{"resultType":"matrix","result":[]}}'

    def series(self, match: str, start_s: float, end_s: float) -> list[dict[str, str]]:
        return []

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("columns", "asked"),
    [
        (READ_COLUMNS, {"DCGM_FI_DEV_GPU_UTIL"}),
        (ALL_COLUMNS, {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_FREE"}),
        (("fb_free_mib",), {"DCGM_FI_DEV_FB_FREE"}),
    ],
)
def test_the_puller_asks_only_for_the_families_of_its_columns(tmp_path, columns, asked):
    server = _Held()
    t0 = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
    cfg = PullConfig(cluster="c", since=t0, until=t0 + dt.timedelta(hours=1), columns=columns)

    summary = pull(cfg, Lake(tmp_path / "lake"), server, clock=lambda: t0 + dt.timedelta(days=1))

    assert set(server.asked) == asked and set(summary.families) == asked


def test_bad_columns_or_protocol_are_one_line_in_the_cli_and_the_config(tmp_path):
    from click.testing import CliRunner

    from app.commands.prometheus import command_prometheus
    from app.config import ConfigError as BadConfig
    from app.service.settings import parse_sources

    base = ["--url", "http://127.0.0.1:1", "--cluster", "c", "--lake", str(tmp_path / "lake")]
    for extra, words in (
        (["--columns", "gpu_util_pct,nope"], "nope is not one of"),
        (["--protocol", "grpc"], "'grpc' is not one of"),
        (["--protocol", "remote-read", "--selector", "rate(x[5m])"], 'name="value" matchers'),
    ):
        result = CliRunner().invoke(command_prometheus, [*base, *extra])
        assert result.exit_code == 2 and words in result.output, result.output
        assert "Traceback" not in result.output

    source = {"kind": "prometheus", "cluster": "a", "url": "http://p:9090"}
    parsed = parse_sources([{**source, "columns": "all", "protocol": "json"}], "in t.toml")
    assert parsed[0].columns == "all" and parsed[0].protocol == "json"
    with pytest.raises(BadConfig, match=r"sources\[0\]\.columns: .*nope"):
        parse_sources([{**source, "columns": "nope"}], "in t.toml")
    with pytest.raises(BadConfig, match=r"sources\[0\]\.protocol: expected one of auto"):
        parse_sources([{**source, "protocol": "xml"}], "in t.toml")
