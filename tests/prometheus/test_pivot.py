"""Pivoting Prometheus range vectors into contract tables (collector/sources/prometheus/pivot)."""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.sources.dcgm_exporter.exposition import _parse_block, parse_exposition
from collector.sources.dcgm_exporter.fields import FIELDS, convert
from collector.sources.prometheus.blocks import SeriesBlock, block_from_body, block_from_result
from collector.sources.prometheus.pivot import _COL_ID, _check, pivot_window
from tests.infra.examples import examples

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORDED = FIXTURES / "prometheus"
META = json.loads((RECORDED / "recorded.json").read_text())
END_MS = round(META["time"] * 1000) + 1
START_MS = END_MS - META["range_ms"]
T0 = dt.datetime(2026, 11, 2, 8, 0, tzinfo=dt.UTC)
T0_MS = int(T0.timestamp() * 1000)


def recorded(scenario: str, with_targets: bool = True):
    """The recorded blocks of a scenario and its scrape targets' labels (from `up`)."""
    blocks = [
        block_from_body(p.stem, p.read_bytes())
        for p in sorted((RECORDED / scenario).glob("DCGM_*.json"))
    ]
    targets: dict[str, dict[str, set[str]]] = {}
    for entry in json.loads((RECORDED / scenario / "up.json").read_bytes())["data"]["result"]:
        for name, value in entry["metric"].items():
            targets.setdefault(entry["metric"]["instance"], {}).setdefault(name, set()).add(value)
    frozen = {i: {k: frozenset(v) for k, v in t.items()} for i, t in targets.items()}
    return blocks, (frozen if with_targets else None)


def pivot(scenario: str, **kwargs):
    blocks, targets = recorded(scenario, kwargs.pop("with_targets", True))
    return pivot_window(
        blocks, cluster="c", start_ms=START_MS, end_ms=END_MS, targets=targets, **kwargs
    )


def series(family: str, labels: dict[str, str], points: list[tuple[float, str]]) -> SeriesBlock:
    return block_from_result(family, [{"metric": {"__name__": family, **labels}, "values": points}])


GPU = {"UUID": "GPU-1", "gpu": "0", "Hostname": "n1", "modelName": "NVIDIA H100 80GB HBM3"}


# ------------------------------------------------------------------ parity with the scraper


def _as_blocks(text: str) -> list[SeriesBlock]:
    """One scrape at T0 as Prometheus would return it (the lines Prometheus accepts)."""
    result: dict[str, list[dict]] = defaultdict(list)
    for line in text.splitlines():
        found = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)", line.strip())
        if line.startswith("#") or found is None:
            continue
        try:
            labels = _parse_block(found.group(2)) if found.group(2) else {}
        except Exception:  # noqa: BLE001  (a line Prometheus would refuse too)
            continue
        result[found.group(1)].append(
            {"metric": labels, "values": [[T0_MS / 1000, found.group(3)]]}
        )
    return [block_from_result(name, entries) for name, entries in result.items()]


@pytest.mark.parametrize(
    "name",
    [
        "sample_l4_gpu_operator.txt",
        "sample_t4_gpu_operator_busy.txt",
        "sample_a800_mig_excerpt.txt",
        "sample_datadog_fixture.txt",
        "synthetic_hpc_job_events.txt",
        "synthetic_4.10_renamed.txt",
    ],
)
def test_one_scrape_pivots_to_the_rows_the_exposition_parser_makes(name):
    text = (FIXTURES / "dcgm-exporter" / name).read_text(encoding="utf-8")
    scraped = parse_exposition(text, cluster="c", ts=T0, interval_s=30.0, source="prometheus")

    pulled = pivot_window(
        _as_blocks(text), cluster="c", start_ms=T0_MS, end_ms=T0_MS + 1, interval_s=30.0
    )

    assert pulled.samples.equals(scraped.samples)
    assert pulled.events.equals(scraped.events)
    assert pulled.job_gpus.num_rows == scraped.job_gpus.num_rows  # one ts: runs == observations


_SHARED_FAMILIES = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE")


@st.composite
def _shared_scrape(draw: st.DrawFn) -> str:
    """One scrape of 1-3 GPUs, each with or without a device-level series and 0-3 sharers (an
    `hpc_job` label, or a pod with 1-2 containers) whose series report some of the families with
    values that may disagree; each family's lines in the order the puller sorts series in."""
    series: list[dict[str, str]] = []
    for g in range(draw(st.integers(1, 3))):
        base = {"gpu": str(g), "UUID": f"GPU-{g}", "Hostname": "n1", "modelName": "Tesla T4"}
        if draw(st.booleans()):
            series.append(base)
        for j in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                series.append({**base, "hpc_job": str(10 + j)})
            else:
                for c in range(draw(st.integers(1, 2))):
                    series.append({**base, "namespace": "ns", "pod": f"p{j}", "container": f"c{c}"})
    lines = []
    for family in _SHARED_FAMILIES:
        for labels in sorted(series, key=lambda labels: sorted(labels.items())):
            if draw(st.booleans()):
                block = ",".join(f'{k}="{v}"' for k, v in labels.items())
                lines.append(f"{family}{{{block}}} {draw(st.sampled_from([10, 20]))}")
    return "\n".join(lines)


@settings(max_examples=examples(200), deadline=None)
@given(text=_shared_scrape())
def test_shared_gpus_pivot_to_the_rows_and_counts_the_exposition_parser_makes(text):
    scraped = parse_exposition(text, cluster="c", ts=T0, interval_s=30.0, source="prometheus")

    pulled = pivot_window(
        _as_blocks(text), cluster="c", start_ms=T0_MS, end_ms=T0_MS + 1, interval_s=30.0
    )

    assert pulled.samples.equals(scraped.samples)
    assert pulled.counts.get("conflicting_duplicate", 0) == scraped.counts.get(
        "conflicting_duplicate", 0
    )


def test_each_sharer_of_a_gpu_lands_its_own_values_unless_a_device_series_exists():
    gpu = 'gpu="0",UUID="GPU-0",Hostname="n1"'
    sharers = "\n".join(
        f'DCGM_FI_DEV_FB_USED{{{gpu},hpc_job="{job}"}} {mib}'
        for job, mib in (("1", 100), ("2", 200), ("2", 250))
    ).replace('hpc_job="2"} 250', 'hpc_job="2",pod="x"} 250')
    device = f"DCGM_FI_DEV_FB_USED{{{gpu}}} 1000"

    for text in (sharers, f"{device}\n{sharers}"):
        scraped = parse_exposition(text, cluster="c", ts=T0, interval_s=30.0, source="x")
        pulled = pivot_window(_as_blocks(text), cluster="c", start_ms=T0_MS, end_ms=T0_MS + 1)
        for rows in (scraped.samples, pulled.samples):
            got = list(
                zip(
                    rows.column("job_id").to_pylist(),
                    rows.column("fb_used_mib").to_pylist(),
                    strict=True,
                )
            )
            if text == sharers:
                assert got == [("1", 100.0), ("2", 200.0)]  # job 2's second copy disagrees
            else:
                assert got == [("1", 1000.0), ("2", 1000.0)]  # the device's reading wins
        conflicts = 1 if text == sharers else 0
        assert scraped.counts.get("conflicting_duplicate", 0) == conflicts
        assert pulled.counts.get("conflicting_duplicate", 0) == conflicts


_TOKENS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr),
    st.integers(-(2**40), 2**64).map(str),
    st.sampled_from(
        [
            "NaN",
            "+Inf",
            "-Inf",
            "0",
            "-0",
            "1",
            "2147483632",
            "2147483635",
            "2147483636",
            "9223372036854775808",
            "140737488355328",
            "1e+21",
            "0.999999",
            "1.05",
            "100",
            "105.5",
        ]
    ),
)


@settings(max_examples=examples(300), deadline=None)
@given(name=st.sampled_from(sorted(FIELDS)), tokens=st.lists(_TOKENS, min_size=1, max_size=20))
def test_value_checks_agree_with_dcgm_fields_convert_value_by_value(name, tokens):
    spec = FIELDS[name]
    raw = np.asarray(pa.array(tokens, pa.string()).cast(pa.float64()))
    n = len(tokens)
    value, reason = _check(
        raw,
        np.full(n, _COL_ID[spec.column]),
        np.full(n, spec.multiply),
        np.full(n, spec.divide),
        np.full(n, spec.zero_is_null),
    )
    for i, token in enumerate(tokens):
        cell = convert(spec, token)
        if cell.reason is not None:
            assert reason[i] != 0, (token, cell)
        else:
            assert reason[i] == 0, (token, cell, reason[i])
            assert float(cell.value) == value[i] or (cell.value is True and value[i] == 1.0)


# ------------------------------------------------------------------ recorded bodies


def test_mig_instances_shared_gpus_and_pods_pivot_to_one_row_per_instance_sharer_and_scrape():
    rows = pivot("mig_hpc_k8s")

    samples = rows.samples.to_pylist()
    per_slot = Counter((r["gpu_uuid"][:12], r["mig_instance"], r["job_id"]) for r in samples)
    scrapes = len({r["ts"] for r in samples})
    # every slot once per scrape; GPU B (jobs 6001 and 6002) and GPU D (two pods) are
    # time-sliced: once per sharer, each row carrying its sharer's job (DESIGN §4)
    assert per_slot == {
        ("GPU-aaaaaaaa", 1, None): scrapes,
        ("GPU-aaaaaaaa", 2, None): scrapes,
        ("GPU-bbbbbbbb", None, "6001"): scrapes,
        ("GPU-bbbbbbbb", None, "6002"): scrapes,
        ("GPU-cccccccc", None, None): scrapes,
        ("GPU-dddddddd", None, "team-a/trainer-0"): scrapes,
        ("GPU-dddddddd", None, "team-a/trainer-1"): scrapes,
    }
    mig = [r for r in samples if r["mig_instance"] is not None]
    assert {(r["mig_instance"], r["mig_profile"], r["hpc_job"]) for r in mig} == {
        (1, "3g.40gb", "5001"),
        (2, "3g.40gb", "5002"),
    }
    shared = [r for r in samples if r["gpu_uuid"].startswith("GPU-bbbbbbbb")]
    assert all(r["hpc_job"] == r["job_id"] for r in shared)
    assert {r["gpu_util_pct"] for r in shared} == {97.0}  # the device's values on every row
    pods = [r for r in samples if r["gpu_uuid"].startswith("GPU-dddddddd")]
    assert {(r["job_id"], r["k8s_pod"]) for r in pods} == {
        ("team-a/trainer-0", "trainer-0"),
        ("team-a/trainer-1", "trainer-1"),
    }
    assert {r["gpu_util_pct"] for r in pods} == {80.0}  # the device-level series wins
    assert {r["node"] for r in samples} == {"g042", "gk8s01"}
    assert rows.counts == {}


def test_job_labels_become_one_interval_per_contiguous_run():
    jobs = pivot("mig_hpc_k8s").job_gpus.to_pylist()

    got = sorted((j["job_id"], j["gpu_uuid"][:12], j["mig_instance"], j["mapping"]) for j in jobs)
    assert got == [
        ("5001", "GPU-aaaaaaaa", 1, "exporter-label"),
        ("5002", "GPU-aaaaaaaa", 2, "exporter-label"),
        ("6001", "GPU-bbbbbbbb", None, "exporter-label"),
        ("6002", "GPU-bbbbbbbb", None, "exporter-label"),
        ("777_3", "GPU-cccccccc", None, "exporter-label"),
        ("team-a/trainer-0", "GPU-dddddddd", None, "exporter-label"),
        ("team-a/trainer-1", "GPU-dddddddd", None, "exporter-label"),
    ]
    span = {(j["end_ts"] - j["start_ts"]).total_seconds() for j in jobs}
    assert span == {11.0}  # 11 scrapes 1 s apart, each standing for 1 s


def test_a_job_label_that_changes_splits_the_gpu_time_between_two_intervals():
    jobs = {j["job_id"]: j for j in pivot("scripted").job_gpus.to_pylist()}

    assert jobs["6001"]["end_ts"] == jobs["6002"]["start_ts"]
    assert jobs["6001"]["gpu_uuid"] == jobs["6002"]["gpu_uuid"]
    assert jobs["5001"]["end_ts"] - jobs["5001"]["start_ts"] == dt.timedelta(seconds=11)


def test_the_scrape_targets_own_pod_is_not_taken_for_a_job():
    with_targets = {j["job_id"] for j in pivot("mig_hpc_k8s").job_gpus.to_pylist()}
    without = {j["job_id"] for j in pivot("mig_hpc_k8s", with_targets=False).job_gpus.to_pylist()}

    assert "gpu-operator/nvidia-dcgm-exporter-7x2kq" in without
    assert "gpu-operator/nvidia-dcgm-exporter-7x2kq" not in with_targets


def test_health_events_are_edges_not_every_sample():
    events = pivot("scripted").events.to_pylist()

    kinds = Counter(e["kind"] for e in events)
    assert kinds == {"xid": 1, "hw_slowdown": 1, "thermal": 1, "ecc_dbe": 1}
    xid = next(e for e in events if e["kind"] == "xid")
    assert (xid["code"], xid["detail"]) == (79, "GPU has fallen off the bus")
    dbe = next(e for e in events if e["kind"] == "ecc_dbe")
    assert dbe["ts"] > xid["ts"]  # the DBE count rose a second after the XID


def test_renamed_fields_land_in_the_contracts_units():
    row = pivot("renamed_4_10").samples.to_pylist()[0]

    assert row["node"] == "cp-bm14r7"
    assert row["sm_clock_mhz"] == 660.0  # 660000000 Hz
    assert row["gpu_util_pct"] == pytest.approx(91.0)  # ratio 0.91
    assert row["fb_used_mib"] == 5120.0  # 5368709120 bytes
    assert row["mem_temp_c"] is None  # 0 on a GDDR board
    assert row["pcie_rx_bps"] is not None


def test_both_generations_of_the_simulator_agree_on_units():
    old = pivot("scripted").samples  # ≤4.8 names
    new = pivot("sim_4_9").samples  # ≥4.9 names
    assert old.num_rows and new.num_rows
    for table in (old, new):
        util = [v for v in table.column("gpu_util_pct").to_pylist() if v is not None]
        assert util and all(0 <= v <= 100 for v in util)


def test_a800_mig_gpu_without_gpu_util_still_has_its_rows():
    samples = pivot("a800_mig").samples.to_pylist()

    mig = [r for r in samples if r["mig_instance"] is not None]
    assert {r["mig_instance"] for r in mig} == {3, 5, 6}
    assert all(r["gpu_util_pct"] is None for r in mig)  # not exported for MIG GPUs
    assert all(r["energy_j"] == pytest.approx(257858.316) for r in mig)  # mJ → J, per instance


def test_response_order_does_not_change_the_rows():
    blocks, targets = recorded("mig_hpc_k8s")
    shuffled = []
    rng = random.Random(3)
    for block in blocks:
        result = json.loads((RECORDED / "mig_hpc_k8s" / f"{block.family}.json").read_bytes())[
            "data"
        ]["result"]
        rng.shuffle(result)
        shuffled.append(block_from_result(block.family, result))
    rng.shuffle(shuffled)

    a = pivot_window(blocks, cluster="c", start_ms=START_MS, end_ms=END_MS, targets=targets)
    b = pivot_window(shuffled, cluster="c", start_ms=START_MS, end_ms=END_MS, targets=targets)

    assert (
        a.samples.equals(b.samples) and a.events.equals(b.events) and a.job_gpus.equals(b.job_gpus)
    )


# ------------------------------------------------------------------ windows and look-back


def test_only_samples_inside_the_window_land():
    block = series(
        "DCGM_FI_DEV_GPU_UTIL", GPU, [(9.999, "1"), (10.0, "2"), (19.999, "3"), (20.0, "4")]
    )

    rows = pivot_window([block], cluster="c", start_ms=10_000, end_ms=20_000)

    assert rows.samples.column("gpu_util_pct").to_pylist() == [2.0, 3.0]


def test_the_look_back_tells_whether_a_sticky_xid_is_new():
    old = series("DCGM_FI_DEV_XID_ERRORS", GPU, [(590.0, "79"), (600.0, "79"), (610.0, "79")])
    new = series("DCGM_FI_DEV_XID_ERRORS", GPU, [(590.0, "0"), (600.0, "79"), (610.0, "79")])

    kept = pivot_window([old], cluster="c", start_ms=600_000, end_ms=700_000)
    raised = pivot_window([new], cluster="c", start_ms=600_000, end_ms=700_000)

    assert kept.events.num_rows == 0  # the XID was already there before the window
    assert raised.events.column("ts").cast(pa.int64()).to_pylist() == [600_000]
    assert kept.samples.num_rows == 2  # the look-back sample does not land


def test_families_scraped_together_share_one_row():
    util = series("DCGM_FI_DEV_GPU_UTIL", GPU, [(10.0, "50"), (25.0, "60")])
    power = series("DCGM_FI_DEV_POWER_USAGE", GPU, [(10.0, "300.5"), (25.0, "310.25")])

    rows = pivot_window([util, power], cluster="c", start_ms=0, end_ms=60_000).samples

    assert rows.num_rows == 2
    assert rows.column("power_w").to_pylist() == [300.5, 310.25]
    assert rows.column("interval_s").to_pylist() == [15.0, 15.0]  # measured spacing


def test_a_fixed_interval_overrides_the_measured_one():
    util = series("DCGM_FI_DEV_GPU_UTIL", GPU, [(10.0, "50"), (25.0, "60")])

    rows = pivot_window([util], cluster="c", start_ms=0, end_ms=60_000, interval_s=30.0).samples

    assert rows.column("interval_s").to_pylist() == [30.0, 30.0]


def test_a_job_still_on_the_newest_sample_of_an_open_window_is_running():
    labelled = {**GPU, "hpc_job": "42"}
    util = series("DCGM_FI_DEV_GPU_UTIL", labelled, [(10.0, "50"), (25.0, "60")])

    open_rows = pivot_window([util], cluster="c", start_ms=0, end_ms=60_000, open_window=True)
    closed = pivot_window([util], cluster="c", start_ms=0, end_ms=60_000)

    assert open_rows.job_gpus.column("end_ts").to_pylist() == [None]
    assert closed.job_gpus.column("end_ts").cast(pa.int64()).to_pylist() == [40_000]


def test_a_gap_longer_than_two_intervals_ends_a_run():
    labelled = {**GPU, "hpc_job": "42"}
    points = [(t, "50") for t in (10.0, 25.0, 40.0, 55.0, 200.0, 215.0)]

    jobs = pivot_window(
        [series("DCGM_FI_DEV_GPU_UTIL", labelled, points)], cluster="c", start_ms=0, end_ms=300_000
    ).job_gpus

    assert jobs.column("start_ts").cast(pa.int64()).to_pylist() == [10_000, 200_000]


def test_unplaceable_series_and_bad_values_are_counted_not_landed():
    no_uuid = series("DCGM_FI_DEV_GPU_UTIL", {"gpu": "0", "Hostname": "n1"}, [(10.0, "5")])
    bad = series(
        "DCGM_FI_DEV_GPU_UTIL", GPU, [(10.0, "NaN"), (25.0, "9223372036854775808"), (40.0, "170")]
    )
    unknown = series("DCGM_FI_DEV_MEM_COPY_UTIL", GPU, [(10.0, "5"), (25.0, "6")])

    rows = pivot_window([no_uuid, bad, unknown], cluster="c", start_ms=0, end_ms=60_000)

    assert rows.counts == {
        "no_gpu_uuid": 1,
        "not_finite": 1,
        "sentinel": 1,
        "out_of_range": 1,
        "unknown_metric": 2,
    }
    assert rows.samples.column("gpu_util_pct").to_pylist() == [
        None,
        None,
        None,
    ]  # reported, no value


def test_the_instance_names_the_node_when_no_host_label_is_set():
    labels = {"UUID": "GPU-9", "gpu": "1", "instance": "10.1.2.3:9400"}

    rows = pivot_window(
        [series("DCGM_FI_DEV_GPU_UTIL", labels, [(10.0, "5")])],
        cluster="c",
        start_ms=0,
        end_ms=60_000,
    )

    assert rows.samples.column("node").to_pylist() == ["10.1.2.3"]


def test_a_window_with_one_scrape_per_gpu_takes_the_spacing_an_earlier_window_measured():
    # the last window before the exporters stop can hold one scrape per GPU: it has no spacing
    # of its own, and the 15 s default would count a 1 s scrape fifteen times over
    first = series("DCGM_FI_DEV_GPU_UTIL", GPU, [(0.0, "50"), (1.0, "60"), (2.0, "70")])
    last = series("DCGM_FI_DEV_GPU_UTIL", GPU, [(60.0, "50")])

    measured = pivot_window([first], cluster="c", start_ms=0, end_ms=60_000)
    alone = pivot_window([last], cluster="c", start_ms=60_000, end_ms=120_000)
    carried = pivot_window(
        [last], cluster="c", start_ms=60_000, end_ms=120_000,
        fallback_interval_s=measured.spacing_s,
    )  # fmt: skip

    assert measured.spacing_s == 1.0
    assert alone.spacing_s is None
    assert alone.samples.column("interval_s").to_pylist() == [15.0]  # nothing to go by
    assert carried.samples.column("interval_s").to_pylist() == [1.0]


def test_a_gpu_relabelled_in_the_window_lands_each_row_under_the_host_that_reported_it():
    """One UUID on host n1, then (renamed, or the exporter restarted with another Hostname)
    on n1-new: each row and each job interval is under the host of its own samples. Before,
    the window's first series named them all, so up to a window of rows took the old host."""
    job = {"hpc_job": "42"}
    renamed = {**GPU, "Hostname": "n1-new"}
    blocks = [
        block_from_result(
            "DCGM_FI_DEV_GPU_UTIL",
            [
                {
                    "metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", **labels, **job},
                    "values": [[t, "50"] for t in times],
                }
                for labels, times in ((GPU, (0.0, 30.0, 60.0)), (renamed, (90.0, 120.0)))
            ],
        )
    ]

    rows = pivot_window(blocks, cluster="c", start_ms=0, end_ms=150_000)

    samples = rows.samples.select(["ts", "node", "gpu_uuid"]).to_pylist()
    assert [(r["ts"].timestamp(), r["node"]) for r in samples] == [
        (0.0, "n1"),
        (30.0, "n1"),
        (60.0, "n1"),
        (90.0, "n1-new"),
        (120.0, "n1-new"),
    ]
    runs = sorted(
        (r["node"], r["start_ts"].timestamp(), r["end_ts"].timestamp())
        for r in rows.job_gpus.to_pylist()
    )
    assert runs == [("n1", 0.0, 90.0), ("n1-new", 90.0, 150.0)]
