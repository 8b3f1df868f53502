"""`gpuledger bench --scenario scale`: the synthetic lake (sql/bench/synthetic_samples.sql)
draws the simulator's distributions, and the scenario reports its time and peak memory."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest
from click.testing import CliRunner

from app.bench.lakes import SYNTHETIC_START, synthetic_lake
from app.bench.run import BenchPlan, render_bench, run_bench
from app.cli import cli
from collector.sim import SimConfig, simulate
from warehouse.lake import Lake

GPUS, DAYS, INTERVAL = 256, 2, 240  # 32 nodes, the last 4 an A100 island (as the simulator's)


def _samples(root) -> str:
    return f"read_parquet('{root}/gpu_samples/**/*.parquet', hive_partitioning = false)"


@pytest.fixture(scope="module")
def lakes(tmp_path_factory):
    """The synthetic lake and the simulator's, the same fleet size, days and interval."""
    base = tmp_path_factory.mktemp("scale")
    synthetic = Lake(base / "synthetic")
    made = synthetic_lake(synthetic, GPUS, DAYS, interval_s=INTERVAL)
    simulated = Lake(base / "sim")
    simulate(SimConfig(gpus=GPUS, days=DAYS, interval_s=INTERVAL), simulated)
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        yield con, made, synthetic.root, simulated.root


def test_every_gpu_is_sampled_once_a_step_less_the_lost_scrapes(lakes):
    con, made, root, _ = lakes
    steps = DAYS * 86400 // INTERVAL
    first = SYNTHETIC_START
    [(rows, gpus, per_step_max, lo, hi)] = con.sql(
        f"""SELECT count(*), count(DISTINCT gpu_uuid),
                   max(n), min(lo), max(hi)
            FROM (SELECT gpu_uuid, epoch(ts) // {INTERVAL} AS step, count(*) AS n,
                         min(ts) AS lo, max(ts) AS hi
                  FROM {_samples(root)} GROUP BY ALL)"""
    ).fetchall()

    assert made.gpus == gpus == GPUS and made.samples == rows
    assert per_step_max == 1  # one sample per GPU and step: jitter keeps it in its step
    assert 0.97 * GPUS * steps <= made.samples < GPUS * steps  # 0.3 % lost, a few outages
    assert lo >= first and hi < first + dt.timedelta(days=DAYS)


def test_values_stay_within_what_the_device_can_show(lakes):
    con, _, root, _ = lakes
    [(bad,)] = con.sql(
        f"""SELECT count(*) FROM {_samples(root)}
            WHERE NOT (gpu_util_pct BETWEEN 0 AND 100)
               OR NOT coalesce(sm_active BETWEEN 0 AND 1 AND tensor_active <= sm_active
                               AND dram_active BETWEEN 0 AND 1
                               AND engine_active BETWEEN 0 AND 1, true)
               OR power_w > CASE WHEN model LIKE '%A100%' THEN 400 ELSE 700 END
               OR power_w < CASE WHEN model LIKE '%A100%' THEN 55 ELSE 70 END * 0.9
               OR fb_used_mib + fb_free_mib
                  <> CASE WHEN model LIKE '%A100%' THEN 81920 ELSE 81559 END - 512
               OR fb_used_mib < 0"""
    ).fetchall()

    assert bad == 0


def test_each_sample_names_the_job_the_allocations_give_it(lakes):
    con, _, root, _ = lakes
    [(samples, disagree, allocated)] = con.sql(
        f"""SELECT count(*),
                   count(*) FILTER (WHERE s.job_id IS DISTINCT FROM a.job_id
                                    OR s.hpc_job IS DISTINCT FROM a.job_id),
                   avg(CAST(a.job_id IS NOT NULL AS INTEGER))
            FROM {_samples(root)} AS s
            LEFT JOIN read_parquet('{root}/job_gpus/**/*.parquet') AS a
              ON a.gpu_uuid = s.gpu_uuid AND a.start_ts <= s.ts AND s.ts < a.end_ts"""
    ).fetchall()

    assert samples > 0 and disagree == 0
    assert 0.7 <= allocated <= 0.9  # the simulator's fleet is ~80 % allocated


def test_jobs_hold_lanes_of_one_two_four_or_eight_gpus(lakes):
    con, made, root, _ = lakes
    sizes = dict(
        con.sql(
            f"""SELECT gpus, count(*) FROM read_parquet('{root}/jobs/**/*.parquet')
                GROUP BY gpus"""
        ).fetchall()
    )

    assert {4, 8} <= set(sizes) <= {1, 2, 4, 8}  # 78 % of nodes in one lane of 8
    assert sum(sizes.values()) == made.jobs


def test_idle_jobs_take_their_share_of_the_allocated_samples(lakes):
    """Idle and memory-holding jobs (never a kernel) hold 31 ‰ of the simulator's allocated
    GPU-time; here their share of allocated samples is the jobs whose every sample is at 0."""
    con, _, root, _ = lakes
    [(share, idle_jobs)] = con.sql(
        f"""WITH j AS (SELECT job_id, count(*) AS n, max(gpu_util_pct) AS peak
                       FROM {_samples(root)} WHERE job_id IS NOT NULL GROUP BY job_id)
            SELECT sum(n) FILTER (WHERE peak = 0) / sum(n), count(*) FILTER (WHERE peak = 0)
            FROM j"""
    ).fetchall()

    assert idle_jobs > 0
    assert 0.015 <= share <= 0.06


def test_the_h100_samples_look_like_the_simulators(lakes):
    """The same statistics of the synthetic and the simulated lake, same sizes, over the
    allocated samples of H100 nodes (the simulator's small fleet is less allocated on its
    second day, ~55 %, as big jobs wait for whole nodes; unallocated samples are all 0)."""
    con, _, root, sim_root = lakes
    query = """SELECT avg(gpu_util_pct), avg(CAST(gpu_util_pct = 0 AS INTEGER)),
                      avg(sm_active), avg(power_w), avg(fb_used_mib) / 1024, avg(temp_c),
                      avg(CAST(sm_active IS NULL AS INTEGER))
               FROM {} WHERE model LIKE '%H100%' AND job_id IS NOT NULL"""
    [ours] = con.sql(query.format(_samples(root))).fetchall()
    [theirs] = con.sql(query.format(_samples(sim_root))).fetchall()
    util, idle, sm, power, fb_gib, temp, no_profiling = ours

    assert util == pytest.approx(theirs[0], abs=8)  # ~80 % mean GPU_UTIL
    assert idle == pytest.approx(theirs[1], abs=0.08)  # a sixth of them fully idle
    assert sm == pytest.approx(theirs[2], abs=0.06)  # SM activity far below GPU_UTIL
    assert power == pytest.approx(theirs[3], rel=0.12)
    assert fb_gib == pytest.approx(theirs[4], rel=0.2)
    assert temp == pytest.approx(theirs[5], abs=4)
    assert 0 < no_profiling < 0.15  # a node in sixteen has no profiling fields


def test_the_scale_scenario_reports_time_memory_and_load(tmp_path):
    plan = BenchPlan(
        scenarios=("scale",), scale_gpus=16, scale_days=1, scale_interval=600, workdir=tmp_path
    )
    said: list[str] = []
    result = run_bench(plan, echo=said.append)["scale"]
    assert "bench scale: generated day 1 of 1" in said  # minutes of silence at full size
    machine = {"cpus": 2, "memory_gb": 8, "platform": "test"}
    text = render_bench({"machine": machine, "scale": result})

    assert result["samples"] == pytest.approx(16 * 144, rel=0.05)
    assert result["interval_s"] == 600 and result["peak_rss_within_4gb"]
    assert len(result["load_average"]) == 3
    assert 0 < result["generate_cpu_s"] and 0 < result["attribute_cpu_s"]
    assert "16 GPUs × 1 days at 600 s" in text and "within 4 GB" in text


def test_an_interval_that_does_not_divide_a_day_is_one_clear_line(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        cli, ["bench", "--scenario", "scale", "--scale-interval", "7", "--out", str(out)]
    )

    assert result.exit_code == 2
    assert "7 s does not divide a day" in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_a_scale_lake_larger_than_the_disk_is_refused_before_anything_is_written(tmp_path):
    # 1,000,000 GPUs × 365 days asked for ~34 TB of a 62 GB disk; it took 200 s to stop
    out = tmp_path / "r.json"
    work = tmp_path / "work"
    args = ["--scenario", "scale", "--scale-gpus", "1000000", "--scale-days", "365"]
    result = CliRunner().invoke(cli, ["bench", *args, "--out", str(out), "--lake", str(work)])

    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "needs about" in result.output and "GB free" in result.output
    assert list(work.iterdir()) == [] and not out.exists()
