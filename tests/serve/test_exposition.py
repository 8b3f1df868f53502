"""`gpuledger serve`'s figures on hand-made lake rows: exact values, the per-job cap, windows
cut at the end of the data, open findings and current recommendations, and an empty lake."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.serve.exposition import METRICS, render_metrics
from app.serve.figures import read_figures
from app.serve.settings import ServeSettings
from tests.marts import rows as r
from warehouse.attribution import AttributionConfig
from warehouse.lake import Lake

SAMPLE = re.compile(r"^([a-z_]+)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> dict[str, dict[frozenset[tuple[str, str]], float]]:
    """{metric: {label set: value}} of an exposition text; checks HELP/TYPE come first."""
    out: dict[str, dict[frozenset[tuple[str, str]], float]] = {}
    declared: list[str] = []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            declared.append(line.split()[2])
            continue
        if line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, line
        name, labels, value = match.groups()
        assert declared and declared[-1] == name, f"{name} outside its family"
        key = frozenset(LABEL.findall(labels or ""))
        assert key not in out.get(name, {}), f"{name}{{{labels}}} twice"  # one per scrape
        out.setdefault(name, {})[key] = float(value)
    assert declared == list(METRICS)
    return out


def series(figures: dict, name: str, **labels: str) -> float:
    """The value of the one series of `name` whose labels include `labels`."""
    found = [v for k, v in figures.get(name, {}).items() if set(labels.items()) <= k]
    assert len(found) == 1, f"{name}{labels}: {len(found)} series in {figures.get(name)}"
    return found[0]


def finding(finding_id: str, detector: str, severity: str, end: float | None, **more) -> dict:
    return {
        "cluster": r.CLUSTER,
        "finding_id": finding_id,
        "detector": detector,
        "severity": severity,
        "subject_kind": "job",
        "subject_id": more.get("job_id") or "x",
        "start_ts": r.at(0),
        "end_ts": None if end is None else r.at(end),
        "detected_ts": r.at(more.pop("detected", 1000)),
        **more,
    }


def recommendation(rec_id: str, kind: str, gain: float, created: float) -> dict:
    return {
        "cluster": r.CLUSTER,
        "rec_id": rec_id,
        "kind": kind,
        "expected_gain_gpu_h": gain,
        "created_ts": r.at(created),
    }


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three GPUs sampled every 30 s over [0, 1200): j1 (physics/gpu) runs on g001's two GPUs
    (GPU 0 half busy, GPU 1 idle); j2 (bio/debug) held g002/0 over [0, 600), then j3
    (bio/debug) from 600 on, both fully busy."""
    root = tmp_path_factory.mktemp("serve") / "lake"
    times = range(0, 1200, 30)
    con = r.build_lake(
        root,
        samples=r.samples(times, gpu_index=0, engine_active=0.5)
        + r.samples(times, gpu_index=1, engine_active=0.0)
        + r.samples(times, node="g002", engine_active=1.0),
        jobs=[
            r.job("j1", 0, None, gpus=2, state="RUNNING"),
            r.job("j2", 0, 600, account="bio", partition="debug", user="bob"),
            r.job("j3", 600, None, account="bio", partition="debug", user="bob", state="RUNNING"),
        ],
        job_gpus=[
            r.job_gpu("j1", 0, None, gpu_index=0),
            r.job_gpu("j1", 0, None, gpu_index=1),
            r.job_gpu("j2", 0, 600, node="g002"),
            r.job_gpu("j3", 600, None, node="g002"),
        ],
        gpus=[r.gpu(), r.gpu(gpu_index=1), r.gpu("g002")],
    )
    con.close()
    r.land(
        root,
        "findings",
        [
            finding("f1", "idle_job", "warn", None, job_id="j1", gpu_h_at_stake=0.5),
            finding("f2", "idle_job", "warn", 900, job_id="j1", gpu_h_at_stake=7.0),
            finding("f3", "xid_hardware", "critical", None, gpu_h_at_stake=None),
        ],
    )
    r.land(
        root,
        "recommendations",
        [
            recommendation("r1", "idle_cancel_policy", 4.0, 100),
            recommendation("r1", "idle_cancel_policy", 10.0, 200),  # the newer version counts
            recommendation("r2", "time_limit", 5.0, 200),  # releases time to backfill: not saved
        ],
    )
    return root


def render(lake: Path, **settings) -> dict:
    cfg = ServeSettings(**settings)
    return parse(render_metrics(read_figures(Lake.at(lake), cfg), cfg))


@pytest.fixture(scope="module")
def metrics(lake: Path) -> dict:
    """The exposition of the lake with the default settings, rendered once for the tests that
    read it (a render is a connection and every sql/serve/ query)."""
    return render(lake)


def test_usage_per_account_and_partition_over_the_week(metrics):
    m = metrics
    physics = {"cluster": "della", "account": "physics", "partition": "gpu", "window": "7d"}
    bio = {"cluster": "della", "account": "bio", "partition": "debug", "window": "7d"}

    assert series(m, "gpuledger_allocated_gpu_seconds", **physics) == pytest.approx(2 * 1200)
    assert series(m, "gpuledger_observed_gpu_seconds", **physics) == pytest.approx(2 * 1200)
    assert series(m, "gpuledger_idle_gpu_seconds", **physics) == pytest.approx(1200)  # GPU 1
    assert series(m, "gpuledger_effective_gpu_seconds", **physics) == pytest.approx(0.5 * 1200)
    assert series(m, "gpuledger_allocated_gpu_seconds", **bio) == pytest.approx(1200)  # j2 + j3
    assert series(m, "gpuledger_effective_gpu_seconds", **bio) == pytest.approx(1200)
    assert series(m, "gpuledger_idle_gpu_seconds", **bio) == 0


def test_a_window_ends_at_the_end_of_the_data_not_the_wall_clock(lake):
    m = render(lake, windows_s=(("10m", 600),))
    physics = {"account": "physics", "partition": "gpu", "window": "10m"}
    bio = {"account": "bio", "partition": "debug", "window": "10m"}

    # the data ends at 1200 s: the window is [600, 1200), whatever today's date
    assert series(m, "gpuledger_allocated_gpu_seconds", **physics) == pytest.approx(2 * 600)
    assert series(m, "gpuledger_idle_gpu_seconds", **physics) == pytest.approx(600)
    assert series(m, "gpuledger_effective_gpu_seconds", **physics) == pytest.approx(300)
    assert series(m, "gpuledger_allocated_gpu_seconds", **bio) == pytest.approx(600)  # j3 only
    assert series(m, "gpuledger_data_end_timestamp_seconds") == pytest.approx(r.T0_E + 1200)


def test_running_jobs_their_gpus_now_and_what_is_at_stake(metrics):
    m = metrics
    j1 = {"job_id": "j1", "user": "alice", "account": "physics", "partition": "gpu"}

    assert series(m, "gpuledger_job_gpus", **j1, state="busy") == 1  # GPU 0 (0.5 busy)
    assert series(m, "gpuledger_job_gpus", **j1, state="idle") == 1  # GPU 1
    assert series(m, "gpuledger_job_gpus", **j1, state="unobserved") == 0
    assert series(m, "gpuledger_job_allocated_gpu_seconds", **j1) == pytest.approx(2400)
    assert series(m, "gpuledger_job_idle_gpu_seconds", **j1) == pytest.approx(1200)
    assert series(m, "gpuledger_job_at_stake_gpu_seconds", **j1) == pytest.approx(0.5 * 3600)
    assert series(m, "gpuledger_job_running_seconds", **j1) == pytest.approx(1200)
    assert set(m["gpuledger_job_gpu_info"]) == {
        frozenset({("cluster", "della"), ("job_id", j), ("node", n), ("gpu", g)})
        for j, n, g in (("j1", "g001", "0"), ("j1", "g001", "1"), ("j3", "g002", "0"))
    }
    assert not [k for k in m["gpuledger_job_gpus"] if ("job_id", "j2") in k]  # ended
    assert series(m, "gpuledger_running_jobs", account="bio") == 1
    assert series(m, "gpuledger_allocated_gpus", account="physics") == 2
    assert series(m, "gpuledger_running_jobs_not_exported", cluster="della") == 0


def test_per_job_series_are_capped_and_the_rest_counted(lake):
    m = render(lake, max_job_series=1)

    jobs = {dict(k)["job_id"] for k in m["gpuledger_job_gpus"]}
    assert jobs == {"j1"}  # the largest by GPUs
    assert {dict(k)["job_id"] for k in m["gpuledger_job_gpu_info"]} == {"j1"}
    assert series(m, "gpuledger_running_jobs_not_exported", cluster="della") == 1
    assert series(m, "gpuledger_running_jobs", account="bio") == 1  # still counted
    none = render(lake, max_job_series=0)
    assert "gpuledger_job_gpus" not in none
    assert series(none, "gpuledger_running_jobs_not_exported", cluster="della") == 2


def test_occupancy_now_adds_up_to_the_fleet(metrics):
    m = metrics
    states = {dict(k)["state"]: v for k, v in m["gpuledger_cluster_gpus"].items()}

    assert series(m, "gpuledger_fleet_gpus", cluster="della") == 3
    assert states["active"] == pytest.approx(2)  # g001/0 and g002/0 (j3)
    assert states["idle"] == pytest.approx(1)  # g001/1
    assert sum(states.values()) == pytest.approx(3)


def test_open_findings_and_current_recommendations(metrics):
    m = metrics

    assert series(m, "gpuledger_findings_open", detector="idle_job", severity="warn") == 1
    assert series(
        m, "gpuledger_findings_open_at_stake_gpu_seconds", detector="idle_job"
    ) == pytest.approx(0.5 * 3600)  # f2 ended: not open
    assert series(m, "gpuledger_findings_open", detector="xid_hardware") == 1
    assert series(m, "gpuledger_recommendations", kind="idle_cancel_policy") == 1
    gain = "gpuledger_recommendations_expected_gain_gpu_seconds"
    assert series(m, gain, kind="idle_cancel_policy") == pytest.approx(10 * 3600)
    assert series(m, gain, kind="time_limit") == 0


def test_freshness_per_source(metrics):
    m = metrics

    samples = {"kind": "gpu_samples", "source": "test"}
    assert series(m, "gpuledger_source_behind_seconds", **samples) == pytest.approx(30)
    assert series(m, "gpuledger_source_newest_timestamp_seconds", **samples) == pytest.approx(
        r.T0_E + 1170
    )
    assert series(m, "gpuledger_source_behind_seconds", kind="jobs") == pytest.approx(600)


@pytest.mark.parametrize("where", ["empty folder", "no folder"])
def test_a_lake_without_data_gives_every_family_and_no_series(tmp_path, where):
    lake = tmp_path / "lake"
    if where == "empty folder":
        lake.mkdir()
    cfg = ServeSettings()

    text = render_metrics(read_figures(Lake.at(lake), cfg), cfg)

    assert parse(text) == {}
    assert text.count("# TYPE ") == len(METRICS)


def test_accounts_unknown_in_several_ways_are_one_series_with_their_sum(tmp_path):
    # null, empty and `unknown` are three groups in the SQL and one label here: three series
    # of one name and labels, of which Prometheus keeps one per scrape
    root = tmp_path / "lake"
    accounts = [None, "", "unknown"]
    r.build_lake(
        root,
        samples=[
            row
            for i in range(3)
            for row in r.samples(range(0, 600, 30), gpu_index=i, engine_active=1.0)
        ],
        jobs=[
            r.job(f"j{i}", 0, None, account=a, partition=a, state="RUNNING")
            for i, a in enumerate(accounts)
        ],
        job_gpus=[r.job_gpu(f"j{i}", 0, None, gpu_index=i) for i in range(3)],
        gpus=[r.gpu(gpu_index=i) for i in range(3)],
    ).close()
    m = render(root)
    unknown = {"account": "unknown", "partition": "unknown"}

    assert series(m, "gpuledger_allocated_gpu_seconds", window="7d", **unknown) == pytest.approx(
        3 * 600
    )
    assert series(m, "gpuledger_running_jobs", **unknown) == 3
    assert series(m, "gpuledger_allocated_gpus", **unknown) == 3


def test_label_values_are_escaped():
    import polars as pl

    from app.serve.figures import QUERIES, Figures

    frames = {key: pl.DataFrame() for key in QUERIES}
    frames["recommendations"] = pl.DataFrame(
        {
            "cluster": ['a"b\\c\nd'],
            "kind": ["k"],
            "recommendations": [1],
            "expected_gain_gpu_h": [0.0],
        }
    )
    text = render_metrics(Figures(**frames), ServeSettings())

    assert 'gpuledger_recommendations{cluster="a\\"b\\\\c\\nd",kind="k"} 1' in text


def test_a_poll_after_the_last_sample_moves_neither_now_nor_another_jobs_run_time(tmp_path):
    # samples to 1230 s (the 1200-s bucket holds 30 s of g001's, none of g002's, which stops
    # at 1200); j1's record was collected at 1500, a pending job submitted at 1800. "Now" was
    # the 1200 bucket (it ended before 1800: "whole"), read as g002 unobserved; j2 ran to 1800,
    # the latest record of any job (`gpuledger job` says 1230)
    times = range(0, 1230, 30)
    r.build_lake(
        tmp_path,
        samples=r.samples(times, gpu_index=0, engine_active=0.5)
        + r.samples(times, gpu_index=1, engine_active=0.0)
        + r.samples(range(0, 1200, 30), node="g002", engine_active=1.0),
        jobs=[
            r.job("j1", 0, None, gpus=2, state="RUNNING", updated_ts=r.at(1500)),
            r.job("j2", 0, None, state="RUNNING", nodes=["g002"], updated_ts=r.at(600)),
            {**r.job("p", 1800, None, state="PENDING"), "start_ts": None},
        ],
        job_gpus=[
            r.job_gpu("j1", 0, None, gpu_index=0),
            r.job_gpu("j1", 0, None, gpu_index=1),
            r.job_gpu("j2", 0, None, node="g002"),
        ],
        gpus=[r.gpu(), r.gpu(gpu_index=1), r.gpu("g002")],
    )
    m = render(tmp_path)
    states = {dict(k)["state"]: v for k, v in m["gpuledger_cluster_gpus"].items()}

    assert states["unobserved"] == pytest.approx(0)  # the 900-s bucket, whole
    assert states["active"] == pytest.approx(2) and states["idle"] == pytest.approx(1)
    assert series(m, "gpuledger_job_running_seconds", job_id="j1") == pytest.approx(1500)
    assert series(m, "gpuledger_job_running_seconds", job_id="j2") == pytest.approx(1230)


def test_a_poll_after_the_last_sample_does_not_move_the_usage_window(tmp_path):
    # review: the window ended at the latest scheduler record (a pending job's submit at
    # 1800 s), past the samples' end (1200 s) where the open allocations are cut: the last
    # 10 minutes read [1200, 1800), with no allocation in them
    times = range(0, 1200, 30)
    r.build_lake(
        tmp_path,
        samples=r.samples(times, engine_active=0.5),
        jobs=[
            r.job("j1", 0, None, state="RUNNING"),
            {**r.job("p", 1800, None, state="PENDING"), "start_ts": None},
        ],
        job_gpus=[r.job_gpu("j1", 0, None)],
        gpus=[r.gpu()],
    )
    m = render(tmp_path, windows_s=(("10m", 600),))

    assert series(m, "gpuledger_allocated_gpu_seconds", window="10m") == pytest.approx(600)


def test_the_bucket_width_is_the_lakes_not_the_configurations(tmp_path):
    """A lake built with 600-s buckets, served with the default 300 s configured: "now" is its
    last whole 600-s bucket, [600, 1200), where j1 held the GPU throughout; at 300 s the bucket
    [1200, 1800), cut short by the data's end at 1530, counted as whole (j1 ended at 1300)."""
    root = tmp_path / "lake"
    r.build_lake(
        root,
        samples=r.samples(range(0, 1500, 30), engine_active=1.0),
        jobs=[r.job("j1", 0, 1300, gpus=1)],
        job_gpus=[r.job_gpu("j1", 0, 1300)],
        gpus=[r.gpu()],
        config=AttributionConfig(bucket_s=600),
    ).close()

    for configured in (300, 600):
        m = render(root, bucket_s=configured)
        states = {dict(k)["state"]: v for k, v in m["gpuledger_cluster_gpus"].items()}
        assert states["active"] == pytest.approx(1.0), configured
