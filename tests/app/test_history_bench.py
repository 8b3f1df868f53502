"""`gpuledger bench --scenario history` on tiny synthetic lakes: one more day lands on each
history length and is updated in place, its ingest (a) and mart update (b) timed apart."""

from __future__ import annotations

from app.bench.history import run_history_bench
from app.bench.run import render_bench


def test_one_more_day_is_timed_on_each_history_length(tmp_path):
    said: list[str] = []
    result = run_history_bench(tmp_path, 8, (1, 2), said.append)

    assert "bench history: generated day 3 of 3" in said  # (365 days were minutes of silence)

    assert [run["days"] for run in result["runs"]] == [1, 2]
    for run in result["runs"]:
        assert run["days_rebuilt"] == 1 and run["tails_rebuilt"] == 1  # the day, the day before
        assert run["update_mode"] == "incremental"
        assert run["append_s"] == run["ingest_s"] + run["update_s"]
        assert 0 < run["jobs_recomputed"] <= run["jobs"]
    shortest, longest = result["runs"]
    assert result["append_ratio"] == longest["append_s"] / shortest["append_s"]
    assert result["within_target"] == (result["append_ratio"] <= 1.5)
    machine = {"cpus": 2, "memory_gb": 8, "platform": "test"}
    text = render_bench({"machine": machine, "history": result})
    assert "history 2 days: (a) ingest of the new day" in text
    assert "history 2 days: (b) mart update" in text
