"""Prometheus matrix responses as columnar blocks: labels per series, samples back to back.

Two ways in, one shape out. `block_from_body` reads the raw HTTP body: each series' small
`metric` object is JSON-decoded, and its `values` array is rewritten into CSV lines that Arrow's
multi-threaded reader parses, so no Python object is made per sample. `block_from_result` takes
an already decoded `data.result` list (recorded fixtures, other clients). Both give identical
blocks; the body reader falls back to full JSON decoding for any layout it does not expect.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

from collector.errors import CollectorError

__all__ = [
    "PrometheusResponseError",
    "ResponseNotJson",
    "SeriesBlock",
    "block_from_body",
    "block_from_result",
]

_DECODER: Final = json.JSONDecoder()
_METRIC: Final = '{"metric":'
_VALUES: Final = ',"values":['


class PrometheusResponseError(CollectorError):
    """Prometheus answered, but not with a successful matrix (an error status, bad JSON)."""


class ResponseNotJson(PrometheusResponseError):
    """A body that does not decode as JSON: cut short (a connection closed mid-body), or not
    Prometheus' answer at all; the pull tries it again."""


@dataclass(frozen=True, slots=True)
class SeriesBlock:
    """The series one query returned: `labels[i]` owns the next `lengths[i]` samples.

    `ts_s` are Prometheus' sample times in seconds (millisecond precision); `values` the
    value strings exactly as sent (`"NaN"`, `"+Inf"` included) by the JSON API, or float64 from
    remote read (`prometheus.remote_read`).
    """

    family: str
    labels: list[dict[str, str]]
    lengths: np.ndarray  # int64 per series
    ts_s: np.ndarray  # float64 per sample
    values: pa.Array  # string (JSON) or float64 (remote read) per sample

    @property
    def samples(self) -> int:
        return int(self.ts_s.size)

    def between(self, lo_ms: int, hi_ms: int) -> SeriesBlock:
        """The block of the samples with `lo_ms <= ts <= hi_ms` (series left empty dropped)."""
        ts_ms = np.round(self.ts_s * 1000.0).astype(np.int64)
        keep = (ts_ms >= lo_ms) & (ts_ms <= hi_ms)
        if keep.all():
            return self
        series = np.repeat(np.arange(len(self.labels)), self.lengths)
        counts = np.bincount(series[keep], minlength=len(self.labels))
        has = counts > 0
        return SeriesBlock(
            family=self.family,
            labels=[labels for labels, kept in zip(self.labels, has, strict=True) if kept],
            lengths=counts[has].astype(np.int64),
            ts_s=self.ts_s[keep],
            values=self.values.filter(pa.array(keep)),
        )


def _empty(family: str) -> SeriesBlock:
    return SeriesBlock(family, [], np.empty(0, np.int64), np.empty(0), pa.array([], pa.string()))


def block_from_result(family: str, result: Sequence[Mapping[str, Any]]) -> SeriesBlock:
    """A block from a decoded matrix `result` list (`[{"metric": {...}, "values": [...]}]`)."""
    labels: list[dict[str, str]] = []
    ts_parts: list[np.ndarray] = []
    value_parts: list[pa.Array] = []
    for entry in result:
        values = entry.get("values") or []
        if not values:
            continue
        labels.append(dict(entry.get("metric", {})))
        ts, vs = zip(*values, strict=True)
        ts_parts.append(np.array(ts, dtype=np.float64))
        value_parts.append(pa.array(vs, pa.string()))
    if not labels:
        return _empty(family)
    return SeriesBlock(
        family=family,
        labels=labels,
        lengths=np.array([p.size for p in ts_parts], dtype=np.int64),
        ts_s=np.concatenate(ts_parts),
        values=pa.concat_arrays(value_parts),
    )


class _Layout(Exception):
    """Internal: the body is not laid out as Prometheus writes it (use the JSON decoder)."""


def _scan(family: str, text: str, raw: bytes) -> SeriesBlock:
    """Walk `text` series by series; raise _Layout at anything unexpected.

    `raw` is the same body as bytes; it must be ASCII, so offsets agree between the two and
    the `values` arrays are cut from the bytes (bytes.translate is far faster than str's).
    """
    start = text.find('"result":[')
    if start < 0 or '"resultType":"matrix"' not in text[: start + 1]:
        raise _Layout
    pos = start + len('"result":[')
    labels: list[dict[str, str]] = []
    lengths: list[int] = []
    segments: list[bytes] = []
    while True:
        if text.startswith("]", pos):
            break
        if not text.startswith(_METRIC, pos):
            raise _Layout
        metric, pos = _DECODER.raw_decode(text, pos + len(_METRIC))
        if not isinstance(metric, dict) or not text.startswith(_VALUES, pos):
            raise _Layout
        pos += len(_VALUES)
        if text.startswith("]}", pos):  # a series without samples
            pos += 2
        else:
            end = text.find("]]", pos)
            if end < 0 or not text.startswith("]]}", end):
                raise _Layout  # e.g. a "histograms" member: native histograms are not DCGM
            segment = raw[pos + 1 : end]  # `1.5,"2"],[2.5,"3"`
            labels.append(metric)
            lengths.append(segment.count(b"],[") + 1)
            segments.append(segment)
            pos = end + 3
        if text.startswith(",", pos):
            pos += 1
        elif not text.startswith("]", pos):
            raise _Layout
    if not labels:
        return _empty(family)
    csv = b"\n".join(segments).replace(b"],[", b"\n").translate(None, b'"')
    table = pa_csv.read_csv(
        io.BytesIO(csv),
        read_options=pa_csv.ReadOptions(column_names=["t", "v"]),
        parse_options=pa_csv.ParseOptions(quote_char=False),
        convert_options=pa_csv.ConvertOptions(
            column_types={"t": pa.float64(), "v": pa.string()},
            null_values=[],
            strings_can_be_null=False,
        ),
    )
    count = np.array(lengths, dtype=np.int64)
    if table.num_rows != int(count.sum()):
        raise _Layout
    return SeriesBlock(
        family=family,
        labels=labels,
        lengths=count,
        ts_s=table.column("t").to_numpy(),
        values=table.column("v").combine_chunks(),
    )


def block_from_body(family: str, body: bytes) -> SeriesBlock:
    """A block from the raw body of an instant query that returned a range vector (a matrix).

    Raises PrometheusResponseError for an error status or a body that is not such JSON.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PrometheusResponseError(f"response is not UTF-8 JSON: {exc}") from exc
    if text.startswith('{"status":"success"') and body.isascii():  # Prometheus' own layout
        try:
            return _scan(family, text, body)
        except (_Layout, ValueError, pa.ArrowInvalid):
            pass
    try:  # another layout (whitespace, key order, an error): decode it all
        reply = json.loads(text)
    except ValueError as exc:
        raise ResponseNotJson(f"response is not JSON: {text[:120]!r}") from exc
    if not isinstance(reply, dict) or reply.get("status") != "success":
        error = reply.get("error", text[:120]) if isinstance(reply, dict) else text[:120]
        kind = reply.get("errorType", "an error") if isinstance(reply, dict) else "an error"
        raise PrometheusResponseError(f"Prometheus answered {kind}: {error}")
    data = reply.get("data") or {}
    kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
    if kind != "matrix":
        raise PrometheusResponseError(f"expected a range vector (matrix), got {kind!r}")
    try:
        return block_from_result(family, data.get("result") or [])
    except (ValueError, TypeError, AttributeError, pa.ArrowException) as exc:
        # a series or a sample not shaped as Prometheus writes them (a proxy's rewrite)
        raise PrometheusResponseError(f"a range vector not laid out as expected: {exc}") from exc
