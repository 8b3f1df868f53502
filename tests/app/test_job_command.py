"""`gpuledger job JOBID` on a hand-made lake (figures by hand) and on a small simulated one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from app.sparkline import render_sparkline
from detectors.bottleneck import ADVICE
from tests.marts import rows as r

H = 3600.0


def invoke(*args: str) -> Result:
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
    return runner.invoke(cli, list(args))


def one_line_error(result: Result, code: int) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    return errors[0]


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    """j1: 2 GPUs for 1 h of an 8 h limit, 16 cores of which it used 2; GPU 0 busy 0.8,
    GPU 1 never active. small: 1 GPU at busy 0.1 with 4000 MiB (a MIG candidate).
    A warn finding about j1. j2 exists on clusters della and other. j1's training loop reported
    2000 tokens/s (two reports 3000 s apart) of a 7e9-parameter model."""
    root = tmp_path_factory.mktemp("lake")
    times = range(0, int(H), 30)
    samples = (
        r.samples(times, gpu_index=0, engine_active=0.8, sm_active=0.8, power_w=400.0)
        + r.samples(times, gpu_index=1, engine_active=0.0, sm_active=0.0, power_w=70.0)
        + r.samples(times, gpu_index=2, engine_active=0.1, sm_active=0.1, fb_used_mib=4000.0)
    )
    jobs = [
        r.job(
            "j1",
            0,
            H,
            gpus=2,
            cpus=16,
            cpu_time_s=2 * H,
            time_limit_s=int(8 * H),
            mem_req_mib=64 * 1024,
            max_rss_mib=16 * 1024.0,
        ),
        r.job("small", 0, H, cpus=4, time_limit_s=int(H)),
        r.job("j2", 0, 60),
        r.job("j2", 0, 60) | {"cluster": "other"},
    ]
    job_gpus = [
        r.job_gpu("j1", 0, H, gpu_index=0),
        r.job_gpu("j1", 0, H, gpu_index=1),
        r.job_gpu("small", 0, H, gpu_index=2),
    ]
    r.land(
        root,
        "findings",
        [
            {
                "cluster": r.CLUSTER,
                "finding_id": "f-1",
                "detector": "partial_idle",
                "severity": "warn",
                "subject_kind": "job",
                "subject_id": "j1",
                "job_id": "j1",
                "detected_ts": r.at(H),
                "gpu_h_at_stake": 1.0,
                "message": "1 of 2 GPUs never active",
            }
        ],
    )
    r.land(
        root,
        "app_throughput",
        [
            {"cluster": r.CLUSTER, "job_id": "j1", "ts": r.at(t), "reporter": "0",
             "tokens_total": tokens, "model_params": 7_000_000_000, "source": "test"}
            for t, tokens in ((300, 1e6), (3300, 1e6 + 2000 * 3000))
        ],
    )  # fmt: skip
    r.build_lake(root, samples=samples, jobs=jobs, job_gpus=job_gpus)
    return root


def test_text_report_of_a_two_gpu_job_by_hand(lake):
    result = invoke("job", "j1", "--cluster", "della", "--lake", str(lake))
    out = result.output

    assert result.exit_code == 0, out
    assert "Job ID: j1" in out
    assert "Run Time: 01:00:00" in out
    assert "Time Limit: 08:00:00  (12% used)" in out
    # 2 GPU-h allocated; GPU 0 busy 0.8 for 1 h -> 0.8 effective; GPU 1 idle for 1 h
    assert "GPU-hours: 2.00 allocated, 1.00 active, 1.00 idle, 0.80 effective" in out
    # 2 of 16 cores busy: 12.5 % (5 of 40 bar cells); 16 of 64 GiB of host memory: 25 %
    assert "  CPU util      [|||||" + " " * 35 + "  12%]" in out
    assert "  CPU memory    [" + "|" * 10 + " " * 30 + "  25%]" in out
    # twelve 5-minute buckets: ▇ for 0.8 on GPU 0, ▁ for 0 on GPU 1
    assert "▇" * 12 in out and "▁" * 12 in out
    assert "[warn] partial_idle: 1 of 2 GPUs never active (1.0 GPU-h at stake)" in out
    # 2000 tokens/s on 2 GPUs; MFU = 6 × 7e9 × 2000 / (2 × 989e12 H100 FLOP/s) = 4.2 %
    assert "  Training: 1,000 tokens/s per GPU, a 7 B-parameter model\n" in out
    assert "  MFU           [||" + " " * 38 + "   4%]" in out
    # next time: the one GPU it used, 1 h × 1.5 = 1:30, 2 cores used × 1.25 / 2 GPUs -> 2
    assert "#SBATCH --gres=gpu:1\n" in out
    assert "#SBATCH --time=01:30:00" in out
    assert "#SBATCH --cpus-per-gpu=2" in out


def test_json_report(lake):
    result = invoke("job", "j1", "--format", "json", "--lake", str(lake))
    body = json.loads(result.output)

    assert result.exit_code == 0, result.output
    assert body["job"]["alloc_gpu_h"] == pytest.approx(2.0)
    assert body["job"]["tokens_per_s_per_gpu"] == pytest.approx(1000.0)
    assert body["job"]["mfu"] == pytest.approx(6 * 7e9 * 2000 / (2 * 989e12))
    assert [g["gpu_index"] for g in body["gpus"]] == [0, 1]
    assert body["gpus"][0]["busy_mean"] == pytest.approx(0.8, rel=1e-6)
    assert body["gpus"][1]["active_h"] == 0
    assert len(body["gpus"][0]["busy_series"]) == 12
    assert body["diagnosis"]["diagnosis"] in ADVICE
    assert [f["finding_id"] for f in body["findings"]] == ["f-1"]
    assert [n["option"] for n in body["next_time"]] == [
        "--gres=gpu:1",
        "--time=01:30:00",
        "--cpus-per-gpu=2",
    ]


def test_a_small_job_is_told_its_mig_slice(lake):
    result = invoke("job", "small", "--lake", str(lake))

    assert result.exit_code == 0, result.output
    assert "#SBATCH --gres=gpu:1g.10gb:1" in result.output  # busy 10 %, 3.9 GiB
    # detect has stored findings in this lake, none of them this job's
    assert "None: `gpuledger detect` found nothing for this job." in result.output


def test_an_unknown_job_is_one_line_and_exit_1(lake):
    error = one_line_error(invoke("job", "nope", "--lake", str(lake)), 1)

    assert error == "Error: No job 'nope' in the lake"


def test_a_job_id_on_two_clusters_needs_cluster(lake):
    error = one_line_error(invoke("job", "j2", "--lake", str(lake)), 1)

    assert "several clusters (della, other); use --cluster" in error
    other = invoke("job", "j2", "--cluster", "other", "--lake", str(lake))
    assert other.exit_code == 0, other.output
    assert "allocated; no GPU telemetry was attributed to this job" in other.output
    assert "unobserved:" in other.output


def test_a_missing_lake_and_a_bad_format(tmp_path, lake):
    assert "does not exist" in one_line_error(invoke("job", "j1", "--lake", str(tmp_path / "x")), 1)
    assert invoke("job", "j1", "--format", "xml", "--lake", str(lake)).exit_code == 2


def test_help_teaches_the_options():
    result = invoke("job", "--help")

    assert result.exit_code == 0
    for text in ("--cluster", "--format", "--lake", "jobstats", "--cpus-per-gpu"):
        assert text in result.output


def test_each_gpus_busy_series_is_its_buckets_in_time_order(tmp_path):
    # GPU 0 ramps up bucket by bucket (5-minute buckets, one sample a minute); GPU 1 reports
    # no utilisation field in its second bucket and joins 5 minutes late: every GPU's series is
    # on the job's one time axis, null where it has no busy value (it was drawn from the left
    # edge, as if it had started with the job)
    root = tmp_path / "lake"
    ramp = [b / 10 for b in range(4) for _ in range(5)]
    no_field = [None] * 5 + [0.5] * 5
    r.build_lake(
        root,
        samples=r.samples(range(0, 1200, 60), gpu_index=0, interval_s=60, engine_active=ramp)
        + r.samples(range(300, 900, 60), gpu_index=1, interval_s=60, engine_active=no_field),
        jobs=[r.job("ramp", 0, 1200, gpus=2)],
        job_gpus=[r.job_gpu("ramp", 0, 1200, gpu_index=i) for i in (0, 1)],
    )
    body = json.loads(invoke("job", "ramp", "--format", "json", "--lake", str(root)).output)
    gpus = {g["gpu_index"]: g for g in body["gpus"]}

    assert gpus[0]["busy_series"] == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert gpus[0]["series_start"] == r.at(0).isoformat()
    assert gpus[1]["busy_series"] == [None, None, pytest.approx(0.5), None]
    assert gpus[1]["series_start"] == r.at(0).isoformat()


def test_a_gap_in_the_telemetry_is_a_gap_in_the_series(tmp_path):
    # an hour of samples, an hour of none, an hour of samples: 36 buckets, 12 of them empty
    # (it was 24 solid buckets from the start, as if the job had run 2 h without a gap)
    times = [*range(0, 3600, 60), *range(7200, 10800, 60)]
    r.build_lake(
        tmp_path,
        samples=r.samples(times, interval_s=60, engine_active=0.7),
        jobs=[r.job("gap", 0, 10800)],
        job_gpus=[r.job_gpu("gap", 0, 10800)],
    )
    body = json.loads(invoke("job", "gap", "--format", "json", "--lake", str(tmp_path)).output)
    [gpu] = body["gpus"]

    assert len(gpu["busy_series"]) == 36
    assert gpu["busy_series"][12:24] == [None] * 12
    assert gpu["busy_series"][:12] == [pytest.approx(0.7)] * 12


def test_sparkline_resamples_and_marks_gaps():
    assert render_sparkline([0.0, 1.0, None, 0.5]) == "▁█ ▅"
    assert render_sparkline([1.0] * 100, width=10) == "█" * 10


@pytest.mark.slow
def test_job_report_on_a_small_simulated_lake(tmp_path):
    lake = tmp_path / "lake"
    assert (
        invoke("simulate", "--lake", str(lake), "--gpus", "16", "--days", "1", "-q").exit_code == 0
    )
    assert invoke("attribute", "--lake", str(lake), "-q").exit_code == 0
    from warehouse.connection import connect

    con = connect(lake)
    [(job_id,)] = con.sql(
        "SELECT job_id FROM job_usage WHERE samples > 0 ORDER BY alloc_gpu_h DESC LIMIT 1"
    ).fetchall()

    text = invoke("job", job_id, "--lake", str(lake))
    body = json.loads(invoke("job", job_id, "--format", "json", "--lake", str(lake)).output)

    assert text.exit_code == 0, text.output
    assert f"Job ID: {job_id}" in text.output
    assert "None (run `gpuledger detect` to look for them)." in text.output  # never ran
    assert body["diagnosis"]["diagnosis"] in ADVICE
    assert body["gpus"] and all(g["busy_series"] for g in body["gpus"])


def test_a_kubernetes_job_is_told_its_pod_resources(tmp_path):
    times = range(0, int(H), 30)
    root = tmp_path / "lake"
    r.build_lake(
        root,
        samples=r.samples(times, gpu_index=0, engine_active=0.9)
        + r.samples(times, gpu_index=1, engine_active=0.0),
        jobs=[r.job("pod-1", 0, H, gpus=2, source="kubernetes", time_limit_s=int(10 * H))],
        job_gpus=[r.job_gpu("pod-1", 0, H, gpu_index=i) for i in (0, 1)],
    )
    result = invoke("job", "pod-1", "--lake", str(root))

    assert result.exit_code == 0, result.output
    assert "limits: {nvidia.com/gpu: 1}" in result.output
    assert 'label kueue.x-k8s.io/max-exec-time-seconds: "5400"' in result.output
    assert "#SBATCH" not in result.output


def test_a_job_on_a_shared_gpu_says_its_figures_are_estimates(tmp_path, lake):
    # two jobs time-slice one GPU for 10 minutes, one row per sharer; j1 above never shared
    times = range(0, 630, 30)
    samples = [
        row for job_id in ("a", "b") for row in r.samples(times, job_id=job_id, engine_active=0.5)
    ]
    r.build_lake(
        tmp_path,
        samples=samples,
        jobs=[r.job("a", 0, 600), r.job("b", 0, 600)],
        job_gpus=[r.job_gpu("a", 0, 600), r.job_gpu("b", 0, 600)],
    )
    result = invoke("job", "a", "--lake", str(tmp_path))

    assert result.exit_code == 0, result.output
    assert "Shared GPU:" in result.output and "estimates" in result.output
    # the GPU's 10 minutes, allocated and observed, are split between the two
    assert "GPU-hours: 0.08 allocated, 0.08 active, 0.00 idle, 0.04 effective" in result.output
    shared = invoke("job", "j1", "--cluster", "della", "--lake", str(lake)).output
    assert "Shared GPU:" not in shared


def test_a_job_cancelled_before_it_started_is_said_to_have_held_nothing(tmp_path):
    # its owner was told to build the marts, to check the GPU-to-job mapping, and "GPUs: 8"
    r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 600, 30)),
        jobs=[
            r.job("j1", 0, 600),
            # (Slurm's record of a job that never started allocates 0 GPUs, asked for 8)
            r.job("never", 0, None, state="CANCELLED", start_ts=None, gpus=0, gpus_requested=8),
        ],
        job_gpus=[r.job_gpu("j1", 0, 600)],
    )
    result = invoke("job", "never", "--lake", str(tmp_path))

    assert result.exit_code == 0, result.output
    assert "GPUs: 8 asked for, none held (it never started)" in result.output
    assert "The job never started: it held no GPUs and used nothing." in result.output
    assert "not started: nothing ran" in result.output
    assert "No advice: the job never started" in result.output
    assert "gpuledger attribute" not in result.output and "mapping" not in result.output
    # its JSON (the API's) said `unobserved` and advised checking the GPU-to-job mapping
    body = json.loads(invoke("job", "never", "--lake", str(tmp_path), "--format", "json").output)
    assert body["diagnosis"]["diagnosis"] == "not_started"
    assert "mapping" not in json.dumps(body)


def test_a_job_whose_end_is_the_year_9999_has_a_report(tmp_path):
    # a trace's "9999-12-31" for unknown: the day margin after it overflowed (a traceback)
    import datetime as dt

    far = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC)
    r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 3600, 30), engine_active=0.5),
        jobs=[r.job("far", 0, 3600) | {"end_ts": far}],
        job_gpus=[r.job_gpu("far", 0, 3600) | {"end_ts": far}],
    )
    report = json.loads(invoke("job", "far", "--lake", str(tmp_path), "--format", "json").output)

    assert report["job"]["alloc_gpu_h"] == pytest.approx(1.0)  # to its record's collection


def test_a_job_requeued_and_pending_again_is_not_said_to_have_held_nothing(tmp_path):
    # Slurm's requeue clears the start: its earlier run's GPU-hours are in job_usage
    r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 600, 30), engine_active=0.5),
        jobs=[r.job("rq", 0, None, state="PENDING", start_ts=None, requeues=1)],
        job_gpus=[r.job_gpu("rq", 0, 600)],
    )
    result = invoke("job", "rq", "--lake", str(tmp_path))

    assert result.exit_code == 0, result.output
    assert "never started" not in result.output


def test_a_requeued_job_says_so_and_whether_its_figures_hold_its_earlier_runs(tmp_path):
    # its GPU-hours, busy and idle mixed two earlier idle runs into its last without a word
    r.build_lake(
        tmp_path,
        samples=r.samples(range(0, int(3 * H), 30), engine_active=[0.0] * 240 + [0.9] * 120),
        jobs=[
            r.job("rq", 2 * H, 3 * H, requeues=2),
            r.job("last", 2 * H, 3 * H, requeues=1, cluster="other"),
            r.job("plain", 0, 60, requeues=0, cluster="other"),
        ],
        job_gpus=[r.job_gpu("rq", 0, H), r.job_gpu("rq", H, 2 * H), r.job_gpu("rq", 2 * H, 3 * H)]
        + [r.job_gpu("last", 2 * H, 3 * H) | {"cluster": "other"}],
    )
    rq = invoke("job", "rq", "--lake", str(tmp_path)).output
    last = invoke("job", "last", "--lake", str(tmp_path)).output

    assert "       Requeued: 2 times (the figures below include its earlier runs)\n" in rq
    assert "GPU-hours: 3.00 allocated" in rq
    # the lake holds its last run alone: how often, and no claim about the figures
    assert "       Requeued: 1 time\n" in last
    plain = invoke("job", "plain", "--lake", str(tmp_path))
    assert plain.exit_code == 0 and "Requeued" not in plain.output


def test_a_job_cancelled_while_pending_has_no_start_time(tmp_path):
    # sacct gives such a job a start equal to its end (the cancel), no node and no GPU
    r.build_lake(
        tmp_path,
        jobs=[
            r.job("j1", 0, 60),
            r.job("c", 30, 30, state="CANCELLED", gpus=0, gpus_requested=8, nodes=[]),
        ],
    )
    result = invoke("job", "c", "--lake", str(tmp_path))

    assert result.exit_code == 0, result.output
    assert "     Start Time: -\n" in result.output
    assert "GPUs: 8 asked for, none held (it never started)" in result.output
    assert "not started: nothing ran" in result.output
    assert "unobserved" not in result.output and "mapping" not in result.output


def test_a_heterogeneous_jobs_number_names_its_components(tmp_path):
    # Slurm names a heterogeneous job by its number (a job-end mail's Job_id=1014); sacct,
    # and so the lake, by its components. Ids that merely start alike are none of them.
    ids = ("1014+0", "1014+1", "10140", "1014+x", "1014_3")
    r.build_lake(
        tmp_path,
        jobs=[r.job(job_id, 0, 600) for job_id in ids],
        job_gpus=[r.job_gpu(job_id, 0, 600, gpu_index=i) for i, job_id in enumerate(ids)],
    )

    error = one_line_error(invoke("job", "1014", "--lake", str(tmp_path)), 1)

    assert error == (
        "Error: No job '1014' in the lake: it is a heterogeneous job, whose components are "
        "1014+0, 1014+1 (gpuledger job 1014+0)"
    )


def test_a_running_job_on_a_shared_gpu_has_run_as_long_as_the_data_show(tmp_path):
    # two running jobs time-slice one GPU for the hour the data cover: each has run an hour,
    # not the half hour its split of the GPU-hours over its 1 GPU made
    times = range(0, 3600, 30)
    r.build_lake(
        tmp_path,
        samples=r.samples(times, engine_active=0.5),
        jobs=[
            r.job("a", 0, None, state="RUNNING", time_limit_s=7200),
            r.job("b", 0, None, state="RUNNING", time_limit_s=7200),
        ],
        job_gpus=[r.job_gpu("a", 0, None), r.job_gpu("b", 0, None)],
        gpus=[r.gpu()],
    )
    report = json.loads(invoke("job", "a", "--lake", str(tmp_path), "--format", "json").output)

    assert report["job"]["alloc_gpu_h"] == pytest.approx(0.5)
    assert report["job"]["runtime_s"] == pytest.approx(3600)


def test_a_running_job_whose_gpus_went_silent_has_run_as_long_as_it_is_allocated(tmp_path):
    """Its allocation runs to the end of its cluster's data (job_gpu_intervals); its run time
    ran to its own last sample: "Run Time: 02:00:00" beside 5 GPU-hours allocated on 1 GPU."""
    r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 7200, 30), job_id="d", engine_active=0.5)
        + r.samples(range(0, 18000, 30), gpu_index=1, engine_active=0.5),
        jobs=[r.job("d", 0, None, state="RUNNING", time_limit_s=36000)],
        job_gpus=[r.job_gpu("d", 0, None)],
        gpus=[r.gpu(), r.gpu(gpu_index=1)],
    )
    report = json.loads(invoke("job", "d", "--lake", str(tmp_path), "--format", "json").output)

    assert report["job"]["alloc_gpu_h"] == pytest.approx(5.0)
    assert report["job"]["runtime_s"] == pytest.approx(18000)


def test_a_running_job_on_a_cluster_without_telemetry_has_run_to_its_records_latest_time(
    tmp_path,
):
    """Scheduler records alone (no GPU samples yet): the data end at the latest record time,
    here another job's end 5 h in; the running job holds its 2 GPUs and has run to there. It
    held them for 0 hours before: its cluster had no end of data."""
    r.build_lake(
        tmp_path,
        jobs=[
            r.job("run", 0, None, state="RUNNING", gpus=2, updated_ts=r.at(600)),
            r.job("done", 3600, 18000),
        ],
        job_gpus=[
            r.job_gpu("run", 0, None),
            r.job_gpu("run", 0, None, gpu_index=1),
            r.job_gpu("done", 3600, 18000, gpu_index=2),
        ],
    )
    report = json.loads(invoke("job", "run", "--lake", str(tmp_path), "--format", "json").output)
    text = invoke("job", "run", "--lake", str(tmp_path)).output

    assert report["job"]["alloc_gpu_h"] == pytest.approx(10.0)
    assert report["job"]["runtime_s"] == pytest.approx(18000)
    # the hours it held are known, how busy its GPUs were is not (the text said neither, and
    # told to build the marts that were built)
    assert "GPU-hours: 10.00 allocated; no GPU telemetry" in text
    assert "gpuledger attribute" not in text


def test_a_record_without_its_nodes_shows_those_its_allocations_name(tmp_path):
    """A trace's or another tool's record names no node; with no sample either, the report
    said "Nodes: -" beside allocations on g002."""
    r.build_lake(
        tmp_path,
        jobs=[r.job("e", 0, 3600, nodes=None)],
        job_gpus=[r.job_gpu("e", 0, 3600, node="g002"), r.job_gpu("e", 0, 3600, node="g003")],
    )
    out = invoke("job", "e", "--lake", str(tmp_path)).output

    assert "Nodes: 2 (g002, g003)" in out


def test_a_broken_record_gives_no_negative_time_or_limit(tmp_path):
    # another tool's record: an end before its start and a negative time limit ("Run Time:
    # -1-23:50:00", "Time Limit: -1-23:59:00 (-6000% used)", and still --time advice)
    r.build_lake(
        tmp_path,
        jobs=[r.job("b", 600, 0, time_limit_s=-60, cpus=-4)],
        job_gpus=[r.job_gpu("b", 0, 600)],
    )
    report = json.loads(invoke("job", "b", "--lake", str(tmp_path), "--format", "json").output)

    assert report["job"]["runtime_s"] == 0
    assert report["job"]["time_limit_s"] is None and report["job"]["cpus"] is None
    assert not any("--time" in (a.get("option") or "") for a in report["next_time"])


def test_energy_known_of_some_gpus_says_of_which(tmp_path):
    # 2 GPUs for an hour, the second reporting no power nor energy: "Energy: 0.30 kWh" read as
    # the whole job's
    times = range(0, 3600, 60)
    r.build_lake(
        tmp_path,
        samples=r.samples(times, gpu_index=0, power_w=300.0)
        + r.samples(times, gpu_index=1, engine_active=0.5),
        jobs=[r.job("p1", 0, 3600, gpus=2)],
        job_gpus=[r.job_gpu("p1", 0, 3600, gpu_index=0), r.job_gpu("p1", 0, 3600, gpu_index=1)],
    )
    result = invoke("job", "p1", "--lake", str(tmp_path))

    assert result.exit_code == 0, result.output
    assert "Energy: 0.30 kWh" in result.output
    assert "of 1 of its 2 GPUs: the other reported no power" in result.output


def test_a_job_that_started_after_the_datas_end_has_run_no_time_yet(tmp_path):
    # a trace's snapshot: the job started an hour after the last sample, its record's last
    # time earlier still ("Run Time: -1-23:00:00")
    r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 3600, 30), engine_active=0.5),
        jobs=[r.job("late", 7200, None, state="RUNNING", updated_ts=r.at(0))],
        job_gpus=[r.job_gpu("late", 7200, None, gpu_index=1)],
    )
    report = json.loads(invoke("job", "late", "--lake", str(tmp_path), "--format", "json").output)

    assert report["job"]["runtime_s"] == 0
