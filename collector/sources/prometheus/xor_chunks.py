"""Decode Prometheus' XOR (Gorilla) chunks into timestamps and values, many chunks at once.

A chunk is a bit stream: a 2-byte sample count, the first sample (a signed varint time, 64 value
bits), the second (an unsigned varint time delta, a value), then per sample a delta-of-delta
time code (`0`, `10`+14 bits, `110`+17, `1110`+20, `1111`+64) and an XOR-coded value (`0`: same
value; `10`: the previous leading/trailing zero counts and the meaningful bits; `11`: 5 bits of
leading zeros, 6 of meaningful-bit count, then the bits) — Prometheus' tsdb/chunkenc/xor.go.

The stream is serial within a chunk, but chunks are independent: the decoder walks sample k of
every chunk in one numpy step, so the Python work is per sample *index* (at most a chunk's
length, 120 in Prometheus 2), not per sample. Bits are read as 64-bit big-endian words at any
bit offset from an unaligned view of the bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

__all__ = ["ChunkFormatError", "XorSamples", "decode_xor_chunks"]

_U64: Final = np.uint64
_PAD: Final = 24  # zero bytes after the last chunk: a 64-bit read never runs off the end
# per 4-bit time-code prefix: its length in bits and the size of the delta-of-delta after it
_PREFIX: Final = np.array([1] * 8 + [2] * 4 + [3] * 2 + [4, 4], dtype=np.int64)
_DOD_BITS: Final = np.array([0] * 8 + [14] * 4 + [17] * 2 + [20, 64], dtype=np.int64)


class ChunkFormatError(ValueError):
    """A chunk's bytes do not decode to the samples it says it holds."""


@dataclass(frozen=True, slots=True)
class XorSamples:
    """The samples of the chunks decoded, chunk after chunk: `lengths[i]` belong to chunk i."""

    lengths: np.ndarray  # int64 per chunk
    ts_ms: np.ndarray  # int64 per sample
    values: np.ndarray  # float64 per sample


class _Bits:
    """Reads of up to 64 bits at arbitrary bit positions of one byte buffer."""

    def __init__(self, data: bytes) -> None:
        self.bytes = np.frombuffer(data + bytes(_PAD), dtype=np.uint8)
        # word[i] = the 8 bytes from byte i, big-endian, for every i (an unaligned strided view)
        self.words = np.ndarray(
            (self.bytes.size - 8,), dtype=">u8", buffer=self.bytes, strides=(1,)
        ).astype(np.uint64)
        self.limit = (self.bytes.size - 9) * 8

    def peek(self, pos: np.ndarray) -> np.ndarray:
        """The 64 bits starting at each bit position, as uint64 (MSB first)."""
        pos = np.minimum(pos, self.limit)
        byte = pos >> 3
        off = (pos & 7).astype(_U64)
        high = self.words[byte] << off
        low = self.bytes[byte + 8].astype(_U64) >> (_U64(8) - off)
        word: np.ndarray = high | low
        return word


def _top(word: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The `n` (0..64) most significant bits of each word."""
    shifted = word >> ((64 - n) & 63).astype(_U64)
    return np.where(n == 0, _U64(0), shifted)


def _varints(bits: _Bits, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unsigned LEB128 varints (Go's binary.ReadUvarint, bytes read from the bit stream)."""
    value = np.zeros(pos.size, dtype=_U64)
    going = np.ones(pos.size, dtype=bool)
    for k in range(10):
        byte = bits.peek(pos) >> _U64(56)
        pos = pos + np.where(going, 8, 0)
        value |= np.where(going, (byte & _U64(0x7F)) << _U64(7 * k), _U64(0))
        going &= (byte & _U64(0x80)) != 0
        if not going.any():
            return value, pos
    raise ChunkFormatError("a varint in a chunk is longer than 10 bytes")


def _read_values(
    bits: _Bits,
    pos: np.ndarray,
    value: np.ndarray,
    leading: np.ndarray,
    trailing: np.ndarray,
) -> np.ndarray:
    """One XOR-coded value per lane: updates value/leading/trailing in place, returns pos."""
    word = bits.peek(pos)
    changed = (word >> _U64(63)) != 0
    fresh = changed & (((word >> _U64(62)) & _U64(1)) != 0)
    new_lead = ((word >> _U64(57)) & _U64(31)).astype(np.int64)
    mbits_fresh = ((word >> _U64(51)) & _U64(63)).astype(np.int64)
    mbits_fresh = np.where(mbits_fresh == 0, 64, mbits_fresh)
    np.copyto(leading, new_lead, where=fresh)
    np.copyto(trailing, 64 - new_lead - mbits_fresh, where=fresh)
    mbits = 64 - leading - trailing
    start = pos + np.where(fresh, 13, 2)
    meaningful = _top(bits.peek(start), mbits)
    delta = meaningful << trailing.astype(_U64)
    value ^= np.where(changed, delta, _U64(0))
    return np.where(changed, start + mbits, pos + 1)


def decode_xor_chunks(chunks: Sequence[bytes]) -> XorSamples:
    """Every sample of every XOR chunk, in chunk order and time order within a chunk.

    Raises ChunkFormatError when a chunk runs past its own bytes.
    """
    n_chunks = len(chunks)
    if n_chunks == 0:
        empty = np.empty(0, dtype=np.int64)
        return XorSamples(empty, empty, np.empty(0))
    sizes = np.array([len(c) for c in chunks], dtype=np.int64)
    if (sizes < 2).any():
        raise ChunkFormatError("a chunk is shorter than its 2-byte sample count")
    base = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    bits = _Bits(b"".join(chunks))
    counts = (bits.bytes[base].astype(np.int64) << 8) | bits.bytes[base + 1]
    offsets = np.concatenate([[0], np.cumsum(counts)])
    total = int(offsets[-1])
    ts_out = np.empty(total, dtype=np.int64)
    bits_out = np.empty(total, dtype=_U64)
    # lanes longest first: the chunks still going at step k are a prefix
    order = np.argsort(-counts, kind="stable")
    n = counts[order]
    out = offsets[:-1][order]
    pos = (base[order] + 2) * 8
    end = (base[order] + sizes[order]) * 8
    live = int((n > 0).sum())
    pos, n, out, end = pos[:live], n[:live], out[:live], end[:live]
    if live:
        zig, pos = _varints(bits, pos)
        t = ((zig >> _U64(1)).astype(np.int64)) ^ -((zig & _U64(1)).astype(np.int64))
        value = bits.peek(pos)
        pos = pos + 64
        ts_out[out] = t
        bits_out[out] = value
        leading = np.zeros(live, dtype=np.int64)
        trailing = np.zeros(live, dtype=np.int64)
        t_delta = np.zeros(live, dtype=np.int64)
    neg = -n
    for k in range(1, int(n[0]) if live else 0):
        m = int(np.searchsorted(neg, -k, side="left"))  # lanes with more than k samples
        p = pos[:m]
        if k == 1:
            delta, p = _varints(bits, p)
            t_delta[:m] = delta.astype(np.int64)
        else:
            word = bits.peek(p)
            code = (word >> _U64(60)).astype(np.int64)
            prefix, size = _PREFIX[code], _DOD_BITS[code]
            raw = _top(word << prefix.astype(_U64), size)
            wide = size == 64
            if wide.any():  # a delta-of-delta that needs all 64 bits: read past the prefix
                raw[wide] = bits.peek(p[wide] + 4)
            dod = raw.astype(np.int64)
            negative = (
                (size > 0) & (size < 64) & (raw > (_U64(1) << (size - 1).clip(0).astype(_U64)))
            )
            dod = np.where(negative, dod - (np.int64(1) << size.clip(0, 63)), dod)
            t_delta[:m] += dod
            p = p + prefix + size
        t[:m] += t_delta[:m]
        v = value[:m]
        lead, trail = leading[:m], trailing[:m]
        pos[:m] = _read_values(bits, p, v, lead, trail)  # v, lead, trail: views, updated
        ts_out[out[:m] + k] = t[:m]
        bits_out[out[:m] + k] = v
    if live and (pos > end).any():
        raise ChunkFormatError("a chunk's samples run past its bytes (corrupt or not XOR)")
    return XorSamples(counts, ts_out, bits_out.view(np.float64))
