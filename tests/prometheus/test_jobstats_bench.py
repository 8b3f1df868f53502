"""The bench's jobstats scenario on a real Prometheus (app/bench/jobstats.py)."""

from __future__ import annotations

import pytest

from app.bench.jobstats import run_jobstats_bench
from app.bench.run import render_bench


@pytest.mark.live
@pytest.mark.slow
def test_jobstats_scenario_times_both_sides_on_one_prometheus(tmp_path):
    r = run_jobstats_bench(gpus=8, days=1, workdir=tmp_path)

    assert r["jobs"] > 10 and r["families"] >= 10
    assert r["samples"] >= r["gpu_samples_rows"] * 10  # ≥ 10 families per GPU and scrape
    assert r["gpu_samples_rows"] > 8 * 5000  # 8 GPUs × ~5,760 scrapes
    assert r["peer_s"] > 0 and r["ours_s"] == pytest.approx(
        r["collect_s"] + r["attribute_s"] + r["read_s"]
    )
    # both sides read the same samples: most jobs' mean utilisation agrees within a point
    assert r["jobs_compared"] == r["jobs"]
    assert r["jobs_within_1_point"] >= 0.75 * r["jobs"]
    report = r["job_report"]
    assert len(report["process_ms"]) == len(report["in_process_ms"]) == 5
    assert min(report["process_ms"]) > min(report["in_process_ms"])  # a process costs more
    assert list(tmp_path.iterdir()) == []  # the throw-away folder is gone

    text = render_bench({"machine": {"cpus": 2, "memory_gb": 8, "platform": "test"}, "jobstats": r})
    assert f"{r['jobs']:,} jobs" in text
    assert "jobstats-style: 3 PromQL queries at each job's end" in text
    assert "gpuledger job JOBID (median, a new process)" in text
