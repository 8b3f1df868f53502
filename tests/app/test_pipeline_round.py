"""One configuration file drives every pipeline round: `gpuledger detect` honours
[detect.<detector>] switches, scopes and thresholds, and `gpuledger run`'s round gives the same
marts and findings as `gpuledger attribute` + `detect` with the same file."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import threading
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from app.config import load_config
from app.pipeline import detect as detect_step
from app.pipeline import pipeline_config, rule_findings
from app.service.metrics import Metrics
from app.service.pipeline import after_steps
from app.service.settings import ServiceConfig
from app.service.supervisor import Supervisor
from app.service.tasks import PipelineSpec, build_tasks
from detectors.bottleneck_findings import bottleneck_findings
from detectors.findings import read_findings
from detectors.rules.base import EPOCH
from warehouse.connection import connect
from warehouse.lake import Lake

NOW = "2026-12-01T00:00"


def invoke(*args: str) -> Result:
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
    return runner.invoke(cli, list(args))


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated lake (samples and jobs landed, nothing attributed)."""
    root = tmp_path_factory.mktemp("round") / "sim"
    # (two days: time_limit_excess finds jobs of both partitions, gpu and interactive)
    result = invoke("simulate", "--gpus", "16", "--days", "2", "--quiet", "--lake", str(root))
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture(scope="module")
def attributed(simulated: Path) -> Path:
    root = simulated.parent / "attributed"
    shutil.copytree(simulated, root)
    result = invoke("attribute", "--quiet", "--lake", str(root))
    assert result.exit_code == 0, result.output
    return root


def detect(lake: Path, tmp: Path, config: str) -> pl.DataFrame:
    """`gpuledger detect --config` on a copy of `lake`; the findings with their job's partition."""
    copy = tmp / f"lake-{hashlib.sha1(config.encode()).hexdigest()[:8]}"
    shutil.copytree(lake, copy)
    path = copy.parent / f"{copy.name}.toml"
    path.write_text(config)
    result = invoke("detect", "--config", str(path), "--lake", str(copy), "--now", NOW, "-q")
    assert result.exit_code == 0, result.output
    found = pl.from_arrow(read_findings(Lake.at(copy)))
    assert isinstance(found, pl.DataFrame)
    jobs = connect(copy).sql("SELECT cluster, job_id, partition FROM jobs_latest").pl()
    return found.join(jobs, on=["cluster", "job_id"], how="left")


def keys(frame: pl.DataFrame) -> set[tuple[str, str]]:
    return set(zip(frame["detector"], frame["finding_id"], strict=True))


@pytest.mark.slow
def test_a_disabled_detector_and_a_scoped_partition(attributed: Path, tmp_path: Path) -> None:
    base = detect(attributed, tmp_path, "")
    assert {"idle_job", "time_limit_excess"} <= set(base["detector"])
    limits = base.filter(pl.col("detector") == "time_limit_excess")
    assert set(limits["partition"]) >= {"interactive", "gpu"}  # the lake has both

    scoped = detect(
        attributed,
        tmp_path,
        "[detect.idle_job]\nenabled = false\n"
        '[detect.time_limit_excess]\nexclude_partitions = ["interactive"]\n',
    )
    assert "idle_job" not in set(scoped["detector"])
    # long time limits are gone from `interactive` and only there; every other finding is kept
    expected = base.filter(
        (pl.col("detector") != "idle_job")
        & ~((pl.col("detector") == "time_limit_excess") & (pl.col("partition") == "interactive"))
    )
    assert keys(scoped) == keys(expected)
    # each finding's evidence names the configuration that produced it
    ids = {json.loads(e)["config"]["id"] for e in scoped["evidence"]}
    assert len(ids) == 1 and ids != {json.loads(e)["config"]["id"] for e in base["evidence"]}


@pytest.mark.slow
def test_a_threshold_in_the_file_changes_the_findings_as_documented(
    attributed: Path, tmp_path: Path
) -> None:
    base = detect(attributed, tmp_path, "")
    limits = base.filter(pl.col("detector") == "time_limit_excess")
    ratios = limits["evidence"].map_elements(
        lambda e: float(json.loads(e)["limit_ratio"]), return_dtype=pl.Float64
    )
    # docs: limit_ratio "Time limit: flag a limit at least this many times the run time"
    # a cut halfway between two jobs' ratios, so no job sits on it (float rounding)
    sorted_ratios = sorted(set(ratios.to_list()))
    middle = len(sorted_ratios) // 2
    cut = (sorted_ratios[middle - 1] + sorted_ratios[middle]) / 2
    idle = base.filter(pl.col("detector") == "idle_job")
    assert (idle["severity"] == "warn").any()  # below the default 8 GPU-h
    changed = detect(
        attributed,
        tmp_path,
        f"[detect.time_limit_excess]\nlimit_ratio = {cut}\n"
        # README: critical_gpu_h "Severity is critical (not warn) from this many GPU-hours"
        "[detect.idle_job]\ncritical_gpu_h = 0.01\n",
    )
    kept = changed.filter(pl.col("detector") == "time_limit_excess")
    long_enough = limits.filter(ratios >= cut)
    assert 0 < kept.height < limits.height
    assert set(kept["finding_id"]) == set(long_enough["finding_id"])
    assert (changed.filter(pl.col("detector") == "idle_job")["severity"] == "critical").all()
    # idle_job's threshold is its own: memory_hold (same rule family) keeps the default
    evidence = {
        d: json.loads(e)["config"]["thresholds"]["critical_gpu_h"]
        for d, e in zip(changed["detector"], changed["evidence"], strict=True)
        if d in {"idle_job", "memory_hold"}
    }
    assert evidence == {"idle_job": 0.01, "memory_hold": 8.0}
    # (the efficiency family's findings carry its thresholds in their evidence: keyed apart)
    others = changed.filter(~pl.col("detector").is_in(["time_limit_excess", "idle_job"]))
    assert keys(others) == keys(
        base.filter(~pl.col("detector").is_in(["time_limit_excess", "idle_job"]))
    )


def _same(value: object) -> object:
    # DuckDB's parallel sums may differ in the last bits from one build to the next
    return f"{value:.9g}" if isinstance(value, float) else value


def _marts(lake: Path) -> dict[str, list[tuple[object, ...]]]:
    con = connect(lake)
    out = {}
    for mart in ("job_usage", "gpu_job_buckets", "usage_daily", "cluster_occupancy"):
        rows = con.sql(f"SELECT * FROM {mart}").fetchall()
        out[mart] = sorted((tuple(_same(v) for v in row) for row in rows), key=repr)
    return out


def _files(lake: Path) -> dict[str, bytes]:
    marts = ("job_usage", "gpu_job_buckets", "job_gpu_daily", "usage_daily", "cluster_occupancy")
    return {
        str(p.relative_to(lake)): p.read_bytes()
        for m in marts
        for p in sorted((lake / m).rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
def test_run_and_attribute_detect_with_one_file_agree(simulated: Path, tmp_path: Path) -> None:
    config = tmp_path / "g.toml"
    config.write_text(
        "[service]\nalert = false\n[attribute]\nbucket_s = 600\n"
        "[detect.idle_job]\nenabled = false\n"
        '[detect.stranded_gpus]\nexclude_partitions = ["interactive"]\n'
    )
    now = dt.datetime.fromisoformat(NOW).replace(tzinfo=dt.UTC)
    # the CLI: attribute, then detect
    by_cli = tmp_path / "cli"
    shutil.copytree(simulated, by_cli)
    for args in (("attribute", "-q"), ("detect", "-q", "--now", NOW)):
        result = invoke(*args, "--config", str(config), "--lake", str(by_cli))
        assert result.exit_code == 0, result.output
    # the service: one pipeline round of `gpuledger run`, with the same file
    by_run = tmp_path / "run"
    shutil.copytree(simulated, by_run)
    cfg = load_config(config, environ={})
    steps = after_steps(cfg, cfg.section(ServiceConfig), clock=lambda: now)
    spec = PipelineSpec(60, steps, pipeline_config(cfg))
    (task,) = build_tasks(Lake.at(by_run), [], spec, clock=lambda: now)
    sup = Supervisor([task], Metrics(), stop=threading.Event())
    assert sup.run_once(task), sup.states["pipeline"].last_error

    assert _marts(by_run) == _marts(by_cli)
    columns = ["finding_id", "detector", "severity", "message", "config", "gpu_h_at_stake"]

    def findings(lake: Path) -> pl.DataFrame:
        frame = pl.from_arrow(read_findings(Lake.at(lake)))
        assert isinstance(frame, pl.DataFrame)
        return (
            frame.with_columns(
                pl.col("evidence").str.json_path_match("$.config.id").alias("config"),
                pl.col("gpu_h_at_stake").round(6),
            )
            .select(columns)
            .sort("finding_id")
        )

    run_findings = findings(by_run)
    assert run_findings.height > 0 and run_findings.equals(findings(by_cli))
    assert "idle_job" not in set(run_findings["detector"])
    # the CLI after the service changes nothing: no mart file is rewritten, no finding new
    # or updated (the findings file itself is rewritten whole by every detect)
    before = _files(by_run)
    for args in (("attribute", "-q"), ("detect", "-q", "--now", NOW)):
        result = invoke(*args, "--config", str(config), "--lake", str(by_run))
        assert result.exit_code == 0, result.output
    assert "0 new, 0 updated" in result.output
    assert _files(by_run) == before


@pytest.mark.slow
def test_detect_reads_the_lake_of_its_config_file(attributed: Path, tmp_path: Path) -> None:
    copy = tmp_path / "lake"
    shutil.copytree(attributed, copy)
    config = tmp_path / "g.toml"
    config.write_text(f'lake = "{copy}"\n[detect.idle_job]\nenabled = false\n')
    result = invoke("detect", "--config", str(config), "--now", NOW, "-q")
    assert result.exit_code == 0, result.output
    stored = read_findings(Lake.at(copy))
    found = stored.column("detector").to_pylist()
    assert found and "idle_job" not in found
    # `gpuledger job` names the configuration that produced each of the job's findings
    job_id = next(j for j in stored.column("job_id").to_pylist() if j)
    report = invoke("job", job_id, "--lake", str(copy))
    assert report.exit_code == 0, report.output
    fingerprint = pipeline_config(load_config(config, environ={})).fingerprint
    assert f"[config {fingerprint}]" in report.output


@pytest.mark.slow
def test_detect_reads_every_sample_when_a_file_lies_outside_the_days(
    attributed: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    copy = tmp_path / "lake"
    shutil.copytree(attributed, copy)
    lake = Lake.at(copy)
    # another tool's file beside the date folders: every sample again 10 s later, idle and
    # thermally throttled (what the kept days would not count)
    loose = copy / "gpu_samples" / "cluster=sim" / "loose.parquet"
    con = connect(copy)
    con.execute(
        "COPY (SELECT * REPLACE (ts + INTERVAL 10 SECOND AS ts, CAST(0 AS FLOAT) AS engine_active,"
        " CAST(0 AS FLOAT) AS sm_active, CAST(64 AS BIGINT) AS clock_event_reasons)"
        f" FROM gpu_samples) TO '{loose}' (FORMAT parquet)"
    )
    con.close()
    (tmp_path / "g.toml").write_text("")
    config = pipeline_config(load_config(tmp_path / "g.toml", environ={}))
    now = dt.datetime.fromisoformat(NOW).replace(tzinfo=dt.UTC)
    with caplog.at_level("WARNING"):
        detect_step(lake, config, now, recommend=False)
    assert "detect reads every sample: 1 gpu_samples file(s) outside" in caplog.text

    # what every sample gives, the loose file's included
    con = lake.connect()
    try:
        expected = pl.concat(
            [
                pl.from_arrow(rule_findings(con, config, now)),
                pl.from_arrow(bottleneck_findings(con, now, EPOCH)),
            ]
        )
    finally:
        con.close()
    found = pl.from_arrow(read_findings(lake))

    def key(frame: pl.DataFrame) -> set[tuple[str, str, float]]:
        rounded = frame.select("detector", "finding_id", pl.col("gpu_h_at_stake").round(6))
        return set(rounded.iter_rows())

    assert {"throttling", "bottleneck"} <= set(expected["detector"])
    assert key(found) == key(expected)
