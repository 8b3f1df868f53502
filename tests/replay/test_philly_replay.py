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


def _vc_jobs(vc: str) -> int:
    return sum(
        1 for job in json.loads((FIXTURE / "cluster_job_log").read_text()) if job["vc"] == vc
    )


def test_a_period_s_waits_leave_out_the_jobs_running_at_its_start(lake):
    # The probe: application_1504131676014_21322 (6214e9) was submitted on 09-25 and started on
    # 10-08, before the period; its 300 h wait was printed as the period's p95 for 6214e9. The
    # jobs submitted from then on start at once on the cluster's 2,928 GPUs (FCFS, either
    # priority: the calibration's replayed waits are 0 too), so every period wait is 0.
    printed = _invoke(
        "whatif", "compare", "--lake", str(lake), "--cluster", CLUSTER, "-q",
        "--since", "2017-10-10T08:52:12",
        "--set", "priority.PriorityType=priority/multifactor",
        "--set", "priority.PriorityWeightFairshare=10000",
    )  # fmt: skip
    # each account's and size's base p50, p95, new p50, p95: the last eight words of its line
    rows = {
        line[:24].strip(): line.split()[-8:]
        for line in printed.splitlines()
        if line.startswith(("account ", "size "))
    }

    assert rows["account 6214e9"] == ["0", "min"] * 4
    assert len(rows) == 10 and all(waits == ["0", "min"] * 4 for waits in rows.values()), printed


def test_jobs_a_cap_keeps_pending_for_good_are_counted_as_held_by_it(lake):
    # The probe: GrpTRES=gres/gpu=0 on 6214e9 printed "63 jobs start, 0 cut by a limit, 0 held
    # pending by one" of 86: its 23 jobs, kept pending for good by the cap, were counted nowhere
    printed = _invoke(
        "whatif", "replay", "--lake", str(lake), "--cluster", CLUSTER, "-q",
        "--set", "assoc.6214e9.GrpTRES=gres/gpu=0",
    )  # fmt: skip
    held, total = _vc_jobs("6214e9"), len(_raw_jobs())

    assert held == 23
    assert (
        f"of {total} jobs, {total - held} start (0 of them cut short by a limit), {held} held "
        "pending by a limit"
    ) in printed
    assert "never start" not in printed  # nothing else is left out: the counts add up


def test_a_partition_time_limit_on_jobs_that_record_no_partition(lake, tmp_path):
    # Philly's jobs record no partition. Without a slurm.conf, a partition's MaxTime is one
    # error saying so and what to do; with one whose `gpu` partition is Default=YES, the jobs
    # are in it (as Slurm puts a job submitted without a partition) and an 8 h MaxTime cuts
    # the jobs that ran longer; with `gpu` not the default, no job is in it: refused.
    base = tmp_path / "base.parquet"
    _invoke("whatif", "replay", "--lake", str(lake), "--cluster", CLUSTER, "-q", "--out", str(base))
    rows = pl.read_parquet(base)
    longer = rows.filter(pl.col("sim_end_e") - pl.col("sim_start_e") > 8 * 3600).height
    change = ["--set", "partition.gpu.MaxTime=08:00:00", "--set", "over_limit=cut"]
    args = ["whatif", "compare", "--lake", str(lake), "--cluster", CLUSTER, "-q", *change]

    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "the cluster's jobs record no partition" in result.output
    assert "(it has )" not in result.output and "qos.normal.MaxWall" in result.output

    conf = tmp_path / "slurm.conf"
    conf.write_text("PartitionName=gpu Nodes=ALL Default=YES MaxTime=UNLIMITED\n")
    printed = _invoke(*args, "--slurm-conf", str(conf))
    assert longer == 39
    assert f"Cut short by a new limit: {longer} jobs" in printed

    conf.write_text("PartitionName=gpu Nodes=ALL MaxTime=UNLIMITED\n")
    result = CliRunner().invoke(cli, [*args, "--slurm-conf", str(conf)])
    assert result.exit_code == 2
    assert "no job of the period is in partition 'gpu'" in result.output
    assert "the change would replay as no change" in result.output


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
    assert "D" not in rows  # held no GPU, asked an unknown number: no GPU job of the replay
    assert "(3 jobs started in both; 0 only in the record, 0 only in the replay)" in printed
