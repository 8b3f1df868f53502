"""Reading Prometheus response bodies into columnar blocks (collector/sources/prometheus/blocks)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from collector.sources.prometheus.blocks import (
    PrometheusResponseError,
    block_from_body,
    block_from_result,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prometheus"
BODIES = sorted(FIXTURES.glob("*/DCGM_*.json"))


def _same(a, b) -> None:
    assert a.family == b.family
    assert a.labels == b.labels
    assert a.lengths.tolist() == b.lengths.tolist()
    assert np.array_equal(a.ts_s, b.ts_s)
    assert a.values.equals(b.values)


@pytest.mark.parametrize("path", BODIES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_fast_body_reader_equals_full_json_decoding(path):
    body = path.read_bytes()

    fast = block_from_body(path.stem, body)
    slow = block_from_result(path.stem, json.loads(body)["data"]["result"])

    _same(fast, slow)
    assert fast.samples == sum(len(s["values"]) for s in json.loads(body)["data"]["result"])


def test_a_body_laid_out_differently_is_decoded_in_full():
    body = (FIXTURES / "scripted" / "DCGM_FI_DEV_GPU_UTIL.json").read_bytes()
    pretty = json.dumps(json.loads(body), indent=2).encode()  # whitespace, as a proxy might send

    _same(
        block_from_body("DCGM_FI_DEV_GPU_UTIL", pretty),
        block_from_body("DCGM_FI_DEV_GPU_UTIL", body),
    )


def test_special_values_keep_their_text():
    body = (
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"UUID":"GPU-1"},'
        b'"values":[[1.5,"NaN"],[2.5,"+Inf"],[3.5,"9223372036854775808"],[4.25,"1e+21"]]}]}}'
    )

    block = block_from_body("DCGM_FI_DEV_GPU_UTIL", body)

    assert block.values.to_pylist() == ["NaN", "+Inf", "9223372036854775808", "1e+21"]
    assert block.ts_s.tolist() == [1.5, 2.5, 3.5, 4.25]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bad_data.json", "Prometheus answered bad_data: invalid parameter"),
        ("too_many_samples.json", "Prometheus answered execution: query processing would load"),
    ],
)
def test_an_error_body_names_prometheus_reason(name, message):
    with pytest.raises(PrometheusResponseError, match=message):
        block_from_body("DCGM_FI_DEV_GPU_UTIL", (FIXTURES / "errors" / name).read_bytes())


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>502 Bad Gateway</html>", "response is not JSON"),
        (
            b'{"status":"success","data":{"resultType":"vector","result":[]}}',
            "expected a range vector",
        ),
        (b"\xff\xfe", "not UTF-8"),
        # decoded (not Prometheus' compact layout), with series or samples of another shape
        (b'{ "status": "success", "data": [1] }', "got 'list'"),
        (b'{ "status": "success", "data": {"resultType": "matrix", "result": [5]} }', "laid out"),
        (
            b'{ "status": "success", "data": {"resultType": "matrix", '
            b'"result": [{"metric": {}, "values": [[1, "2", 3]]}]} }',
            "laid out",
        ),
        (
            b'{ "status": "success", "data": {"resultType": "matrix", '
            b'"result": [{"metric": {}, "values": [["x", "2"]]}]} }',
            "laid out",
        ),
    ],
)
def test_a_body_that_is_not_a_matrix_is_refused_with_what_it_was(body, message):
    with pytest.raises(PrometheusResponseError, match=message):
        block_from_body("DCGM_FI_DEV_GPU_UTIL", body)


def test_an_empty_result_is_an_empty_block():
    body = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'

    block = block_from_body("DCGM_FI_DEV_GPU_UTIL", body)

    assert block.samples == 0 and block.labels == []
