"""Remote read: XOR chunks decoded exactly, the request Prometheus reads, the stream's series and
ranges, and the puller landing over it what it lands over JSON (collector/sources/prometheus/
remote_read.py, xor_chunks.py, pull.py). The real server is in test_remote_read_live.py."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import re
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

from collector.errors import ConfigError
from collector.sources.prometheus.blocks import PrometheusResponseError
from collector.sources.prometheus.pull import PullConfig, pull
from collector.sources.prometheus.remote_read import (
    Matcher,
    RangeQuery,
    RemoteReadUnsupported,
    blocks_from_stream,
    encode_read_request,
    parse_selector,
)
from collector.sources.prometheus.transport import PrometheusUnavailable
from collector.sources.prometheus.xor_chunks import ChunkFormatError, decode_xor_chunks
from tests.infra.remote_read import STALE_NAN, Series, decode_request, encode_xor_chunk, stream
from warehouse.lake import Lake


def _bits(values: np.ndarray) -> list[int]:
    return np.asarray(values, dtype=np.float64).view(np.uint64).tolist()


def _as_bits(values: list[float]) -> list[int]:
    return [struct.unpack("<Q", struct.pack("<d", v))[0] for v in values]


# ---------------------------------------------------------------- XOR chunks


def _series_cases() -> list[list[tuple[int, float]]]:
    rng = random.Random(24)
    t0 = 1_793_577_600_000
    cases = [
        [(t0, 42.0)],  # one sample
        [(t0, 1.0), (t0 + 15_000, 1.0)],  # two
        [(t0 + 15_000 * i, 7.0) for i in range(120)],  # constant
        [(t0 + 15_000 * i, float(i % 100)) for i in range(120)],  # integers
        [(t0 + 15_000 * i + rng.randint(-40, 40), rng.random() * 1e6) for i in range(120)],
        [(t0 + 15_000 * i, v) for i, v in enumerate([0.0, math.nan, math.inf, -math.inf, -0.0])],
        [(t0, 1.5), (t0 + 1, 2.5), (t0 + 10_000_000_000, 3.5), (t0 + 10_000_000_015, 3.5)],
        [(-5_000, 1.0), (-4_000, 2.0), (3_000, 2.0)],  # times before the epoch
        [(t0 + i * i * 997, float(2**i)) for i in range(60)],  # growing gaps: every dod size
        [(t0 + 15_000 * i, STALE_NAN if i == 3 else 1e-300 * i) for i in range(10)],
    ]
    return cases


def test_xor_chunks_decode_to_the_samples_prometheus_encoded():
    cases = _series_cases()
    decoded = decode_xor_chunks([encode_xor_chunk(c) for c in cases])

    assert decoded.lengths.tolist() == [len(c) for c in cases]
    assert decoded.ts_ms.tolist() == [t for c in cases for t, _ in c]
    assert _bits(decoded.values) == _as_bits([v for c in cases for _, v in c])  # bit for bit


def test_a_chunk_cut_short_is_an_error_not_garbage():
    chunk = encode_xor_chunk([(1_000 * i, float(i) * 1.1) for i in range(100)])

    with pytest.raises(ChunkFormatError):
        decode_xor_chunks([chunk[: len(chunk) // 2]])
    assert decode_xor_chunks([]).ts_ms.size == 0


# ---------------------------------------------------------------- request and stream


def test_selectors_become_label_matchers():
    assert parse_selector("") == ()
    assert parse_selector(' cluster="a" , job=~"dcgm.*",pod!=\'x\',ns!~`kube-\\w+`') == (
        Matcher("cluster", "=", "a"),
        Matcher("job", "=~", "dcgm.*"),
        Matcher("pod", "!=", "x"),
        Matcher("ns", "!~", "kube-\\w+"),
    )
    assert parse_selector(r'a="say \"hi\"\n"') == (Matcher("a", "=", 'say "hi"\n'),)
    for bad in ('cluster="a"}', "cluster=a", 'cluster="a" job="b"', "rate(x[5m])"):
        with pytest.raises(ConfigError):
            parse_selector(bad)


def test_the_request_asks_for_streamed_chunks_with_the_matchers():
    queries = [
        RangeQuery(-2, 3_599_999, (Matcher("__name__", "=~", "A|B"), Matcher("c", "!=", "x"))),
        RangeQuery(1_000, 2_000, (Matcher("c", "=", "é" * 40_000),)),  # over 64 KiB: 2 literals
    ]
    decoded, types = decode_request(encode_read_request(queries))

    assert types == [1]  # STREAMED_XOR_CHUNKS
    assert [(q.start_ms, q.end_ms) for q in decoded] == [(-2, 3_599_999), (1_000, 2_000)]
    assert decoded[0].matchers == [(2, "__name__", "A|B"), (1, "c", "x")]
    assert decoded[1].matchers == [(0, "c", "é" * 40_000)]


def test_the_stream_keeps_each_querys_range_drops_stale_markers_and_joins_split_series():
    gpu0 = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "UUID": "GPU-0", "Hostname": "n1"}
    gpu1 = {**gpu0, "UUID": "GPU-1"}
    xid = {**gpu0, "__name__": "DCGM_FI_DEV_XID_ERRORS"}
    samples = [(1_000 * i, float(i)) for i in range(300)]
    stale = [(t, STALE_NAN if t == 150_000 else v) for t, v in samples]
    body = stream(
        [(0, Series(gpu0, stale)), (0, Series(gpu1, samples[:5])), (1, Series(xid, samples))],
        per_chunk=120,
        frames_per=3,  # every series split over frames
    )
    queries = [RangeQuery(100_000, 199_999, ()), RangeQuery(50_000, 199_999, ())]

    blocks = {b.family: b for b in blocks_from_stream(body, queries)}

    util = blocks["DCGM_FI_DEV_GPU_UTIL"]
    assert util.labels == [gpu0]  # GPU-1 has no sample in the range: no series
    assert util.lengths.tolist() == [99]  # 100 s .. 199 s less the stale marker
    assert np.round(util.ts_s * 1000).astype(int).tolist() == [
        t for t, _ in samples if 100_000 <= t < 200_000 and t != 150_000
    ]
    assert util.values.type == pa.float64()
    events = blocks["DCGM_FI_DEV_XID_ERRORS"]
    assert events.lengths.tolist() == [150]  # the look-back query's wider range
    assert events.values.to_pylist() == [float(i) for i in range(50, 200)]
    part = util.between(120_000, 129_999)
    assert part.lengths.tolist() == [10] and part.labels == [gpu0]
    assert util.between(0, 1).labels == []


def test_a_stream_that_does_not_decode_is_a_response_error():
    good = stream([(0, Series({"__name__": "X"}, [(1, 1.0), (2, 2.0)]))])
    with pytest.raises(PrometheusResponseError):
        blocks_from_stream(good[:-3], [RangeQuery(0, 10, ())])


# ---------------------------------------------------------------- the puller over remote read

T0 = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
T0_MS = int(T0.timestamp() * 1000)
_JSON_QUERY = re.compile(r"^(?P<family>\w+)(?:\{(?P<sel>.*)\})?\[(?P<ms>\d+)ms\]$")
FAMILIES = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS")


class ChunkPrometheus:
    """Two GPUs of three families every 15 s for 6 h, over JSON and remote read alike."""

    url = "http://fake:9090"

    def __init__(self, *, remote: str = "ok", fail: int = 0) -> None:
        self.remote = remote  # ok | unsupported | garbled (chunk headers the data contradicts)
        self.fail = fail  # remote reads that fail (connection refused) before one succeeds
        self.reads: list[list[tuple[int, int]]] = []
        self.json_queries = 0
        self.held: list[Series] = []
        for family in FAMILIES:
            for g in range(2):
                labels = {
                    "__name__": family,
                    "UUID": f"GPU-{g}",
                    "gpu": str(g),
                    "Hostname": "n1",
                    "hpc_job": str(7 + g),
                }
                points = [
                    (T0_MS + 15_000 * k + 250 * g, float((k * (g + 3)) % 97) + 0.5)
                    for k in range(6 * 240)
                ]
                if family.endswith("XID_ERRORS"):
                    points = [(t, 0.0 if k < 700 else 43.0) for k, (t, _) in enumerate(points)]
                self.held.append(Series(labels, points))

    def _between(self, family: str, lo: int, hi: int) -> list[Series]:
        return [
            Series(s.labels, [(t, v) for t, v in s.samples if lo <= t <= hi])
            for s in self.held
            if s.labels["__name__"] == family
        ]

    def range_vector(self, query: str, at_s: float) -> bytes:
        self.json_queries += 1
        found = _JSON_QUERY.match(query)
        assert found, query
        hi = round(at_s * 1000)
        result = [
            {"metric": s.labels, "values": [[t / 1000, repr(v)] for t, v in s.samples]}
            for s in self._between(found["family"], hi - int(found["ms"]), hi)
            if s.samples
        ]
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        return json.dumps(body, separators=(",", ":")).encode()

    def read_chunks(self, request: bytes) -> bytes:
        if self.fail > 0:
            self.fail -= 1
            raise PrometheusUnavailable("connection refused")
        if self.remote == "unsupported":
            raise RemoteReadUnsupported("HTTP 404 from /api/v1/read")
        queries, _ = decode_request(request)
        self.reads.append([(q.start_ms, q.end_ms) for q in queries])
        out = []
        for i, q in enumerate(queries):
            names = next(v for _, n, v in q.matchers if n == "__name__").split("|")
            for family in names:
                for s in self._between(family, q.start_ms, q.end_ms):
                    # whole chunks, as Prometheus sends: pad the range out to chunk edges
                    full = [x for x in self.held if x.labels == s.labels][0].samples
                    kept = [
                        p for p in full if q.start_ms - 1_800_000 <= p[0] <= q.end_ms + 1_800_000
                    ]
                    if s.samples:
                        out.append((i, Series(s.labels, kept)))
        return stream(out, per_chunk=120, skew_ms=1 if self.remote == "garbled" else 0)

    def family_names(self, match: str, start_s: float, end_s: float) -> list[str]:
        return [*FAMILIES, "DCGM_FI_DEV_MEM_COPY_UTIL", "up"]

    def series(self, match: str, start_s: float, end_s: float) -> list[dict[str, str]]:
        return []

    def close(self) -> None:
        pass


def _pull(tmp_path, name: str, server, **kwargs) -> dict[str, pa.Table]:
    lake = tmp_path / name
    cfg = PullConfig(
        cluster="c",
        since=T0,
        until=T0 + dt.timedelta(hours=6),
        settle_s=0.0,
        backoff_s=0.0,
        **kwargs,
    )
    pull(cfg, Lake(lake), server, clock=lambda: T0 + dt.timedelta(days=1))
    tables = {}
    for table in ("gpu_samples", "gpu_events", "job_gpus"):
        data = pads.dataset(lake / table, format="parquet", partitioning="hive").to_table()
        data = data.drop_columns([c for c in data.column_names if c.startswith("_")])
        keys = [f.name for f in data.schema if not pa.types.is_nested(f.type)]
        tables[table] = data.sort_by([(c, "ascending") for c in keys])
    return tables


def test_remote_read_lands_the_rows_json_lands_in_fewer_requests(tmp_path):
    server = ChunkPrometheus()
    over_json = _pull(tmp_path, "json", server, protocol="json", window_s=1800)
    asked = server.json_queries
    over_read = _pull(tmp_path, "read", server, protocol="remote-read", window_s=1800)

    assert server.json_queries == asked  # remote read asked nothing of the JSON API
    for table, rows in over_json.items():
        assert rows.num_rows > 0 and over_read[table].equals(rows), table
    assert over_json["gpu_samples"].num_rows == 2 * 6 * 240
    assert over_json["gpu_events"].num_rows == 2  # the XID turning 43, once per GPU
    # the first read is one window (to size the rest); then groups of windows, each with the
    # event families' look-back
    first, *rest = server.reads
    assert first == [(T0_MS - 2, T0_MS + 1_799_999), (T0_MS - 300_002, T0_MS + 1_799_999)]
    assert 1 <= len(rest) < 11


def test_remote_read_failures_are_retried_and_an_old_server_falls_back_to_json(tmp_path):
    reference = _pull(tmp_path, "json", ChunkPrometheus(), protocol="json")
    flaky = ChunkPrometheus(fail=2)
    retried = _pull(tmp_path, "retried", flaky, retries=2)
    old = ChunkPrometheus(remote="unsupported")
    fell_back = _pull(tmp_path, "old", old)

    assert flaky.reads and flaky.json_queries == 0
    assert old.json_queries > 0
    for table, rows in reference.items():
        assert retried[table].equals(rows) and fell_back[table].equals(rows), table
    with pytest.raises(Exception, match="404"):
        _pull(tmp_path, "strict", ChunkPrometheus(remote="unsupported"), protocol="remote-read")


def test_chunks_that_contradict_their_headers_are_never_landed(tmp_path):
    reference = _pull(tmp_path, "json", ChunkPrometheus(), protocol="json")
    garbled = ChunkPrometheus(remote="garbled")

    assert garbled.json_queries == 0
    fell_back = _pull(tmp_path, "auto", garbled)  # auto: warned once, then the JSON API
    assert garbled.reads and garbled.json_queries > 0
    for table, rows in reference.items():
        assert fell_back[table].equals(rows), table
    with pytest.raises(Exception, match="do not give"):
        _pull(tmp_path, "strict", ChunkPrometheus(remote="garbled"), protocol="remote-read")


@pytest.mark.parametrize("framing", ["close", "length", "chunked"])
def test_a_stream_whose_end_is_not_marked_is_refused_not_taken_as_whole(framing):
    # A streamed answer has no end marker: a body cut at a frame boundary by a proxy speaking
    # HTTP/1.0 (the connection's close ends it) decoded as a whole one with fewer series, and
    # the collector moved its checkpoint past the rest. Only chunked or sized bodies are read
    # (`auto` then pulls through the JSON API).
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from collector.sources.prometheus.remote_read import CONTENT_TYPE
    from collector.sources.prometheus.transport import ApiClientTransport

    body = stream([(0, Series({"__name__": "DCGM_FI_DEV_GPU_UTIL"}, [(T0_MS, 1.0)]))])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if framing == "chunked" else "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            if framing == "length":
                self.send_header("Content-Length", str(len(body)))
            if framing == "chunked":
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
            self.end_headers()
            if framing == "chunked":
                self.wfile.write(f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
            else:
                self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    transport = ApiClientTransport(f"http://127.0.0.1:{server.server_address[1]}")
    try:
        if framing == "close":
            with pytest.raises(RemoteReadUnsupported, match="without marking where they end"):
                transport.read_chunks(b"request")
        else:
            assert transport.read_chunks(b"request") == body
    finally:
        transport.close()
        server.shutdown()
        server.server_close()


def _pull_with(root: Path, selector: str) -> None:
    """An hour's one-shot pull of cluster c from the fake server, with `selector`."""
    from collector.sources.prometheus.pull import PullConfig, pull

    cfg = PullConfig(
        cluster="c",
        since=T0,
        until=T0 + dt.timedelta(hours=1),
        settle_s=0.0,
        backoff_s=0.0,
        selector=selector,
    )
    pull(cfg, Lake(root), ChunkPrometheus(), clock=lambda: T0 + dt.timedelta(days=1))


def test_the_same_matchers_written_otherwise_are_refused_not_pulled_twice(tmp_path):
    # the selector's text names a pull's checkpoint and batches: `job="x",cluster="c"` after
    # `cluster="c",job="x"` landed every window a second time
    _pull_with(tmp_path, 'Hostname="n1",gpu=~"0|1"')
    _pull_with(tmp_path, 'Hostname="n1",gpu=~"0|1"')  # the same text: resumes, fine
    with pytest.raises(ConfigError, match="written otherwise"):
        _pull_with(tmp_path, 'gpu=~"0|1", Hostname="n1"')
    _pull_with(tmp_path, 'Hostname="n2"')  # other matchers, no series in common: another pull


@pytest.mark.parametrize(
    ("wider", "message"),
    [
        ('Hostname="n1"', "'Hostname=\"n1\"' selects every series"),
        ("", "no selector selects every series"),
    ],
)
def test_a_selector_selecting_every_series_of_another_is_refused(tmp_path, wider, message):
    """Overlapping selectors on one cluster landed the series both select twice (the probe:
    none, then cluster="probe", then job="dcgm": every row three times). Where one's matchers
    are a part of the other's, the overlap is certain: refused, in either order."""
    narrower = 'Hostname="n1",gpu=~"0|1"'
    _pull_with(tmp_path / "a", narrower)
    with pytest.raises(ConfigError, match=re.escape(message)):
        _pull_with(tmp_path / "a", wider)
    _pull_with(tmp_path / "b", wider)
    with pytest.raises(ConfigError, match=re.escape(message)):
        _pull_with(tmp_path / "b", narrower)


@pytest.mark.slow  # (the answer's deadline is the query timeout and 5 s for Prometheus' own)
@pytest.mark.parametrize("how", ["range_vector", "read_chunks"])
def test_a_server_that_trickles_its_answer_is_given_up_on_at_the_deadline(how):
    # each byte came within the read timeout, so the body was read forever (a dcgm-exporter
    # doing so held that collector past SIGTERM)
    import socket
    import threading
    import time

    from collector.sources.prometheus.transport import ApiClientTransport

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
        try:
            while not stop.wait(0.2):
                conn.sendall(b" ")
        except OSError:
            pass  # the client hung up: what it should do
        finally:
            conn.close()

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    transport = ApiClientTransport(f"http://127.0.0.1:{server.getsockname()[1]}", timeout_s=0.5)
    began = time.monotonic()
    try:
        with pytest.raises(PrometheusUnavailable, match="did not end within 5.5 s"):
            if how == "range_vector":
                transport.range_vector("up", 0.0)
            else:
                transport.read_chunks(b"")
        assert time.monotonic() - began < 8.0
    finally:
        stop.set()
        thread.join(5)
        server.close()
        transport.close()
