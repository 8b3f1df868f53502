"""Property: on any corruption of a real scrape, parse_exposition never raises and never emits a
value, a GPU or a job that was not in its input."""

from __future__ import annotations

import datetime as dt
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.sources.dcgm_exporter.exposition import parse_exposition
from collector.sources.dcgm_exporter.fields import FIELDS, METRIC_COLUMNS
from tests.infra.examples import examples
from warehouse.schema import RAW_TABLES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm-exporter"
TEXTS = [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.glob("*.txt"))]
T0 = dt.datetime(2026, 11, 2, 8, 0, tzinfo=dt.UTC)
_SAMPLES = RAW_TABLES["gpu_samples"].schema
_FLOAT32 = {c for c in METRIC_COLUMNS if _SAMPLES.field(c).type == pa.float32()}
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")

HUGE = [
    "1e999",
    "-1e999",
    "9" * 400,
    "NaN",
    "+Inf",
    "-Inf",
    "2147483633",
    "9223372036854775794",
    "140737488355330",
    "1e308",
    "-0",
    "0x10",
    "<<<NOT_FOUND>>>",
    "ERROR - FAILED TO CONVERT TO STRING",
]
NAMES = sorted(FIELDS) + ["DCGM_FI_DEV_FAN_SPEED", "x", "DCGM_FI_DEV_GPU_UTIL\x00"]
LABEL_SETS = [
    '{UUID="GPU-fz",Hostname="h"}',
    '{UUID="GPU-fz",Hostname="h",GPU_I_ID="1",GPU_I_PROFILE="1g.10gb",hpc_job="9"}',
    '{uuid="GPU-\\"q\\"",hostname="h\\\\",pod="p",namespace="n"}',
    '{UUID="GPU-fz"',
    "{}",
    "",
]
numbers = st.one_of(
    st.sampled_from(HUGE),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
garbage_line = st.one_of(
    st.text(max_size=80),
    st.builds(
        lambda name, labels, v, tail: f"{name}{labels} {v}{tail}",
        st.sampled_from(NAMES),
        st.sampled_from(LABEL_SETS),
        numbers,
        st.sampled_from(["", " 1762070400000", " x", "}", " 1 2", "\r"]),
    ),
)
edit = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(0, 255)),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("insert"), st.floats(0, 1), garbage_line),
    st.tuples(st.just("number"), st.floats(0, 1), numbers),
    st.tuples(st.just("duplicate"), st.floats(0, 1)),
)


def _corrupt(text: str, edits: list[tuple]) -> str:
    data = bytearray(text.encode("utf-8"))
    for op in edits:
        at = int(op[1] * len(data)) if data else 0
        if op[0] == "flip" and data:
            data[min(at, len(data) - 1)] = op[2]
        elif op[0] == "truncate":
            del data[at:]
        elif op[0] == "insert":
            data[at:at] = ("\n" + op[2] + "\n").encode("utf-8", "surrogatepass")
        elif op[0] == "number":  # replace the value at the end of the line holding `at`
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end
            start = data.rfind(b" ", 0, end) + 1
            data[start:end] = op[2].encode()
        elif op[0] == "duplicate":
            lines = data.split(b"\n")
            i = min(int(op[1] * len(lines)), len(lines) - 1)
            lines.insert(i, lines[i])
            data = bytearray(b"\n".join(lines))
    return data.decode("utf-8", errors="replace")


def _candidates(text: str) -> dict[str, set[object]]:
    """Every value each column could hold from some number written anywhere in `text`."""
    raws = set()
    for token in re.split(r"[\s{}]+", text):
        if _NUMBER.fullmatch(token):
            raw = float(token)
            if math.isfinite(raw):
                raws.add(raw)
    out: dict[str, set[object]] = {c: set() for c in METRIC_COLUMNS}
    for spec in FIELDS.values():
        for raw in raws:
            value = raw * spec.multiply / spec.divide
            if abs(value) > 3.4e38:
                continue  # no column can hold it
            if spec.column in _FLOAT32:
                out[spec.column].add(float(np.float32(value)))
            elif _SAMPLES.field(spec.column).type == pa.bool_():
                out[spec.column].add(value == 1.0)
            elif value.is_integer():
                out[spec.column].add(int(value))
            else:
                out[spec.column].add(value)
    return out


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(text=st.sampled_from(TEXTS), edits=st.lists(edit, max_size=12))
def test_corrupted_scrapes_never_raise_or_invent_values(text, edits):
    corrupted = _corrupt(text, edits)

    result = parse_exposition(
        corrupted, cluster="fz", ts=T0, interval_s=15.0, source="dcgm-exporter", default_node="dn"
    )

    assert result.samples.schema == _SAMPLES
    assert result.events.schema == RAW_TABLES["gpu_events"].schema
    assert result.job_gpus.schema == RAW_TABLES["job_gpus"].schema
    candidates = _candidates(corrupted)
    for row in result.samples.to_pylist():
        assert row["ts"] == T0 and row["cluster"] == "fz"
        for key in ("gpu_uuid", "node", "model", "hpc_job", "k8s_pod"):
            if row[key] is not None and row[key] != "dn":
                assert row[key] in corrupted or _escaped(row[key]) in corrupted, key
        for column in METRIC_COLUMNS:
            value = row[column]
            if value is not None:
                assert value in candidates[column], (column, value)
                assert not (isinstance(value, float) and not math.isfinite(value))
    uuids = set(result.samples.column("gpu_uuid").to_pylist())
    assert set(result.events.column("gpu_uuid").to_pylist()) <= uuids
    assert set(result.job_gpus.column("gpu_uuid").to_pylist()) <= uuids
    for job in result.job_gpus.column("job_id").to_pylist():
        assert job.split("/")[-1] in corrupted or _escaped(job.split("/")[-1]) in corrupted
    # every sample line is counted at most once
    lines_counted = sum(
        n for reason, n in result.counts.items() if reason != "conflicting_duplicate"
    )
    assert lines_counted <= result.lines


@settings(max_examples=examples(200), deadline=None)
@given(text=st.text(max_size=2000))
def test_arbitrary_text_never_raises(text):
    result = parse_exposition(text, cluster="fz", ts=T0, interval_s=15.0, source="x")

    assert result.samples.schema == _SAMPLES
    assert sum(result.counts.values()) <= result.lines + result.counts.get(
        "conflicting_duplicate", 0
    )
