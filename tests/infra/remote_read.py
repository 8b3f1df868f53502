"""The server side of Prometheus' streamed remote read, written from its Go source for tests.

`encode_xor_chunk` follows tsdb/chunkenc/xor.go (the appender: varint first time, 64-bit first
value, uvarint second delta, delta-of-delta codes, XOR values with the leading-zero clamp at 31);
`stream` frames ChunkedReadResponse messages as storage/remote/codec.go does (uvarint size,
CRC32-C, message); `decode_request` reads the snappy literal block and the ReadRequest back.
Independent of the collector's decoder: a bit writer in plain Python, one sample at a time.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

STALE_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]


class _BitWriter:
    def __init__(self) -> None:
        self.bits: list[int] = []

    def write(self, value: int, n: int) -> None:
        for i in range(n - 1, -1, -1):
            self.bits.append((value >> i) & 1)

    def byte(self, b: int) -> None:
        self.write(b, 8)

    def data(self) -> bytes:
        padded = self.bits + [0] * (-len(self.bits) % 8)
        return bytes(int("".join(map(str, padded[i : i + 8])), 2) for i in range(0, len(padded), 8))


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _bits_of(value: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def _bit_range(x: int, n: int) -> bool:
    return -((1 << (n - 1)) - 1) <= x <= 1 << (n - 1)


def encode_xor_chunk(samples: list[tuple[int, float]]) -> bytes:
    """One XOR chunk holding `samples` ((ms, value) in time order) as Prometheus writes it."""
    w = _BitWriter()
    t_prev = t_delta = 0
    v_prev = 0
    leading, trailing = 0xFF, 0
    for i, (t, v) in enumerate(samples):
        vb = _bits_of(v)
        if i == 0:
            for b in _uvarint((t << 1) ^ (t >> 63) if t >= 0 else ((-t - 1) << 1) | 1):
                w.byte(b)
            w.write(vb, 64)
        else:
            if i == 1:
                t_delta = t - t_prev
                for b in _uvarint(t_delta):
                    w.byte(b)
            else:
                delta = t - t_prev
                dod = delta - t_delta
                t_delta = delta
                if dod == 0:
                    w.write(0, 1)
                elif _bit_range(dod, 14):
                    w.write(0b10, 2)
                    w.write(dod & ((1 << 14) - 1), 14)
                elif _bit_range(dod, 17):
                    w.write(0b110, 3)
                    w.write(dod & ((1 << 17) - 1), 17)
                elif _bit_range(dod, 20):
                    w.write(0b1110, 4)
                    w.write(dod & ((1 << 20) - 1), 20)
                else:
                    w.write(0b1111, 4)
                    w.write(dod & ((1 << 64) - 1), 64)
            delta_v = vb ^ v_prev
            if delta_v == 0:
                w.write(0, 1)
            else:
                w.write(1, 1)
                lead = min(64 - delta_v.bit_length(), 31)
                trail = (delta_v & -delta_v).bit_length() - 1
                if leading != 0xFF and lead >= leading and trail >= trailing:
                    w.write(0, 1)
                    w.write(delta_v >> trailing, 64 - leading - trailing)
                else:
                    leading, trailing = lead, trail
                    w.write(1, 1)
                    w.write(lead, 5)
                    sig = 64 - lead - trail
                    w.write(sig & 63, 6)  # 64 is written as 0
                    w.write(delta_v >> trail, sig)
        t_prev, v_prev = t, vb
    return struct.pack(">H", len(samples)) + w.data()


# ---------------------------------------------------------------- protobuf


def _key(number: int, kind: int) -> bytes:
    return _uvarint(number << 3 | kind)


def _ld(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _uvarint(len(payload)) + payload


def _int(number: int, value: int) -> bytes:
    return _key(number, 0) + _uvarint(value & ((1 << 64) - 1))


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    samples: list[tuple[int, float]]  # (ms, value), time order


def stream(
    series: list[tuple[int, Series]], per_chunk: int = 120, frames_per: int = 1, skew_ms: int = 0
) -> bytes:
    """The streamed response: per (query index, series) its samples cut into chunks of
    `per_chunk`, sent in `frames_per` frames (a series split over frames, as Prometheus may).
    `skew_ms` moves the chunk headers' first-sample time (a header the data contradicts)."""
    out = bytearray()
    for query, s in series:
        labels = b"".join(
            _ld(1, _ld(1, k.encode()) + _ld(2, v.encode())) for k, v in sorted(s.labels.items())
        )
        chunks = [s.samples[i : i + per_chunk] for i in range(0, len(s.samples), per_chunk)]
        encoded = [
            _ld(
                2,
                _int(1, c[0][0] + skew_ms)
                + _int(2, c[-1][0])
                + _int(3, 1)
                + _ld(4, encode_xor_chunk(c)),
            )
            for c in chunks
        ]
        size = max(1, math.ceil(len(encoded) / frames_per))
        for at in range(0, max(len(encoded), 1), size):
            message = _ld(1, labels + b"".join(encoded[at : at + size])) + _int(2, query)
            out += _uvarint(len(message)) + struct.pack(">I", _crc32c(message)) + message
    return bytes(out)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _message(data: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _read_uvarint(data, pos)
        if key & 7 == 0:
            value, pos = _read_uvarint(data, pos)
            out.append((key >> 3, value))
        else:
            size, pos = _read_uvarint(data, pos)
            out.append((key >> 3, data[pos : pos + size]))
            pos += size
    return out


def _unsnappy(data: bytes) -> bytes:
    """A snappy block of literal elements (what the collector sends) back to its bytes."""
    size, pos = _read_uvarint(data, 0)
    out = bytearray()
    while pos < len(data):
        tag = data[pos]
        assert tag & 3 == 0, "only literals expected"
        n = tag >> 2
        pos += 1
        if n >= 60:
            width = n - 59
            n = int.from_bytes(data[pos : pos + width], "little")
            pos += width
        out += data[pos : pos + n + 1]
        pos += n + 1
    assert len(out) == size
    return bytes(out)


@dataclass(frozen=True)
class Query:
    start_ms: int
    end_ms: int
    matchers: list[tuple[int, str, str]]  # (type: 0 =, 1 !=, 2 =~, 3 !~), name, value


def decode_request(body: bytes) -> tuple[list[Query], list[int]]:
    """The queries and accepted response types of a snappy-compressed ReadRequest."""
    queries, types = [], []
    for number, value in _message(_unsnappy(body)):
        if number == 2:
            types.append(int(value))  # type: ignore[arg-type]
            continue
        assert isinstance(value, bytes)
        start = end = 0
        matchers = []
        for n, v in _message(value):
            if n in (1, 2):  # int64: two's complement
                ms = int(v)  # type: ignore[arg-type]
                ms = ms - (1 << 64) if ms >= 1 << 63 else ms
                start, end = (ms, end) if n == 1 else (start, ms)
            elif n == 3:
                fields = dict(_message(v))  # type: ignore[arg-type]
                matchers.append(
                    (int(fields.get(1, 0)), fields[2].decode(), fields[3].decode())  # type: ignore[union-attr]
                )
        queries.append(Query(start, end, matchers))
    return queries, types
