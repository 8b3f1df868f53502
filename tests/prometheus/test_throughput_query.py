"""Application throughput pulled from Prometheus (`--throughput-query`, issue #3 part 4): the pivot
of raw counter samples to `app_throughput` rows, and a real Prometheus scraping
`collector.throughput`'s /metrics endpoint, pulled into the lake."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

from app.commands.prometheus import command_prometheus
from collector.errors import ConfigError
from collector.sources.prometheus.blocks import block_from_body
from collector.sources.prometheus.pull import PullConfig
from collector.sources.prometheus.throughput import (
    parse_throughput_query,
    pivot_throughput,
)
from collector.throughput import ThroughputReporter
from warehouse.schema import RAW_TABLES

T0 = 1_796_229_900.0  # window start, seconds
START_MS, END_MS = int(T0 * 1000), int(T0 * 1000) + 60_000


def _body(result: list[dict]) -> bytes:
    """A Prometheus matrix reply in its own compact layout (as recorded in tests/fixtures)."""
    reply = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    return json.dumps(reply, separators=(",", ":")).encode()


def _series(metric: dict[str, str], values: list[tuple[float, str]]) -> dict:
    return {"metric": metric, "values": [[t, v] for t, v in values]}


SAMPLES = _body(
    [
        _series(
            {
                "__name__": "gpuledger_app_samples_total",
                "instance": "g001:9464",
                "job": "app",
                "job_id": "42",
            },
            [(T0 - 5, "90"), (T0 + 1.5, "100"), (T0 + 16.5, "164"), (T0 + 60, "999")],
        ),
        _series(  # no job label: skipped and counted
            {"__name__": "gpuledger_app_samples_total", "instance": "g002:9464"},
            [(T0 + 2, "7"), (T0 + 17, "9")],
        ),
        _series(  # no instance: reporter is a hash of the labels; Hostname names the node
            {"__name__": "train_samples_total", "Hostname": "g003", "job_id": "43"},
            [(T0 + 3, "5"), (T0 + 18, "NaN")],
        ),
    ]
)
TOKENS = _body(
    [
        _series(
            {
                "__name__": "gpuledger_app_tokens_total",
                "instance": "g001:9464",
                "job": "app",
                "job_id": "42",
            },
            [(T0 + 1.5, "102400"), (T0 + 16.5, "167936")],
        )
    ]
)


PARAMS = _body(
    [
        _series(
            {
                "__name__": "gpuledger_app_model_params",
                "instance": "g001:9464",
                "job": "app",
                "job_id": "42",
            },
            [(T0 + 1.5, "7000000000"), (T0 + 16.5, "1.5")],  # 1.5: no parameter count
        )
    ]
)


def _rows(job_label: str = "job_id", blocks=None) -> tuple[list[dict], dict]:
    blocks = blocks or [
        block_from_body("samples", SAMPLES),
        block_from_body("tokens", TOKENS),
    ]
    out = pivot_throughput(
        blocks, cluster="c", start_ms=START_MS, end_ms=END_MS, job_label=job_label
    )
    assert out.table.schema == RAW_TABLES["app_throughput"].schema
    return out.table.to_pylist(), dict(out.counts)


def test_counters_pivot_to_one_row_per_job_reporter_and_scrape():
    rows, counts = _rows()
    by_key = {(r["job_id"], r["reporter"], r["ts"].timestamp()): r for r in rows}
    assert len(rows) == 3  # before the window and at its end: not landed
    first = by_key[("42", "g001:9464", T0 + 1.5)]
    assert first["samples_total"] == 100.0 and first["tokens_total"] == 102400.0
    assert first["steps_total"] is None
    assert first["node"] == "g001" and first["cluster"] == "c" and first["source"] == "prometheus"
    second = by_key[("42", "g001:9464", T0 + 16.5)]
    assert (second["samples_total"], second["tokens_total"]) == (164.0, 167936.0)
    (other,) = [r for r in rows if r["job_id"] == "43"]
    assert other["reporter"].startswith("labels-") and other["node"] == "g003"
    assert other["samples_total"] == 5.0 and other["tokens_total"] is None
    assert counts == {"no_job_label": 2, "not_finite": 1}


def test_the_model_parameter_gauge_lands_beside_the_counters_of_its_scrape():
    blocks = [
        block_from_body("tokens", TOKENS),
        block_from_body("model_params", PARAMS),
    ]
    rows, counts = _rows(blocks=blocks)

    by_ts = {r["ts"].timestamp(): r for r in rows}
    assert (by_ts[T0 + 1.5]["tokens_total"], by_ts[T0 + 1.5]["model_params"]) == (
        102400.0,
        7_000_000_000,
    )
    assert by_ts[T0 + 16.5]["model_params"] is None
    assert counts == {"not_a_parameter_count": 1}


def test_the_job_label_is_configurable_and_a_pod_becomes_namespace_slash_pod():
    body = _body(
        [
            _series(
                {
                    "__name__": "x_total",
                    "instance": "10.0.0.5:8000",
                    "namespace": "ml",
                    "pod": "train-0",
                },
                [(T0 + 1, "3")],
            ),  # fmt: skip
            _series({"__name__": "x_total", "hpc_job": "7001"}, [(T0 + 1, "4")]),
        ]
    )
    rows, counts = _rows("pod", [block_from_body("steps", body)])
    assert [(r["job_id"], r["node"], r["steps_total"]) for r in rows] == [
        ("ml/train-0", "10.0.0.5", 3.0)
    ]
    assert counts == {"no_job_label": 1}
    rows, _ = _rows("hpc_job", [block_from_body("steps", body)])
    assert [r["job_id"] for r in rows] == ["7001"]


def test_a_second_series_of_one_counter_for_the_same_row_is_counted_not_landed():
    body = _body(
        [
            _series({"__name__": "a", "instance": "h:1", "job_id": "1", "x": "1"}, [(T0, "1")]),
            _series({"__name__": "a", "instance": "h:1", "job_id": "1", "x": "2"}, [(T0, "2")]),
        ]
    )
    rows, counts = _rows(blocks=[block_from_body("samples", body)])
    assert [r["samples_total"] for r in rows] == [1.0]
    assert counts == {"duplicate_series": 1}


@pytest.mark.parametrize(
    ("queries", "label"),
    [
        ((("bytes", "a_total"),), "job_id"),
        ((("samples", "a_total"), ("samples", "b_total")), "job_id"),
        ((("samples", "a_total[5m]"),), "job_id"),
        ((("samples", "a_total"),), "job-id"),
    ],
)
def test_bad_throughput_configuration_is_refused(queries, label):
    cfg = PullConfig(cluster="c", throughput=queries, throughput_job_label=label)
    with pytest.raises(ConfigError):
        cfg.validate()


def test_the_cli_option_is_name_equals_selector():
    assert parse_throughput_query('tokens=foo_total{a="b=c"}') == ("tokens", 'foo_total{a="b=c"}')
    with pytest.raises(ConfigError):
        parse_throughput_query("foo_total")
    result = CliRunner().invoke(
        command_prometheus,
        ["--url", "http://127.0.0.1:1", "--cluster", "c", "--throughput-query", "bytes=x"],
    )
    assert result.exit_code != 0 and "samples, tokens, steps" in result.output


@pytest.mark.live
def test_a_real_prometheus_scraping_the_app_endpoint_lands_app_throughput(
    start_prometheus, helpers, tmp_path
):
    reporter = ThroughputReporter(job_id="42", reporter="rank0")
    reporter.report(samples=32, tokens=4096, steps=1, params=125_000_000)
    reporter.report(samples=8, job_id="43")
    endpoint = reporter.serve(0)
    target = f"127.0.0.1:{endpoint.port}"
    t0 = time.time()
    try:
        server = start_prometheus([{"targets": [target], "labels": {"cluster": "app"}}])
        deadline = time.monotonic() + 60
        while True:  # a few scrapes (every 1 s), counters growing meanwhile
            reporter.report(samples=32, tokens=4096, steps=1)
            found = server.api(
                "/api/v1/query", query="count_over_time(gpuledger_app_samples_total[10m])"
            )["result"]
            if len(found) == 2 and min(float(s["value"][1]) for s in found) >= 4:
                break
            assert time.monotonic() < deadline, "Prometheus never scraped the app endpoint"
            time.sleep(0.5)
    finally:
        endpoint.close()  # no more samples: what Prometheus holds stops changing
    time.sleep(1.5)
    held = server.api("/api/v1/query", query="gpuledger_app_samples_total[10m]")["result"]
    want = {
        (s["metric"]["job_id"], round(float(t) * 1000)): float(v)
        for s in held
        for t, v in s["values"]
    }
    lake = tmp_path / "lake"
    args = [
        "--url", server.url, "--cluster", "app", "--since", f"@{t0 - 120:.3f}",
        "--until", "now", "--window", "1m", "--settle", "0s", "--quiet", "--lake", str(lake),
        "--throughput-query", 'samples=gpuledger_app_samples_total{cluster="app"}',
        "--throughput-query", "tokens=gpuledger_app_tokens_total",
        "--throughput-query", "steps=gpuledger_app_steps_total",
        "--throughput-query", "model_params=gpuledger_app_model_params",
    ]  # fmt: skip
    for _ in range(2):  # the rerun replaces what the first run landed, window by window
        result = CliRunner().invoke(command_prometheus, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert "app_throughput row(s)" in result.output
        rows = helpers.read_lake(lake, "app_throughput")
        ts_ms = pc.cast(pc.cast(rows.column("ts"), pa.timestamp("ms")), pa.int64()).to_pylist()
        got = {
            (j, t): v
            for j, t, v in zip(
                rows.column("job_id").to_pylist(),
                ts_ms,
                rows.column("samples_total").to_pylist(),
                strict=True,
            )
        }
        assert len(got) == rows.num_rows == len(want) > 4
        assert got == want
    assert set(rows.column("reporter").to_pylist()) == {target}
    assert set(rows.column("node").to_pylist()) == {"127.0.0.1"}
    assert set(rows.column("source").to_pylist()) == {"prometheus"}
    job42 = rows.filter(pc.equal(rows.column("job_id"), "42"))
    assert pc.all(pc.is_valid(job42.column("tokens_total"))).as_py()
    assert set(job42.column("model_params").to_pylist()) == {125_000_000}  # the gauge
    job43 = rows.filter(pc.equal(rows.column("job_id"), "43"))
    assert set(job43.column("model_params").to_pylist()) == {None}
    assert pc.max(job42.column("steps_total")).as_py() >= 2
    job43 = rows.filter(pc.equal(rows.column("job_id"), "43"))
    assert set(job43.column("samples_total").to_pylist()) == {8.0}
    assert job43.column("tokens_total").null_count == job43.num_rows
