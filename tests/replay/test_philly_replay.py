"""The Philly trace sample (tests/fixtures/philly) imported and replayed end to end through the
CLI (`gpuledger import philly`, then `gpuledger whatif replay`): the calibration is computed over
the jobs it should be, and the replay is bounded by the facts of the trace."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from app.cli import cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "philly"
CLUSTER = "philly"
SINCE = dt.datetime(2017, 10, 7, tzinfo=dt.UTC)


def _utc(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC).timestamp()


def _raw_jobs() -> list[dict[str, Any]]:
    """The job log read straight from the fixture: submit, first start, GPUs held."""
    rows = []
    for job in json.loads((FIXTURE / "cluster_job_log").read_text()):
        first = job["attempts"][0]
        rows.append(
            {
                "job_id": job["jobid"],
                "submit": _utc(job["submitted_time"]),
                "start": _utc(first["start_time"]),
                "end": _utc(job["attempts"][-1]["end_time"]),
                "gpus": sum(len(d["gpus"]) for d in first["detail"]),
            }
        )
    return rows


def _gpus_in_inventory(lake: Path) -> int:
    gpus = pl.read_parquet(lake / "gpus", hive_partitioning=True)
    return gpus.filter(pl.col("cluster") == CLUSTER).select("node", "gpu_index").unique().height


def _peak_gpus_in_use(rows: pl.DataFrame) -> int:
    """The most GPUs the replayed jobs hold at any one time (ends before starts at a tie)."""
    started = rows.filter(pl.col("sim_start_e").is_not_null())
    events = sorted(
        [(s, 1, g) for s, g in zip(started["sim_start_e"], started["gpus"], strict=True)]
        + [(e, 0, -g) for e, g in zip(started["sim_end_e"], started["gpus"], strict=True)]
    )
    peak = level = 0
    for _, _, change in events:
        level += change
        peak = max(peak, level)
    return peak


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("philly") / "lake"
    _invoke("import", "philly", str(FIXTURE), "--cluster", CLUSTER, "--lake", str(root), "-q")
    return root


def test_the_whole_recorded_period_replays_every_job_within_the_trace_bounds(lake, tmp_path):
    out = tmp_path / "replay.parquet"
    printed = _invoke(
        "whatif", "replay", "--lake", str(lake), "--cluster", CLUSTER, "-q", "--out", str(out)
    )
    raw = {r["job_id"]: r for r in _raw_jobs()}
    rows = pl.read_parquet(out)

    # the trace records no scheduler configuration: the baseline is Slurm's defaults, said so
    assert "Recorded policy: Slurm's defaults" in printed
    # every job of the log has GPUs and ran: each is replayed and calibrated, none left out
    assert sorted(rows["job_id"]) == sorted(raw)
    assert f"({len(raw)} jobs started in both; 0 only in the record, 0 only in the replay)" in (
        printed
    )
    assert rows["real_start_e"].to_list() == [raw[j]["start"] for j in rows["job_id"]]
    assert rows["gpus"].to_list() == [raw[j]["gpus"] for j in rows["job_id"]]
    # bounded: nothing starts before it was submitted, each runs as long as it ran, and the
    # GPUs in use never exceed the inventory the import landed
    assert rows["sim_start_e"].null_count() == 0
    assert (rows["sim_start_e"] >= rows["submit_e"]).all()
    ran = [raw[j]["end"] - raw[j]["start"] for j in rows["job_id"]]
    assert (rows["sim_end_e"] - rows["sim_start_e"]).to_list() == pytest.approx(ran)
    assert 0 < _peak_gpus_in_use(rows) <= _gpus_in_inventory(lake)
    # the printed median |Δstart| is the median over these jobs
    delta = (rows["sim_start_e"] - rows["real_start_e"]).abs()
    median = re.search(r"median (\d+) min", printed)
    assert median is not None and int(median.group(1)) == round(float(delta.median()) / 60)


def test_a_period_replays_the_jobs_pending_at_its_start_from_then_and_compares_no_running_one(
    lake, tmp_path
):
    out = tmp_path / "since.parquet"
    printed = _invoke(
        "whatif", "replay", "--lake", str(lake), "--cluster", CLUSTER, "-q",
        "--since", SINCE.isoformat(), "--out", str(out),
    )  # fmt: skip
    t0 = SINCE.timestamp()
    raw = _raw_jobs()
    running = {r["job_id"] for r in raw if r["start"] < t0 < r["end"]}
    pending = {r["job_id"] for r in raw if r["submit"] < t0 <= r["start"]}
    later = {r["job_id"] for r in raw if r["submit"] >= t0}
    rows = pl.read_parquet(out)

    assert running and pending and later
    assert set(rows["job_id"]) == running | pending | later
    replayed = rows.filter(~pl.col("job_id").is_in(sorted(running)))
    # a job pending at the start of the period queues from then, never before it
    assert (replayed["sim_start_e"] >= t0).all()
    assert (replayed["sim_start_e"] >= replayed["submit_e"]).all()
    # a job running then keeps its recorded start, and is not counted in the calibration
    kept = rows.filter(pl.col("job_id").is_in(sorted(running)))
    assert kept["sim_start_e"].to_list() == kept["real_start_e"].to_list()
    assert f"({len(pending | later)} jobs started in both;" in printed
    assert 0 < _peak_gpus_in_use(rows) <= _gpus_in_inventory(lake)


def test_a_virtual_cluster_quota_tried_with_set_is_kept_and_calibrated(lake, tmp_path):
    # Philly's VC quotas are not in the trace: a user tries one as a GPU cap on the VC's account
    out = tmp_path / "quota.parquet"
    printed = _invoke(
        "whatif", "replay", "--lake", str(lake), "--cluster", CLUSTER, "-q",
        "--set", "assoc.6214e9.GrpTRES=gres/gpu=8", "--out", str(out),
    )  # fmt: skip
    rows = pl.read_parquet(out).filter(pl.col("account") == "6214e9")

    assert "Calibration: with the changes against what happened" in printed
    assert rows["gpus"].max() == 8  # the cap leaves room for the VC's largest job
    assert _peak_gpus_in_use(rows) == 8
    assert (rows["sim_start_e"] >= rows["submit_e"]).all()


def _attempt(start: str, end: str | None, *on: tuple[str, int]) -> dict[str, Any]:
    detail = [{"ip": node, "gpus": [f"gpu{i}" for i in range(n)]} for node, n in on]
    return {"start_time": start, "end_time": end, "detail": detail}


def test_retried_zero_length_and_never_started_jobs_replay_by_clear_rules(tmp_path):
    # two 8-GPU machines. A ran twice, an hour on m1 then (after 4 h queued again) an hour on
    # m2: the replay runs it 2 h on one node, not 6 h on both, so the 16-GPU job B (submitted
    # 10 min after A) starts when A ends, 2 h in. C ran for no time at all; D was killed
    # before any attempt: the replay does not invent a run for it (its size is unknown).
    jobs = [
        {
            "status": "Pass", "vc": "v1", "jobid": "A", "user": "u1",
            "submitted_time": "2017-10-01 00:00:00",
            "attempts": [
                _attempt("2017-10-01 00:00:00", "2017-10-01 01:00:00", ("m1", 8)),
                _attempt("2017-10-01 05:00:00", "2017-10-01 06:00:00", ("m2", 8)),
            ],
        },
        {
            "status": "Pass", "vc": "v2", "jobid": "B", "user": "u2",
            "submitted_time": "2017-10-01 00:10:00",
            "attempts": [
                _attempt("2017-10-01 06:00:00", "2017-10-01 07:00:00", ("m1", 8), ("m2", 8))
            ],
        },
        {
            "status": "Failed", "vc": "v2", "jobid": "C", "user": "u2",
            "submitted_time": "2017-10-01 00:20:00",
            "attempts": [_attempt("2017-10-01 00:20:00", "2017-10-01 00:20:00", ("m2", 2))],
        },
        {
            "status": "Killed", "vc": "v1", "jobid": "D", "user": "u1",
            "submitted_time": "2017-10-01 00:30:00", "attempts": [],
        },
    ]  # fmt: skip
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "cluster_job_log").write_text(json.dumps(jobs))
    (trace / "cluster_machine_list").write_text(
        "machineId, number of GPUs, single GPU mem\nm1,8, 24GB\nm2,8, 24GB\n"
    )
    (trace / "cluster_gpu_util").write_text(
        "time,machineId," + ",".join(f"gpu{i}_util" for i in range(8)) + "\n"
    )
    lake, out = tmp_path / "lake", tmp_path / "replay.parquet"
    _invoke("import", "philly", str(trace), "--cluster", CLUSTER, "--lake", str(lake), "-q")
    printed = _invoke(
        "whatif", "replay", "--lake", str(lake), "--cluster", CLUSTER, "-q", "--out", str(out)
    )
    rows = {r["job_id"]: r for r in pl.read_parquet(out).iter_rows(named=True)}
    # a submit or an end reaches the scheduler a second later (the default `sched_latency`)
    t0 = _utc("2017-10-01 00:00:00") + 1

    assert rows["A"]["sim_start_e"] - t0 == 0 and rows["A"]["sim_end_e"] - t0 == 2 * 3600
    assert rows["B"]["sim_start_e"] - t0 == 2 * 3600 + 1
    assert rows["C"]["sim_start_e"] == rows["C"]["sim_end_e"] == t0 + 20 * 60
    assert rows["D"]["sim_start_e"] is None and rows["D"]["real_start_e"] is None
    assert "(3 jobs started in both; 0 only in the record, 0 only in the replay)" in printed
