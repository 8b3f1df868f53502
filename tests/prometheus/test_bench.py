"""The Prometheus ingest benchmark (app/bench/prometheus.py)."""

from __future__ import annotations

import json

import pytest

from app.bench.prometheus import make_bodies, run_prometheus_bench
from collector.sources.prometheus.blocks import block_from_body, block_from_result


def test_bench_bodies_are_laid_out_as_prometheus_writes_them():
    bodies = make_bodies(gpus=2, points=3)

    for body in bodies:
        family = json.loads(body)["data"]["result"][0]["metric"]["__name__"]
        fast, slow = (
            block_from_body(family, body),
            block_from_result(family, json.loads(body)["data"]["result"]),
        )
        assert fast.values.equals(slow.values) and fast.labels == slow.labels


@pytest.mark.slow
def test_our_path_beats_the_clients_dataframe_path_on_the_same_bodies():
    result = run_prometheus_bench(gpus=16, points=1440, repeat=2)

    assert result["samples"] == 16 * 1440 * 10
    assert result["wide_rows"] == 16 * 1440  # ten families pivoted onto one row per scrape
    assert result["client_rows"] == result["samples"]  # the client's long frame: one per sample
    # target ≥ 5× (measured 7-9× here); a margin below it for shared, noisy CI machines
    assert result["speedup"] >= 3.0, result
