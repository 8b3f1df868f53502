"""Prometheus' remote-read protocol (`/api/v1/read`) with streamed XOR chunks, read into blocks.

The JSON API makes Prometheus decode its chunks and print every sample as text, which costs it
more CPU than the puller spends reading them. Remote read with `accepted_response_types =
[STREAMED_XOR_CHUNKS]` (Prometheus ≥ 2.13) ships the chunks as they are stored: each frame is a
uvarint length, a CRC32-C and a `ChunkedReadResponse` protobuf. This module writes the request
(protobuf by hand, in a snappy block of literals: no codec library is needed either way), parses
the frames, decodes the chunks with `prometheus.xor_chunks`, and keeps the samples a range
selector over the same times would return (chunks overlap the range; staleness markers are not
samples), one `SeriesBlock` per family with float values. Rows landed from it are identical to
the JSON API's (tests/prometheus/test_remote_read.py compares them).

Series selectors become label matchers (`parse_selector`: `name="v"`, `!=`, `=~`, `!~`).
"""

from __future__ import annotations

import ast
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa

from collector.errors import CollectorError, ConfigError
from collector.sources.prometheus.blocks import PrometheusResponseError, SeriesBlock
from collector.sources.prometheus.xor_chunks import ChunkFormatError, decode_xor_chunks

__all__ = [
    "CONTENT_TYPE",
    "Matcher",
    "RangeQuery",
    "RemoteReadUnsupported",
    "blocks_from_stream",
    "encode_read_request",
    "parse_selector",
]

CONTENT_TYPE: Final = "application/x-streamed-protobuf"
_STREAMED_XOR_CHUNKS: Final = 1
_XOR: Final = 1  # prometheus.Chunk.Encoding
_STALE_NAN: Final = 0x7FF0000000000002  # Prometheus' staleness marker: not a sample
_OPS: Final = {"=": 0, "!=": 1, "=~": 2, "!~": 3}  # prometheus.LabelMatcher.Type
_MATCHER: Final = re.compile(
    r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"
    r"(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|`[^`]*`)\s*(,|$)",
    re.DOTALL,
)


class RemoteReadUnsupported(CollectorError):
    """The server has no streamed remote read (an old Prometheus, a proxy that blocks it)."""


@dataclass(frozen=True, slots=True)
class Matcher:
    """One label matcher: `op` is =, !=, =~ or !~ (regexes are anchored, as in PromQL)."""

    name: str
    op: str
    value: str


@dataclass(frozen=True, slots=True)
class RangeQuery:
    """Raw samples of the series matching `matchers` with `start_ms <= ts <= end_ms`."""

    start_ms: int
    end_ms: int
    matchers: tuple[Matcher, ...]


def parse_selector(selector: str) -> tuple[Matcher, ...]:
    """Label matchers of a selector written without braces (`cluster="a",job=~"dcgm.*"`).

    Raises ConfigError for anything else.
    """
    text, pos, found = selector.strip(), 0, []
    while pos < len(text):
        match = _MATCHER.match(text, pos)
        if match is None:
            raise ConfigError(f'selector {selector!r}: expected name="value" matchers')
        name, op, quoted, _ = match.groups()
        try:
            value = quoted[1:-1] if quoted[0] == "`" else ast.literal_eval(quoted)
        except (ValueError, SyntaxError) as exc:
            raise ConfigError(f"selector {selector!r}: bad string {quoted}") from exc
        found.append(Matcher(name, op, str(value)))
        pos = match.end()
    return tuple(found)


# ---------------------------------------------------------------- the request


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64 fields: negative numbers as their two's complement
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _snappy_literals(data: bytes) -> bytes:
    """`data` as a snappy block of literal elements (valid snappy; compression not needed)."""
    out = bytearray(_varint(len(data)))
    for at in range(0, len(data), 65_536):
        piece = data[at : at + 65_536]
        out += bytes([61 << 2]) + struct.pack("<H", len(piece) - 1) + piece
    return bytes(out)


def encode_read_request(queries: Sequence[RangeQuery]) -> bytes:
    """The snappy-compressed `prometheus.ReadRequest` asking for streamed XOR chunks."""
    message = b""
    for q in queries:
        body = _int_field(1, q.start_ms) + _int_field(2, q.end_ms)
        for m in q.matchers:
            matcher = _int_field(1, _OPS[m.op]) if _OPS[m.op] else b""
            matcher += _field(2, m.name.encode()) + _field(3, m.value.encode())
            body += _field(3, matcher)
        message += _field(1, body)
    message += _int_field(2, _STREAMED_XOR_CHUNKS)
    return _snappy_literals(message)


# ---------------------------------------------------------------- the response


def _read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise PrometheusResponseError("remote read: a truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: memoryview) -> Iterator[tuple[int, int | memoryview, int]]:
    """(field number, value, offset after it) of a protobuf message: ints for varints, bytes
    for length-delimited fields; fixed-size fields are skipped."""
    pos, size = 0, len(data)
    while pos < size:
        key = data[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _read_varint(data, pos)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, pos = _read_varint(data, pos)
            yield number, value, pos
        elif kind == 2:
            length = data[pos] if pos < size else 0x80
            if length < 0x80:
                pos += 1
            else:
                length, pos = _read_varint(data, pos)
            if pos + length > size:
                raise PrometheusResponseError("remote read: a field runs past its message")
            yield number, data[pos : pos + length], pos + length
            pos += length
        elif kind in (1, 5):
            pos += 8 if kind == 1 else 4
        else:
            raise PrometheusResponseError(f"remote read: unexpected protobuf wire type {kind}")


def _frames(body: bytes) -> Iterator[memoryview]:
    """The messages of a streamed response (each after its uvarint size and CRC32-C)."""
    view, pos = memoryview(body), 0
    while pos < len(view):
        size, pos = _read_varint(view, pos)
        if pos + 4 + size > len(view):
            raise PrometheusResponseError("remote read: the stream ends inside a frame")
        yield view[pos + 4 : pos + 4 + size]
        pos += 4 + size


@dataclass(slots=True)
class _Series:
    query: int
    labels: dict[str, str]
    chunks: list[bytes]
    bounds: list[tuple[int, int]]  # per chunk, the times of its first and last sample


# Label sets decoded, by their bytes: a pull meets the same series window after window.
_LABELS: dict[bytes, dict[str, str]] = {}
_LABELS_MAX: Final = 200_000


def _labels(raw: bytes) -> dict[str, str]:
    """The label set of a ChunkedSeries' `labels` fields (`raw`: their bytes, back to back)."""
    found = _LABELS.get(raw)
    if found is None:
        found = {}
        for _, pair, _ in _fields(memoryview(raw)):
            parts = {n: v for n, v, _ in _fields(pair)} if not isinstance(pair, int) else {}
            name, value = parts.get(1, b""), parts.get(2, b"")
            if isinstance(name, int) or isinstance(value, int):
                raise PrometheusResponseError("remote read: a label that is not two strings")
            found[bytes(name).decode()] = bytes(value).decode()
        if len(_LABELS) >= _LABELS_MAX:
            _LABELS.clear()
        _LABELS[raw] = found
    return found


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _chunk_data(chunk: memoryview) -> tuple[bytes, int, int] | None:
    """The bytes of an XOR `prometheus.Chunk` and the times of its first and last sample
    (None for another encoding)."""
    encoding, data, first, last = _XOR, b"", 0, 0
    for number, value, _ in _fields(chunk):
        if isinstance(value, int):
            if number == 1:
                first = _int64(value)
            elif number == 2:
                last = _int64(value)
            elif number == 3:
                encoding = value
        elif number == 4:
            data = bytes(value)
    return (data, first, last) if encoding == _XOR else None


def _series(body: bytes) -> list[_Series]:
    """Every series of every query in the stream, a series split over frames joined up.

    Prometheus writes a ChunkedSeries' labels (field 1) before its chunks (field 2): the bytes
    up to the first chunk name the series.
    """
    found: dict[tuple[int, bytes], _Series] = {}
    for frame in _frames(body):
        parsed = list(_fields(frame))
        query = next((v for n, v, _ in parsed if n == 2 and isinstance(v, int)), 0)
        for number, payload, _ in parsed:
            if number != 1 or isinstance(payload, int):
                continue
            chunks: list[bytes] = []
            bounds: list[tuple[int, int]] = []
            label_end = len(payload)
            pos = 0
            for n, value, after in _fields(payload):
                if n == 2 and not isinstance(value, int):
                    if label_end == len(payload):
                        label_end = pos
                    found_chunk = _chunk_data(value)
                    if found_chunk is not None:
                        chunks.append(found_chunk[0])
                        bounds.append(found_chunk[1:])
                elif n == 1 and label_end != len(payload):
                    raise PrometheusResponseError("remote read: labels after chunks")
                pos = after
            raw = bytes(payload[:label_end])
            key = (query, raw)
            if key in found:
                found[key].chunks.extend(chunks)
                found[key].bounds.extend(bounds)
            else:
                found[key] = _Series(query, _labels(raw), chunks, bounds)
    return list(found.values())


def blocks_from_stream(body: bytes, queries: Sequence[RangeQuery]) -> list[SeriesBlock]:
    """One block per family (`__name__`) of the samples each query's range holds.

    Raises PrometheusResponseError for a stream or chunk that does not decode.
    """
    series = [s for s in _series(body) if s.chunks]
    try:
        decoded = decode_xor_chunks([c for s in series for c in s.chunks])
    except ChunkFormatError as exc:
        raise PrometheusResponseError(f"remote read: {exc}") from exc
    per_chunk = np.concatenate([[0], np.cumsum(decoded.lengths)])
    # every chunk's first and last sample where Prometheus says they are: a decoder check
    bounds = np.array([b for s in series for b in s.bounds], dtype=np.int64).reshape(-1, 2)
    full = decoded.lengths > 0
    if not (
        np.array_equal(decoded.ts_ms[per_chunk[:-1][full]], bounds[full, 0])
        and np.array_equal(decoded.ts_ms[per_chunk[1:][full] - 1], bounds[full, 1])
    ):
        raise PrometheusResponseError(
            "remote read: chunks decoded to times their headers do not give"
        )
    n_chunks = np.cumsum([0, *(len(s.chunks) for s in series)])
    start = np.array([queries[s.query].start_ms for s in series], dtype=np.int64)
    end = np.array([queries[s.query].end_ms for s in series], dtype=np.int64)
    per_series = np.diff(per_chunk[n_chunks])
    owner = np.repeat(np.arange(len(series)), per_series)
    ts = decoded.ts_ms
    keep = (ts >= start[owner]) & (ts <= end[owner])
    keep &= decoded.values.view(np.uint64) != np.uint64(_STALE_NAN)
    ts, values, owner = ts[keep], decoded.values[keep], owner[keep]
    # chunks of one series are in time order, so its samples are; order by family, then series
    families = sorted({s.labels.get("__name__", "") for s in series})
    family_of = np.array(
        [families.index(s.labels.get("__name__", "")) for s in series], dtype=np.int64
    )
    order = np.argsort(family_of[owner], kind="stable")
    ts, values, owner = ts[order], values[order], owner[order]
    counts = np.bincount(owner, minlength=len(series))
    blocks: list[SeriesBlock] = []
    at = 0
    for f, family in enumerate(families):
        members = [i for i in range(len(series)) if family_of[i] == f and counts[i]]
        n = int(counts[members].sum()) if members else 0
        if not members:
            continue
        blocks.append(
            SeriesBlock(
                family=family,
                labels=[series[i].labels for i in members],
                lengths=counts[members].astype(np.int64),
                ts_s=ts[at : at + n] / 1000.0,
                values=pa.array(values[at : at + n], pa.float64()),
            )
        )
        at += n
    return blocks
