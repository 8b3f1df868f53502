"""The Job page's per-GPU charts stay readable for any number of GPUs: one line per GPU for a
small job, and for a big one a min-max band, the median and the few worst GPUs, with a short
legend and the full axis titles."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from app import charts
from app.bench.dashboard_timing import PAGES
from tests.marts import rows as r

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
TITLES = ["busy (%)", "SM active (%)", "tensor active (%)", "memory used (GiB)", "power (W)"]
MAX_SERIES = 2 + charts.TIMELINE_WORST  # band, median and the worst GPUs


def timeline(nodes: int, per_node: int, buckets: int = 12) -> pl.DataFrame:
    """A job_gpu_timeline frame: GPU i of the job is busy (i + 1) / (gpus + 1) of the time."""
    gpus = [f"n{n:02d}:{i}" for n in range(nodes) for i in range(per_node)]
    t0 = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
    rows = [
        {
            "gpu": gpu,
            "bucket": t0 + dt.timedelta(minutes=5 * b),
            "busy": (k + 1) / (len(gpus) + 1),
            "gpu_util": 0.9,
            "sm_active": 0.5,
            "tensor_active": 0.3,
            "dram_active": 0.2,
            "fb_used_gib": 40.0 + k,
            "power_w": 300.0 + k,
        }
        for k, gpu in enumerate(gpus)
        for b in range(buckets)
    ]
    return pl.DataFrame(rows)


def layers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec.get("layer", [spec])


def colour_series(spec: dict[str, Any]) -> set[str]:
    """The series one chart colours (its legend entries): the colour scale's domain, or the
    values of the colour field in its data."""
    series: set[str] = set()
    for layer in layers(spec):
        colour = layer.get("encoding", {}).get("color", {})
        domain = colour.get("scale", {}).get("domain")
        if domain:
            series.update(domain)
        elif "field" in colour:
            for rows in spec.get("datasets", {}).values():
                series.update(str(row[colour["field"]]) for row in rows if colour["field"] in row)
    return series


def y_titles(spec: dict[str, Any]) -> set[str]:
    return {layer["encoding"]["y"]["title"] for layer in layers(spec) if "y" in layer["encoding"]}


def test_a_64_gpu_job_gets_a_band_the_median_and_the_worst_gpus():
    frame = timeline(nodes=8, per_node=8)
    panels = charts.job_gpu_timelines(frame)

    assert list(panels) == TITLES
    worst = charts.timeline_worst_gpus(frame)
    assert worst == ["n00:0", "n00:1", "n00:2"]  # the lowest mean busy
    for title, chart in panels.items():
        assert chart is not None
        spec = chart.to_dict()
        series = colour_series(spec)
        assert len(series) <= MAX_SERIES, (title, series)
        assert series == {"min–max of 64 GPUs", "median GPU", *worst}
        assert y_titles(spec) == {title}  # the whole title, on every layer
        assert chart.height == 220


def test_a_small_job_keeps_one_line_per_gpu():
    frame = timeline(nodes=1, per_node=4)
    panels = charts.job_gpu_timelines(frame)

    for title, chart in panels.items():
        assert isinstance(chart, charts.alt.Chart)
        spec = chart.to_dict()
        assert spec["mark"]["type"] == "line"
        assert spec["encoding"]["color"]["field"] == "gpu"
        assert colour_series(spec) == {f"n00:{i}" for i in range(4)}
        assert y_titles(spec) == {title}


def test_up_to_the_threshold_every_gpu_has_its_line():
    frame = timeline(nodes=1, per_node=charts.TIMELINE_LINES_MAX)
    chart = charts.job_gpu_timelines(frame)["busy (%)"]

    assert chart is not None
    assert len(colour_series(chart.to_dict())) == charts.TIMELINE_LINES_MAX


@pytest.fixture(scope="module")
def big_job_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake with one 16-GPU job on two nodes (GPU 0 of g002 idle) and a 2-GPU job."""
    root = tmp_path_factory.mktemp("big-job-lake")
    times = range(0, 3600, 60)
    gpus = [(node, i) for node in ("g001", "g002") for i in range(8)]
    samples = [
        row
        for node, i in gpus
        for row in r.samples(
            times,
            node=node,
            gpu_index=i,
            interval_s=60.0,
            engine_active=0.0 if (node, i) == ("g002", 0) else 0.8,
            sm_active=0.6,
            tensor_active=0.3,
            fb_used_mib=40_000.0,
            power_w=350.0,
        )
    ] + [
        row
        for i in (0, 1)
        for row in r.samples(times, node="g003", gpu_index=i, interval_s=60.0, engine_active=0.5)
    ]
    r.build_lake(
        root,
        samples=samples,
        jobs=[r.job("big", 0, 3600, gpus=16), r.job("small", 0, 3600, gpus=2)],
        job_gpus=[r.job_gpu("big", 0, 3600, node=n, gpu_index=i) for n, i in gpus]
        + [r.job_gpu("small", 0, 3600, node="g003", gpu_index=i) for i in (0, 1)],
    )
    return root


def open_job(lake: Path, job_id: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
    for name in ("GPULEDGER_DASHBOARD_MANAGERS", "GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR"):
        monkeypatch.delenv(name, raising=False)
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.session_state["job_id_input"] = job_id
    at.switch_page(PAGES["job"])
    at.run()
    assert not at.exception, at.exception
    return at


def page_specs(at: AppTest) -> list[dict[str, Any]]:
    elements = list(at.get("arrow_vega_lite_chart")) + list(at.get("vega_lite_chart"))
    return [json.loads(e.proto.spec) for e in elements]


def test_the_job_page_draws_a_big_job_with_short_legends(big_job_lake, monkeypatch):
    at = open_job(big_job_lake, "big", monkeypatch)

    specs = page_specs(at)
    assert specs, "no chart"
    for spec in specs:
        series = colour_series(spec)
        assert 0 < len(series) <= MAX_SERIES, series
        assert "min–max of 16 GPUs" in series
        assert "g002:0" in series  # the idle GPU is among the worst
    assert any("16 GPUs: the grey band" in c.value for c in at.caption)


def test_the_job_page_draws_a_small_job_gpu_by_gpu(big_job_lake, monkeypatch):
    at = open_job(big_job_lake, "small", monkeypatch)

    specs = page_specs(at)
    assert specs
    for spec in specs:
        assert spec["encoding"]["color"]["field"] == "gpu"
    assert not any("grey band" in c.value for c in at.caption)


def _time_encodings(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every temporal x and tooltip encoding of a chart's layers."""
    found = []
    for layer in layers(spec):
        encoding = layer.get("encoding", {})
        x = encoding.get("x", {})
        if x.get("type") == "temporal":
            found.append(("x", x))
        tips = encoding.get("tooltip", [])
        for tip in tips if isinstance(tips, list) else [tips]:
            if tip.get("type") == "temporal":
                found.append(("tooltip", tip))
    return found


@pytest.mark.parametrize("nodes", [1, 8], ids=["lines", "band"])
def test_times_are_drawn_in_utc_whatever_the_browsers_zone(nodes):
    """Without a UTC scale Vega-Lite draws times in the browser's zone: a manager in New York
    saw the Overview's spikes 5 hours off under "time (UTC)" (a probe's screenshots)."""
    frame = timeline(nodes, 8)
    state = (
        frame.select("bucket")
        .unique()
        .with_columns(
            active=pl.lit(1.0),
            idle_allocated=pl.lit(0.0),
            unallocated=pl.lit(0.0),
            unobserved=pl.lit(0.0),
        )
    )
    specs = [charts.gpu_state_area(state).to_dict()]
    specs += [chart.to_dict() for chart in charts.job_gpu_timelines(frame).values() if chart]

    found = [item for spec in specs for item in _time_encodings(spec)]

    assert {kind for kind, _ in found} == {"x", "tooltip"}
    for kind, encoding in found:
        if kind == "x":
            assert encoding.get("scale", {}).get("type") == "utc", encoding
            # a probe read 18:30 as "06:30" beside "07 PM", with no axis title saying UTC
            assert encoding.get("title") == "time (UTC)", encoding
            assert encoding["axis"]["labelExpr"] == charts.UTC_TICK_LABEL
        else:
            assert str(encoding.get("timeUnit", "")).startswith("utc"), encoding
