"""job_usage and usage_daily on hand-made rows: multi-GPU jobs, energy, MIG, midnight."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.marts import rows as r
from warehouse.checks import run_checks

H = 3600.0
KWH = 3_600_000.0  # J per kWh


def test_a_two_gpu_job_with_one_idle_gpu(tmp_path):
    # j1 holds GPUs 0 and 1 over [0, 300); both sampled every 30 s, plus one sample at 300
    # (after the job) so every job sample stands for 30 s.
    times = range(0, 330, 30)
    con = r.build_lake(
        tmp_path,
        samples=(
            # GPU 0 idle: engine_active 0 wins over GPU_UTIL 97 % ("a kernel was running").
            r.samples(times, gpu_index=0, engine_active=0.0, gpu_util_pct=97.0)
            # GPU 1 busy at 0.8, no GPU_UTIL field.
            + r.samples(times, gpu_index=1, engine_active=0.8)
        ),
        jobs=[r.job("j1", 0, 300, gpus=2)],
        job_gpus=[r.job_gpu("j1", 0, 300, gpu_index=0), r.job_gpu("j1", 0, 300, gpu_index=1)],
    )
    job = r.by_job(con)["j1"]

    assert job["gpus"] == 2
    assert job["samples"] == 20  # 10 per GPU; the samples at 300 are nobody's
    assert job["alloc_gpu_h"] == pytest.approx(2 * 300 / H)
    assert job["observed_gpu_h"] == pytest.approx(2 * 300 / H)
    assert job["idle_gpu_h"] == pytest.approx(300 / H)  # all of GPU 0
    assert job["active_gpu_h"] == pytest.approx(300 / H)  # all of GPU 1
    # Σ busy × interval = 0 × 300 + 0.8 × 300 = 240 s (0.8 as float32: rel 1e-7).
    assert job["effective_gpu_h"] == pytest.approx(240 / H, rel=1e-6)
    assert job["busy_mean"] == pytest.approx(240 / 600, rel=1e-6)
    # Means are over the samples that carry the field: only GPU 0 has GPU_UTIL.
    assert job["gpu_util_pct_mean"] == pytest.approx(97.0)
    assert job["sm_active_mean"] is None
    assert job["gpus_never_active"] == 1


def test_a_gpu_no_sample_reported_on_is_not_counted_never_active(tmp_path):
    # j1 holds GPUs 0 and 1 of g001; only GPU 0 reports (busy): GPU 1's work is unknown
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 300, 30), gpu_index=0, engine_active=0.6),
        jobs=[r.job("j1", 0, 300, gpus=2)],
        job_gpus=[r.job_gpu("j1", 0, 300, gpu_index=0), r.job_gpu("j1", 0, 300, gpu_index=1)],
    )
    job = r.by_job(con)["j1"]
    assert (job["gpus"], job["gpus_never_active"]) == (2, 0)


def test_energy_across_a_counter_reset_uses_power_over_the_reset_step(tmp_path):
    # The counter climbs 300 J per 30 s, then the driver reloads between 60 s and 90 s.
    con = r.build_lake(
        tmp_path,
        samples=r.samples(
            [0, 30, 60, 90, 120, 150],
            engine_active=0.5,
            energy_j=[1000.0, 1300.0, 1600.0, 50.0, 350.0, 650.0],
            power_w=[10.0, 10.0, 12.0, 10.0, 10.0, 10.0],
        ),
        jobs=[r.job("j1", 0, 150)],
        job_gpus=[r.job_gpu("j1", 0, 150)],  # the sample at 150 is nobody's
    )
    job = r.by_job(con)["j1"]

    # Before the reset: (1300 - 1000) + (1600 - 1300) = 600 J; over the reset step the
    # sample at 60 s draws 12 W × 30 s = 360 J; after it: (350 - 50) + (650 - 350) = 600 J.
    assert job["energy_kwh"] == pytest.approx((600 + 360 + 600) / KWH)
    # Time-weighted power: (4 × 10 W + 12 W) × 30 s / 150 s = 10.4 W.
    assert job["power_w_mean"] == pytest.approx(10.4)


def test_a_counter_step_no_gpu_can_draw_is_power_times_time(tmp_path):
    # One reading 1e9 J high (then back): the job drew 278 kWh in an hour on one GPU. A rise
    # above 2 kW over the step is a bad reading, and the step counts power × time, as a reset.
    energy = [9000.0 * k for k in range(5)]
    energy[2] += 1e9
    con = r.build_lake(
        tmp_path,
        samples=r.samples([0, 30, 60, 90, 120], power_w=300.0, energy_j=energy),
        jobs=[r.job("j1", 0, 150)],
        job_gpus=[r.job_gpu("j1", 0, 150)],
    )

    # 0→30: 9000 J; 30→60 and 60→90: 300 W × 30 s each (the jump up, then the drop back);
    # 90→120: 9000 J; the last sample: 300 W × its 30 s
    assert r.by_job(con)["j1"]["energy_kwh"] == pytest.approx(5 * 9000 / KWH)


def test_energy_without_a_counter_is_power_times_interval(tmp_path):
    con = r.build_lake(
        tmp_path,
        samples=r.samples([0, 30, 60], power_w=[100.0, 200.0, 300.0]),
        job_gpus=[r.job_gpu("j1", 0, 90)],
    )

    # 100 W × 30 s + 200 W × 30 s + 300 W × 30 s (the last sample: its interval) = 18 000 J.
    assert r.by_job(con)["j1"]["energy_kwh"] == pytest.approx(18_000 / KWH)


def test_two_mig_instances_split_the_devices_energy_and_count_as_one_gpu(tmp_path):
    # Instances 1 and 2 of one GPU both report the device's power (200 W) and energy counter
    # (+6000 J per 30 s) at the same times; jA owns instance 1, jB instance 2, over [0, 120).
    times = [0, 30, 60, 90, 120]
    device = {
        "mig_profile": "3g.40gb",
        "power_w": 200.0,
        "energy_j": [0.0, 6000.0, 12000.0, 18000.0, 24000.0],
    }
    con = r.build_lake(
        tmp_path,
        samples=r.samples(times, mig_instance=1, engine_active=0.9, **device)
        + r.samples(times, mig_instance=2, engine_active=0.0, **device),
        jobs=[r.job("jA", 0, 120), r.job("jB", 0, 120)],
        job_gpus=[
            r.job_gpu("jA", 0, 120, mig_instance=1, mapping="nvml-cgroup"),
            r.job_gpu("jB", 0, 120, mig_instance=2, mapping="nvml-cgroup"),
        ],
        gpus=[r.gpu()],
    )
    usage = r.by_job(con)

    # The device drew 24 000 J over [0, 120); each job gets half: 12 000 J.
    assert usage["jA"]["energy_kwh"] == pytest.approx(12_000 / KWH)
    assert usage["jB"]["energy_kwh"] == pytest.approx(12_000 / KWH)
    assert usage["jA"]["power_w_mean"] == pytest.approx(100.0)  # its share of 200 W
    # Busy and idle are the instance's own.
    assert usage["jA"]["idle_gpu_h"] == 0.0
    assert usage["jB"]["idle_gpu_h"] == pytest.approx(120 / H)
    # One bucket, data over [0, 150): the GPU counts once. Each instance is half the GPU:
    # allocated 2 × 120 s × 0.5 = 120 s; unallocated (the samples at 120) 2 × 30 s × 0.5 = 30 s.
    assert r.fetch(
        con,
        "SELECT gpus_total, gpus_allocated, gpus_unallocated, gpus_unobserved "
        "FROM cluster_occupancy",
    ) == [
        pytest.approx(
            {
                "gpus_total": 1.0,
                "gpus_allocated": 120 / 150,
                "gpus_unallocated": 30 / 150,
                "gpus_unobserved": 0.0,
            }
        )
    ]


def test_a_job_crossing_midnight_is_split_between_the_two_dates(tmp_path):
    # j1 runs 23:50 to 00:10 UTC (T0 is midnight). Busy before midnight, idle after; 100 W,
    # no energy counter. Samples every 30 s, plus one at 00:10 that is nobody's.
    times = list(range(-600, 630, 30))
    con = r.build_lake(
        tmp_path,
        samples=r.samples(
            times,
            engine_active=[1.0 if t < 0 else 0.0 for t in times],
            power_w=100.0,
        ),
        jobs=[r.job("j1", -600, 600)],
        job_gpus=[r.job_gpu("j1", -600, 600)],
    )

    got = r.fetch(
        con,
        "SELECT date, account, user, jobs, alloc_gpu_h, observed_gpu_h, active_gpu_h, "
        "idle_gpu_h, energy_kwh FROM usage_daily ORDER BY date",
    )
    # Each day: 600 s allocated, 20 samples × 30 s = 600 s observed, 100 W × 600 s = 60 000 J.
    day = {
        "account": "physics",
        "user": "alice",
        "jobs": 1,
        "alloc_gpu_h": 600 / H,
        "observed_gpu_h": 600 / H,
        "energy_kwh": 60_000 / KWH,
    }
    assert got == [
        pytest.approx(
            day | {"date": dt.date(2024, 2, 29), "active_gpu_h": 600 / H, "idle_gpu_h": 0.0}
        ),
        pytest.approx(
            day | {"date": dt.date(2024, 3, 1), "active_gpu_h": 0.0, "idle_gpu_h": 600 / H}
        ),
    ]
    # And job_usage has the whole: 1200 s.
    job = r.by_job(con)["j1"]
    assert job["alloc_gpu_h"] == pytest.approx(1200 / H)
    assert job["observed_gpu_h"] == pytest.approx(1200 / H)


def test_a_running_job_is_allocated_up_to_the_end_of_the_data(tmp_path):
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 600, 30), engine_active=0.5),
        jobs=[r.job("j1", 100, None, state="RUNNING")],
        job_gpus=[r.job_gpu("j1", 100, None)],
    )

    # The data ends at the last sample's end: 570 + 30 = 600 s; allocated 600 - 100 = 500 s.
    assert r.by_job(con)["j1"]["alloc_gpu_h"] == pytest.approx(500 / H)


def test_app_throughput_is_reported_work_per_second_reset_aware_over_reporters(tmp_path):
    # j1 on one GPU over [0, 300). Two reporters (two ranks) report cumulative token counters:
    # rank 0: 0 → 1000 → 2500 (t = 0, 100, 200); rank 1 restarts: 500 → 900, then 100 at t=200
    # (a drop: the process restarted from 0, so the 100 counts as new work).
    # tokens = (1000 + 1500) + (400 + 100) = 3000 over the reports' span 200 s → 15 tokens/s.
    # j2 reports samples only: 0 → 600 over 300 s → 2 samples/s.
    def report(job_id, t, reporter, **totals):
        return {
            "cluster": r.CLUSTER,
            "job_id": job_id,
            "ts": r.at(t),
            "node": "g001",
            "reporter": reporter,
            "source": "test",
            **totals,
        }

    reports = [
        report("j1", 0, "rank0", tokens_total=0.0, samples_total=10.0),
        report("j1", 100, "rank0", tokens_total=1000.0, samples_total=20.0),
        report("j1", 200, "rank0", tokens_total=2500.0, samples_total=30.0),
        report("j1", 0, "rank1", tokens_total=500.0),
        report("j1", 100, "rank1", tokens_total=900.0),
        report("j1", 200, "rank1", tokens_total=100.0),
        report("j2", 0, "p", samples_total=0.0),
        report("j2", 300, "p", samples_total=600.0),
    ]
    r.land(tmp_path, "app_throughput", reports)
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 330, 30), gpu_index=0, engine_active=0.5),
        jobs=[r.job("j1", 0, 300), r.job("j2", 0, 300)],
        job_gpus=[r.job_gpu("j1", 0, 300, gpu_index=0)],
    )
    usage = r.by_job(con)
    assert usage["j1"]["app_throughput"] == pytest.approx(15.0)  # tokens win over samples
    assert usage["j2"]["app_throughput"] == pytest.approx(2.0)


def _report(job_id, t, reporter="rank0", **fields):
    return {
        "cluster": r.CLUSTER,
        "job_id": job_id,
        "ts": r.at(t),
        "node": "g001",
        "reporter": reporter,
        "source": "test",
        **fields,
    }


H100_FLOPS = 989e12  # gpu_models: NVIDIA H100 80GB HBM3, dense BF16


def test_counts_that_are_no_counts_are_unknown_never_a_negative_rate(tmp_path):
    # n1: a NaN report made tokens/s NaN; n2: a negative parameter count a negative MFU;
    # n4: a count below 0 (after a drop, the count is new work) a negative rate (-185 % MFU)
    nan = float("nan")
    reports = [
        _report("n1", 0, tokens_total=0.0, model_params=10**9),
        _report("n1", 100, tokens_total=nan),
        _report("n1", 200, tokens_total=1e6),
        _report("n2", 0, tokens_total=0.0, model_params=-(10**9)),
        _report("n2", 200, tokens_total=1e6),
        _report("n4", 0, tokens_total=1e6, model_params=10**9),
        _report("n4", 200, tokens_total=-5e8),
    ]
    r.land(tmp_path, "app_throughput", reports)
    jobs = [r.job(j, 0, 300) for j in ("n1", "n2", "n4")]
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 330, 30), gpu_index=0, engine_active=0.5),
        jobs=jobs,
        job_gpus=[r.job_gpu(j, 0, 300, gpu_index=0) for j in ("n1", "n2", "n4")],
    )
    usage = r.by_job(con)

    assert usage["n1"]["app_throughput"] == pytest.approx(1e6 / 200)  # the NaN left out
    assert usage["n2"]["mfu"] is None and usage["n2"]["model_params"] is None
    # (its one count left is a start, no rate)
    assert usage["n4"]["app_throughput"] is None and usage["n4"]["mfu"] is None


def test_mfu_is_six_params_times_tokens_per_s_over_the_gpus_peak(tmp_path):
    # j1: two H100s over [0, 300); two ranks report 1.2e6 tokens each over [0, 200) s of a 7e9
    # parameter model: 12 000 tokens/s, 6 000 per GPU; MFU = 6 × 7e9 × 12 000 / (2 × 989e12).
    # j2: one H100, 1e6 tokens/s of a 7e9 model would be 42 PFLOP/s, 42× the GPU's peak: a bad
    # count, so no MFU (tokens/s stays). j3: tokens but no parameter count. j4 reports on a GPU
    # model that is not in the table: no MFU, never a guess.
    reports = [
        _report("j1", 0, "rank0", tokens_total=0.0, model_params=7_000_000_000),
        _report("j1", 200, "rank0", tokens_total=1.2e6, model_params=7_000_000_000),
        _report("j1", 0, "rank1", tokens_total=0.0),
        _report("j1", 200, "rank1", tokens_total=1.2e6, model_params=7_000_000_000),
        _report("j2", 0, tokens_total=0.0, model_params=7_000_000_000),
        _report("j2", 100, tokens_total=1e8, model_params=7_000_000_000),
        _report("j3", 0, tokens_total=0.0),
        _report("j3", 100, tokens_total=1e5),
        _report("j4", 0, tokens_total=0.0, model_params=1_000_000),
        _report("j4", 100, tokens_total=1e5, model_params=1_000_000),
    ]
    r.land(tmp_path, "app_throughput", reports)
    times = range(0, 330, 30)
    con = r.build_lake(
        tmp_path,
        samples=(
            r.samples(times, gpu_index=0, engine_active=0.9)
            + r.samples(times, gpu_index=1, engine_active=0.9)
            + r.samples(times, node="g002", engine_active=0.9)
            + r.samples(times, node="g003", engine_active=0.9)
            + r.samples(times, node="g004", engine_active=0.9, model="Mystery GPU 9000")
        ),
        jobs=[
            r.job("j1", 0, 300, gpus=2),
            r.job("j2", 0, 300, nodes=["g002"]),
            r.job("j3", 0, 300, nodes=["g003"]),
            r.job("j4", 0, 300, nodes=["g004"]),
        ],
        job_gpus=[
            r.job_gpu("j1", 0, 300, gpu_index=0),
            r.job_gpu("j1", 0, 300, gpu_index=1),
            r.job_gpu("j2", 0, 300, node="g002"),
            r.job_gpu("j3", 0, 300, node="g003"),
            r.job_gpu("j4", 0, 300, node="g004"),
        ],
    )
    usage = r.by_job(con)

    assert usage["j1"]["model_params"] == 7_000_000_000
    assert usage["j1"]["tokens_per_s_per_gpu"] == pytest.approx(6000.0)
    assert usage["j1"]["mfu"] == pytest.approx(6 * 7e9 * 12_000 / (2 * H100_FLOPS))
    assert usage["j2"]["tokens_per_s_per_gpu"] == pytest.approx(1e6)
    assert usage["j2"]["mfu"] is None
    # ... and `gpuledger check` names it (the others are within their GPUs' peak)
    [bad] = run_checks(con, ("throughput_bounded",))
    assert (bad.subject, bad.detail) == (
        "job j2",
        "reported 7000000000 parameters at 1000000.0 tokens/s per GPU: 42000.0 TFLOP/s per "
        "GPU, above the GPU's peak of 989 (a wrong parameter or token count; no MFU)",
    )
    assert (usage["j3"]["tokens_per_s_per_gpu"], usage["j3"]["mfu"]) == (
        pytest.approx(1000.0),
        None,
    )
    assert usage["j3"]["model_params"] is None
    assert usage["j4"]["tokens_per_s_per_gpu"] == pytest.approx(1000.0)
    assert usage["j4"]["mfu"] is None


def test_a_job_on_mig_instances_gets_no_mfu(tmp_path):
    # A MIG slice has a fraction of the GPU's peak, which the table does not hold.
    r.land(
        tmp_path,
        "app_throughput",
        [
            _report("j1", 0, tokens_total=0.0, model_params=1_000_000),
            _report("j1", 100, tokens_total=1e5, model_params=1_000_000),
        ],
    )
    con = r.build_lake(
        tmp_path,
        samples=r.samples(
            range(0, 330, 30), engine_active=0.5, mig_instance=1, mig_profile="1g.10gb"
        ),  # fmt: skip
        jobs=[r.job("j1", 0, 300)],
        job_gpus=[r.job_gpu("j1", 0, 300, mig_instance=1)],
    )
    job = r.by_job(con)["j1"]

    assert job["tokens_per_s_per_gpu"] == pytest.approx(1000.0)
    assert job["mfu"] is None


def test_a_requeued_jobs_throughput_is_over_the_time_it_held_its_gpus(tmp_path):
    # j1 ran [0, 100), was requeued, waited in the queue [100, 1000) holding nothing, and ran
    # again [1000, 1100), its process restarting from 0: 1000 tokens in each run, 2000 over
    # the 200 s it ran (10 tokens/s), not over the 1100 s from its first report to its last
    # (1.8 tokens/s: the queue counted as time the job was slow). j2 never requeued: its
    # reports' own span.
    reports = [
        _report("j1", 0, tokens_total=0.0, model_params=1_000_000),
        _report("j1", 100, tokens_total=1000.0),
        _report("j1", 1000, tokens_total=0.0),
        _report("j1", 1100, tokens_total=1000.0),
        _report("j2", 0, tokens_total=0.0),
        _report("j2", 100, tokens_total=500.0),
    ]
    r.land(tmp_path, "app_throughput", reports)
    con = r.build_lake(
        tmp_path,
        samples=(
            r.samples(range(0, 100, 30), engine_active=0.9)
            + r.samples(range(1000, 1100, 30), engine_active=0.9)
            + r.samples(range(0, 1200, 30), node="g002", engine_active=0.9)
        ),
        jobs=[r.job("j1", 1000, 1100), r.job("j2", 0, 1200, nodes=["g002"])],
        job_gpus=[
            r.job_gpu("j1", 0, 100),
            r.job_gpu("j1", 1000, 1100),
            r.job_gpu("j2", 0, 1200, node="g002"),
        ],
    )
    usage = r.by_job(con)

    assert usage["j1"]["app_throughput"] == pytest.approx(10.0)
    assert usage["j1"]["tokens_per_s_per_gpu"] == pytest.approx(10.0)
    assert usage["j1"]["mfu"] == pytest.approx(6 * 1e6 * 10.0 / H100_FLOPS)
    assert usage["j2"]["app_throughput"] == pytest.approx(5.0)


def test_a_running_jobs_reports_past_its_last_sample_keep_their_span(tmp_path):
    # reports at 10 tokens/s to 1200 s, the GPU's samples to 600 s: the job's allocation is
    # cut at the data's end (600 s), and a span cut there too read 20 tokens/s
    r.land(
        tmp_path,
        "app_throughput",
        [_report("j1", t, tokens_total=10.0 * t) for t in range(0, 1260, 60)],
    )
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 600, 30), engine_active=0.9),
        jobs=[r.job("j1", 0, None, state="RUNNING")],
        job_gpus=[r.job_gpu("j1", 0, None)],
    )

    assert r.by_job(con)["j1"]["tokens_per_s_per_gpu"] == pytest.approx(10.0)
