"""`gpuledger bench`: attribution against in-process baselines, at scale, incrementally, and the
dashboard's queries, each scenario timed in one process on one lake.

Absolute times vary from machine to machine (and on a shared one, from minute to minute); the
ratios against a baseline run in the same process on the same lake are what to compare.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

from app.bench.scenarios import DEFAULT_SCENARIOS, SCENARIOS
from app.errors import AppError
from warehouse.lake import Lake

__all__ = [
    "DEFAULT_SCENARIOS",
    "SCENARIOS",
    "BenchPlan",
    "peak_rss_mb",
    "render_bench",
    "run_bench",
]

_LATE_JOBS = 100  # finished jobs whose late records the incremental scenario lands
_REPORT_JOBS = 5  # jobs whose `gpuledger job` the attribution scenario times
Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class BenchPlan:
    """Which scenarios to run and on what sizes (GPUs × days at 30 s sampling; the scale
    lake's at `scale_interval`)."""

    scenarios: tuple[str, ...] = DEFAULT_SCENARIOS
    gpus: int = 1024
    days: int = 7
    scale_gpus: int = 4096
    scale_days: int = 30
    scale_interval: int = 30
    replay_gpus: int = 1024
    replay_days: int = 30
    jobstats_gpus: int = 16
    jobstats_days: int = 1
    history_gpus: int = 8
    history_days: tuple[int, ...] = (7, 28, 365)
    # issue #24's lake of under a million samples (attribution scenario; 0 GPUs: skipped)
    small_gpus: int = 64
    small_days: int = 2
    small_interval: int = 15
    workdir: Path | None = None


def _timed(func: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = func()
    return time.perf_counter() - start, value


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


SCALE_MEMORY_MB = 4096.0  # issue #24: the scale lakes attributed within 4 GB


# The synthetic lake's samples take 33 bytes each in Parquet (measured: 256 GPUs × 2 days at
# 30 s, 1.47 M samples, 48.6 MB); its day partitions and marts add about a fifth.
SCALE_BYTES_PER_SAMPLE = 33 * 1.2


def _scale_fits(plan: BenchPlan) -> None:
    """AppError, before anything is written, where the `scale` lake cannot fit on the disk of
    the bench's folder (1,000,000 GPUs × 365 days asked for ~34 TB of a 62 GB disk, and took
    200 s to stop)."""
    if "scale" not in plan.scenarios:
        return
    folder = plan.workdir or Path(tempfile.gettempdir())
    samples = plan.scale_gpus * plan.scale_days * (86400 // plan.scale_interval)
    need = samples * SCALE_BYTES_PER_SAMPLE
    free = shutil.disk_usage(folder).free
    if need > free:
        raise AppError(
            f"the scale lake ({plan.scale_gpus:,} GPUs × {plan.scale_days} days at "
            f"{plan.scale_interval} s: {samples:,} samples) needs about {need / 1e9:,.1f} GB and "
            f"{folder} has {free / 1e9:,.1f} GB free: choose fewer GPUs or days, or --lake on a "
            "larger disk"
        )


def _scale(lake: Lake, plan: BenchPlan, echo: Echo) -> dict[str, Any]:
    """Generate the synthetic lake, attribute it from scratch, report wall time and peak RSS."""
    from app.bench.baselines import best_of, floor_scan
    from app.bench.lakes import synthetic_lake
    from app.pipeline import default_pipeline_config
    from warehouse.attribution import build_summary_marts
    from warehouse.connection import WarehouseConfig
    from warehouse.partitions import build_sample_marts

    echo(
        f"bench scale: generating {plan.scale_gpus} GPUs × {plan.scale_days} days at "
        f"{plan.scale_interval} s (synthetic, the simulator's distributions)"
    )
    load_before = os.getloadavg()[0]
    cpu = time.process_time()
    generate_s, made = _timed(
        lambda: synthetic_lake(
            lake,
            plan.scale_gpus,
            plan.scale_days,
            interval_s=plan.scale_interval,
            progress=lambda day, days: echo(f"bench scale: generated day {day} of {days}"),
        )
    )
    generate_cpu_s = time.process_time() - cpu
    rss_generated = peak_rss_mb()
    load_generated = os.getloadavg()[0]
    cpu = time.process_time()
    echo(f"bench scale: attributing {made.samples:,} samples")
    con = lake.connect(require=("gpu_samples",))
    config = default_pipeline_config().attribution
    ingest_s, _ = _timed(lambda: build_sample_marts(WarehouseConfig(lake.root), config.values()))
    rss_ingest = peak_rss_mb()
    summary_s, counts = _timed(lambda: build_summary_marts(con, lake.root, config))
    marts_s = ingest_s + summary_s
    attribute_cpu_s = time.process_time() - cpu
    rss = peak_rss_mb()
    load_attributed = os.getloadavg()[0]
    echo("bench scale: plain scan floor")
    floor_s = best_of(1, lambda: floor_scan(con))
    con.close()
    return {
        "gpus": made.gpus,
        "days": made.days,
        "interval_s": plan.scale_interval,
        "samples": made.samples,
        "jobs": made.jobs,
        "generate_s": generate_s,
        "generate_samples_per_s": made.samples / generate_s,
        # CPU seconds of the process, all its threads: on a shared machine the steadier figure
        "generate_cpu_s": generate_cpu_s,
        "ingest_pass_s": ingest_s,
        "marts_s": summary_s,
        "attribute_s": marts_s,
        "attribute_samples_per_s": made.samples / marts_s,
        "attribute_cpu_s": attribute_cpu_s,
        "floor_scan_s": floor_s,
        "attribute_vs_floor": marts_s / floor_s,
        "peak_rss_mb_after_generation": rss_generated,
        "peak_rss_mb_after_ingest_pass": rss_ingest,
        "peak_rss_mb": rss,
        "peak_rss_within_4gb": rss <= SCALE_MEMORY_MB,
        # the machine may be shared: the 1-minute load average before generating, after it
        # and after attributing says how far the wall times stand for an idle machine's
        "load_average": [load_before, load_generated, load_attributed],
        "mart_rows": counts,
    }


# issue #23's speed targets: (GPUs, days) → seconds for the replay; memory under 2 GB for both
REPLAY_TARGETS_S = {(1024, 30): 60.0, (10_000, 30): 600.0}
REPLAY_MEMORY_MB = 2048.0


def _replay(lake: Lake, plan: BenchPlan, echo: Echo) -> dict[str, Any]:
    """Land the simulator's jobs and nodes (no telemetry), replay them under the recorded
    policy: wall and CPU seconds, jobs replayed per second, peak RSS. Then again with each
    node's CPUs and memory given (cons_tres: the simulator's 12 CPUs and 120 GiB a GPU, which
    its jobs that strand GPUs ask all of): the cost of placing by CPUs and memory too."""
    from collector.sim.runner import SimConfig, simulate_records
    from detectors.replay.engine import replay
    from detectors.replay.policy import Policy, apply_settings
    from detectors.replay.workload import load_workload, recorded_settings

    cfg = SimConfig(cluster="sim", gpus=plan.replay_gpus, days=plan.replay_days)
    echo(f"bench replay: landing {plan.replay_gpus} GPUs × {plan.replay_days} days of jobs")
    land_s, made = _timed(lambda: simulate_records(cfg, lake))
    con = lake.connect(require=("jobs",))
    try:
        load_s, workload = _timed(lambda: load_workload(con, cfg.cluster))
        policy = apply_settings(Policy(), recorded_settings(con, cfg.cluster))
    finally:
        con.close()
    echo(f"bench replay: replaying {workload.size:,} jobs")
    cpu = time.process_time()
    load_before = os.getloadavg()[0]
    replay_s, out = _timed(lambda: replay(workload, policy))
    cpu_s = time.process_time() - cpu
    started = int((out.start_e == out.start_e).sum())
    sizes = [
        setting
        for node, gpus in zip(workload.nodes, workload.node_gpus.tolist(), strict=True)
        for setting in (f"node.{node}.CPUs={gpus * 12}", f"node.{node}.RealMemory={gpus * 122880}")
    ]
    echo("bench replay: again with the nodes' CPUs and memory (cons_tres)")
    cons_policy = apply_settings(policy, sizes)
    cpu = time.process_time()
    cons_s, cons = _timed(lambda: replay(workload, cons_policy))
    cons_cpu_s = time.process_time() - cpu
    target = REPLAY_TARGETS_S.get((plan.replay_gpus, plan.replay_days))
    rss = peak_rss_mb()
    return {
        "gpus": made.gpus,
        "days": plan.replay_days,
        "jobs": workload.size,
        "started": started,
        "land_s": land_s,
        "load_s": load_s,
        "replay_s": replay_s,
        "replay_cpu_s": cpu_s,
        "jobs_per_s": workload.size / replay_s if replay_s > 0 else float("inf"),
        "jobs_per_cpu_s": workload.size / cpu_s if cpu_s > 0 else float("inf"),
        "cons_tres_replay_s": cons_s,
        "cons_tres_replay_cpu_s": cons_cpu_s,
        "cons_tres_started": int((cons.start_e == cons.start_e).sum()),
        # the machine may be shared: the 1-minute load average before and after the replay
        # says how far its wall time stands for its CPU time
        "load_average": [load_before, os.getloadavg()[0]],
        "target_s": target,
        "within_target_wall": None if target is None else replay_s <= target,
        "within_target_cpu": None if target is None else cpu_s <= target,
        "peak_rss_mb": rss,
        "peak_rss_within_2gb": rss <= REPLAY_MEMORY_MB,
    }


def _attribution(lake: Lake, aside: Path, plan: BenchPlan, echo: Echo) -> dict[str, Any]:
    """The `attribution`, `incremental` and `dashboard` scenarios on one simulated lake."""
    from app.bench.baselines import (
        best_of,
        empty_mart_queries,
        floor_scan,
        pandas_merge_asof,
        polars_join_asof,
    )
    from app.bench.lakes import hold_back_last_day, land_late_records
    from app.bench.queries import time_queries
    from app.pipeline import default_pipeline_config, detect
    from collector.sim import SimConfig, simulate
    from warehouse.attribution import build_summary_marts
    from warehouse.connection import WarehouseConfig
    from warehouse.partitions import build_sample_marts
    from warehouse.summary import record_summary_state, refresh_summary_marts

    wanted = set(plan.scenarios)
    extra = 1 if "incremental" in wanted else 0
    echo(f"bench: simulating {plan.gpus} GPUs × {plan.days + extra} days into {lake}")
    sim_s, sim = _timed(lambda: simulate(SimConfig(gpus=plan.gpus, days=plan.days + extra), lake))
    held = hold_back_last_day(lake, aside) if extra else None
    config = default_pipeline_config().attribution
    con = lake.connect(require=("gpu_samples",))
    [(samples,)] = con.sql("SELECT count(*) FROM gpu_samples").fetchall()
    echo("bench: attribution at ingest (the per-day pass over samples, owners decided there)")
    ingest_s, report = _timed(
        lambda: build_sample_marts(WarehouseConfig(lake.root), config.values(), force=True)
    )
    echo("bench: plain scan floor, then the marts (best of 2 each)")
    floor_s = best_of(2, lambda: floor_scan(con))
    marts_s = best_of(2, lambda: build_summary_marts(con, lake.root, config))
    rss = peak_rss_mb()
    full_s = ingest_s + marts_s
    out: dict[str, Any] = {
        "gpus": sim.gpus,
        "days": plan.days,
        "samples": samples,
        "jobs": sim.jobs,
        "simulate_s": sim_s,
        "floor_scan_s": floor_s,
        "marts_s": marts_s,
        "marts_vs_floor": marts_s / floor_s,
        "ingest_pass_s": ingest_s,
        "ingest_pass_per_day_s": ingest_s / max(len(report.rebuilt), 1),
        "full_rebuild_s": full_s,
        "full_rebuild_vs_floor": full_s / floor_s,
        "full_rebuild_samples_per_s": samples / full_s,
        "peak_rss_mb": rss,
    }
    if "attribution" in wanted:
        from app.bench.first_pass import time_external_first_pass, time_small_lake

        # before the dataframe baselines, so the peak RSS it reports is this step's
        out["external_first_pass"] = time_external_first_pass(
            lake.root, aside.parent / "external", echo
        )
        if plan.small_gpus:
            out["small_lake"] = time_small_lake(
                aside.parent / "small", plan.small_gpus, plan.small_days, plan.small_interval, echo
            )
    # best of 2, as the floor and the marts: a first, cold run against warm ones flattered us
    echo("bench: polars join_asof baseline (best of 2)")
    out["polars_join_asof"] = min((polars_join_asof(con) for _ in range(2)), key=_total_s)
    echo("bench: pandas merge_asof baseline (best of 2)")
    out["pandas_merge_asof"] = min((pandas_merge_asof(con) for _ in range(2)), key=_total_s)
    for name in ("polars_join_asof", "pandas_merge_asof"):
        out[f"marts_speedup_vs_{name}"] = out[name]["total_s"] / marts_s
        out[f"full_rebuild_speedup_vs_{name}"] = out[name]["total_s"] / full_s
    if held is not None:
        echo("bench: incremental (one more day of samples lands)")
        # The state a whole build of the summary marts leaves (build_marts records it; the
        # timed builds above are build_summary_marts alone, always whole).
        record_summary_state(lake.root, config)
        held.restore()
        ingest_day_s, days = _timed(
            lambda: build_sample_marts(WarehouseConfig(lake.root), config.values())
        )
        update_s, update = _timed(lambda: refresh_summary_marts(con, lake.root, config))
        empty = lake.root.parent / "empty"  # a lake with no table at all
        empty.mkdir(parents=True, exist_ok=True)
        floor_update_s = best_of(2, lambda: empty_mart_queries(empty))
        out["incremental"] = {
            "seconds": update_s,
            "vs_marts": update_s / marts_s,
            "mode": update.mode,
            "mart_sql_on_empty_s": floor_update_s,
            "mart_sql_on_empty_vs_marts": floor_update_s / marts_s,
            "days_updated": [f"{c}/{d.isoformat()}" for c, d in update.days],
            "jobs_recomputed": update.jobs,
            "weeks_recomputed": update.weeks,
            "ingest_day_s": ingest_day_s,
            "ingest_days_rebuilt": len(days.rebuilt),
            "ingest_days_tail": len(days.tails),
            "ingest_day_plus_update_s": ingest_day_s + update_s,
            "vs_full_rebuild": (ingest_day_s + update_s) / full_s,
            "mart_rows": update.counts,
        }
        echo(f"bench: incremental (late records of {_LATE_JOBS} finished jobs land)")
        moved = land_late_records(con, lake, _LATE_JOBS)
        late_ingest_s, late_days = _timed(
            lambda: build_sample_marts(WarehouseConfig(lake.root), config.values())
        )
        late_s, late = _timed(lambda: refresh_summary_marts(con, lake.root, config))
        out["incremental"]["late_records"] = {
            "jobs": moved,
            "ingest_s": late_ingest_s,
            "ingest_days_rebuilt": len(late_days.rebuilt),
            "seconds": late_s,
            "vs_marts": late_s / marts_s,
            "mode": late.mode,
            "jobs_recomputed": late.jobs,
            "weeks_recomputed": late.weeks,
        }
    if "dashboard" in wanted:
        # the findings and recommendations the alerts page and the report show: without them
        # their queries would be timed on empty tables
        echo("bench: detect (findings and recommendations for the pages to show)")
        detect_s, detected = _timed(
            lambda: detect(lake, default_pipeline_config(), dt.datetime.now(dt.UTC))
        )
        out["detect"] = {
            "seconds": detect_s,
            "findings": detected.findings.num_rows,
            "recommendations": detected.recommendations,
        }
        echo("bench: dashboard and report queries")
        out["dashboard"] = time_queries(lake.connect())
        echo("bench: dashboard pages (AppTest, cold caches)")
        from app.bench.dashboard_timing import time_pages

        out["dashboard_pages"] = time_pages(lake)
    echo(f"bench: gpuledger job for {_REPORT_JOBS} jobs, largest to smallest")
    out["job_report"] = _time_reports(con, lake)
    con.close()
    return out


def _time_reports(con: duckdb.DuckDBPyConnection, lake: Lake) -> dict[str, Any]:
    """`gpuledger job` on `_REPORT_JOBS` jobs spread from the most GPU-hours to the fewest."""
    from app.bench.job_timing import time_job_reports
    from warehouse import queries

    jobs = queries.rows(con, "bench/report_jobs")
    step = max(len(jobs) // _REPORT_JOBS, 1)
    picked = [(row["job_id"], row["gpus"]) for row in jobs[::step][:_REPORT_JOBS]]
    return time_job_reports(lake.root, picked)


def run_bench(plan: BenchPlan, echo: Echo) -> dict[str, Any]:
    """Run the plan's scenarios in throw-away lakes under `plan.workdir`; return the results."""
    results: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30),
        },
        "scenarios": list(plan.scenarios),
    }
    try:
        if plan.workdir is not None:  # a folder named for the lakes is made, as a user expects
            plan.workdir.mkdir(parents=True, exist_ok=True)
        _scale_fits(plan)
        base = Path(tempfile.mkdtemp(prefix="gpuledger-bench-", dir=plan.workdir))
    except OSError as exc:
        raise AppError(
            f"cannot make the bench's lakes under {plan.workdir or tempfile.gettempdir()}: "
            f"{exc.strerror or exc}"
        ) from exc
    try:
        if "replay" in plan.scenarios:  # first, so the peak RSS it reports is its own
            results["replay"] = _replay(Lake(base / "replay"), plan, echo)
            shutil.rmtree(base / "replay", ignore_errors=True)
        if "scale" in plan.scenarios:  # early, so the peak RSS it reports is its own
            results["scale"] = _scale(Lake(base / "scale"), plan, echo)
            shutil.rmtree(base / "scale", ignore_errors=True)
        if {"attribution", "incremental", "dashboard"} & set(plan.scenarios):
            results["attribution"] = _attribution(Lake(base / "lake"), base / "aside", plan, echo)
        if "history" in plan.scenarios:
            from app.bench.history import run_history_bench

            results["history"] = run_history_bench(
                base / "history", plan.history_gpus, plan.history_days, echo
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if "prometheus" in plan.scenarios:
        from app.bench.prometheus import run_prometheus_bench

        echo("bench: Prometheus JSON → Parquet vs prometheus-api-client's MetricRangeDataFrame")
        results["prometheus"] = run_prometheus_bench(workdir=plan.workdir)
    if "jobstats" in plan.scenarios:
        from app.bench.jobstats import run_jobstats_bench

        results["jobstats"] = run_jobstats_bench(
            gpus=plan.jobstats_gpus, days=plan.jobstats_days, workdir=plan.workdir, echo=echo
        )
    return results


def _against(speedup: float, baseline: str) -> str:
    """`speedup` (the baseline's time / ours) in words: "27× faster than pandas", or
    "1.1× slower than pandas" where ours took longer."""
    if speedup >= 1:
        return f"{speedup:.{0 if speedup >= 10 else 1}f}× faster than {baseline}"
    return f"{1 / speedup:.1f}× slower than {baseline}"


def _total_s(run: dict[str, float]) -> float:
    return run["total_s"]


def _attribution_rows(a: dict[str, Any]) -> list[tuple[str, float, str]]:
    inc = a.get("incremental")
    simulated = f"{a['samples']:,} samples, {a['jobs']:,} jobs" + (
        "; its time includes the day held back for `incremental`" if inc else ""
    )
    rows = [
        ("simulate", a["simulate_s"], simulated),
        ("plain scan floor (DuckDB)", a["floor_scan_s"], "baseline"),
        (
            "attribution: the summary marts (job_usage, usage_daily, cluster_occupancy, …)",
            a["marts_s"],
            f"{a['marts_vs_floor']:.2f}× the floor; "
            + _against(a["marts_speedup_vs_pandas_merge_asof"], "pandas")
            + " (which also finds each sample's owner: see the full rebuild)",
        ),
        (
            "attribution at ingest: per-day pass over samples (owners decided there)",
            a["ingest_pass_s"],
            f"{a['ingest_pass_per_day_s']:.2f} s per day",
        ),
        (
            "full rebuild from scratch (all of the above)",
            a["full_rebuild_s"],
            f"{a['full_rebuild_vs_floor']:.1f}× the floor; "
            + _against(a["full_rebuild_speedup_vs_pandas_merge_asof"], "pandas"),
        ),
    ]
    ext = a.get("external_first_pass")
    if ext:
        met = "met" if ext["within_target"] else "missed"
        goal = "met" if ext["within_goal"] else "missed"
        rows.append(
            (
                "first pass over an external lake (samples without job_id)",
                ext["attribute_s"],
                f"{ext['vs_floor']:.1f}× its floor ({ext['floor_scan_s']:.2f} s; in CPU time "
                f"{ext['vs_floor_cpu']:.1f}×); target "
                f"≤ {ext['target']:.0f}×: {met}, goal {ext['goal']:.0f}×: {goal}; "
                f"{ext['attribute_cpu_s']:.1f} s CPU; peak RSS {ext['peak_rss_mb']:,.0f} MiB",
            )
        )
    small = a.get("small_lake")
    if small:
        load = small["load_average"]
        rows += [
            (
                f"small lake ({small['gpus']} GPUs × {small['days']} days at "
                f"{small['interval_s']} s, {small['samples']:,} samples): attribute, in process",
                small["best_in_process_s"],
                f"{small['best_in_process_cpu_s']:.2f} s CPU; target ≤ "
                f"{small['target_s']:.0f} s: "
                + ("met" if small["within_target_in_process"] else "missed")
                + f"; load average {load[0]:.1f} → {load[1]:.1f}",
            ),
            (
                "small lake: gpuledger attribute as a command (start-up included)",
                small["best_command_s"],
                f"{small['best_command_cpu_s']:.2f} s CPU; "
                + ("met" if small["within_target_command"] else "missed"),
            ),
        ]
    for name, label in (
        ("polars_join_asof", "polars join_asof"),
        ("pandas_merge_asof", "pandas merge_asof"),
    ):
        b = a[name]
        rows.append(
            (f"  {label} (baseline)", b["total_s"], f"of which loading {b['load_s']:.2f} s")
        )
    if inc:
        late = inc["late_records"]
        rows += [
            (
                "incremental: ingest of the new day (its pass, the tail of the day before)",
                inc["ingest_day_s"],
                f"{inc['ingest_days_rebuilt']} day rebuilt, {inc['ingest_days_tail']} tail",
            ),
            (
                "incremental: mart update (summary marts, in place)",
                inc["seconds"],
                f"{100 * inc['vs_marts']:.0f} % of the attribution (summary marts) time; "
                f"{inc['mode']}, {inc['jobs_recomputed']:,} jobs and "
                f"{_weeks(inc['weeks_recomputed'])} recomputed",
            ),
            (
                "  the summary marts' SQL on an empty lake (an update's fixed cost)",
                inc["mart_sql_on_empty_s"],
                f"{100 * inc['mart_sql_on_empty_vs_marts']:.0f} % of the attribution time: "
                "no update running each mart's SQL costs less",
            ),
            (
                f"incremental: late records of {late['jobs']} jobs (the passes, the marts)",
                late["ingest_s"] + late["seconds"],
                f"marts {late['seconds']:.2f} s = {100 * late['vs_marts']:.0f} % of the "
                f"attribution time; {late['mode']}, {late['jobs_recomputed']:,} jobs and "
                f"{_weeks(late['weeks_recomputed'])} recomputed",
            ),
            (
                "incremental: new day ingest + mart update",
                inc["ingest_day_plus_update_s"],
                f"{100 * inc['vs_full_rebuild']:.0f} % of the full rebuild "
                f"(one day is 1/{a['days']} of the samples)",
            ),
        ]
    return rows


def _weeks(n: int) -> str:
    return f"{n} week" if n == 1 else f"{n} weeks"


def render_bench(r: dict[str, Any]) -> str:
    """The results as a small table, one section per scenario."""
    machine = r["machine"]
    lines = [
        f"gpuledger bench ({machine['cpus']} CPUs, {machine['memory_gb']} GB, "
        f"{machine['platform']})"
    ]
    rows: list[tuple[str, float, str]] = []
    if "scale" in r:
        s = r["scale"]
        lines.append(
            f"scale: {s['gpus']:,} GPUs × {s['days']} days at {s['interval_s']} s = "
            f"{s['samples']:,} samples, {s['jobs']:,} jobs"
        )
        load = s["load_average"]
        within = "within" if s["peak_rss_within_4gb"] else "OVER"
        rows += [
            (
                "scale: generate (synthetic, the simulator's distributions)",
                s["generate_s"],
                f"{s['generate_samples_per_s']:,.0f} samples/s; {s['generate_cpu_s']:.0f} s CPU",
            ),
            (
                "scale: attribute from scratch",
                s["attribute_s"],
                f"{s['attribute_samples_per_s']:,.0f} samples/s; {s['attribute_cpu_s']:.0f} s CPU; "
                f"peak RSS {s['peak_rss_mb']:,.0f} MiB ({within} 4 GB); "
                f"load average {load[0]:.1f} → {load[1]:.1f} → {load[2]:.1f}",
            ),
            ("scale: plain scan floor", s["floor_scan_s"], "baseline"),
        ]
    if "replay" in r:
        p = r["replay"]
        lines.append(
            f"replay: {p['gpus']:,} GPUs × {p['days']} days = {p['jobs']:,} jobs "
            f"({p['started']:,} started)"
        )
        rows += [
            ("replay: land the jobs and nodes (no telemetry)", p["land_s"], ""),
            ("replay: load the workload from the lake", p["load_s"], ""),
            (
                "replay: the recorded policy, event by event",
                p["replay_s"],
                f"{p['jobs_per_s']:,.0f} jobs/s; {p['replay_cpu_s']:.1f} s CPU; "
                f"peak RSS {p['peak_rss_mb']:,.0f} MiB",
            ),
            (
                "replay: the same, nodes' CPUs and memory given",
                p["cons_tres_replay_s"],
                f"{p['cons_tres_replay_cpu_s']:.1f} s CPU; {p['cons_tres_started']:,} started",
            ),
        ]
        load = p["load_average"]
        verdict = f"load average {load[0]:.1f} → {load[1]:.1f}"
        if p["target_s"] is not None:
            met = (
                "met"
                if p["within_target_wall"]
                else ("met in CPU time only" if p["within_target_cpu"] else "missed")
            )
            verdict = f"target {p['target_s']:.0f} s: {met}; " + verdict
        memory = "under" if p["peak_rss_within_2gb"] else "over"
        lines.append(f"replay: {verdict}; peak RSS {memory} 2 GB")
    if "attribution" in r:
        a = r["attribution"]
        lines.append(f"attribution: {a['gpus']} GPUs × {a['days']} days = {a['samples']:,} samples")
        rows += _attribution_rows(a)
        if "detect" in a:
            d = a["detect"]
            note = f"{d['findings']:,} findings, {d['recommendations']:,} recommendations"
            rows.append(("  detect (before the queries)", d["seconds"], note))
        for q in a.get("dashboard", []):
            note = f"{q['rows']:,} rows" if "seconds" in q else f"failed: {q['error']}"
            rows.append((f"  {q['query']}", q.get("seconds", float("nan")), note))
        for page, secs in a.get("dashboard_pages", {}).items():
            rows.append((f"  page: {page}", secs, "target ≤ 2 s" if secs <= 2 else "over 2 s"))
        if "job_report" in a:
            j = a["job_report"]
            rows += [
                (
                    f"gpuledger job JOBID (median of {len(j['jobs'])}, in process)",
                    j["median_in_process_s"],
                    f"jobs of {min(j['gpus'])}-{max(j['gpus'])} GPUs",
                ),
                (
                    "gpuledger job JOBID (median, a new process)",
                    j["median_process_s"],
                    f"{j['median_process_cpu_s']:.2f} s CPU; target ≤ 0.3 s",
                ),
            ]
    if "history" in r:
        h = r["history"]
        met = "met" if h["within_target"] else "missed"
        lines.append(
            f"history: one more day on {h['gpus']} GPUs × "
            + ", ".join(str(run["days"]) for run in h["runs"])
            + f" days: the longest's (a) + (b) is {h['append_ratio']:.2f}× the shortest's "
            f"(target ≤ {h['target_ratio']}×: {met}); (a) {h['ingest_ratio']:.2f}×, "
            f"(b) {h['update_ratio']:.2f}×, CPU time of (a) + (b) {h['append_cpu_ratio']:.2f}×"
        )
        for run in h["runs"]:
            days = run["days"]
            rows += [
                (f"history {days} days: build from scratch", run["build_s"], ""),
                (
                    f"history {days} days: (a) ingest of the new day",
                    run["ingest_s"],
                    f"{run['days_rebuilt']} day(s) built, {run['tails_rebuilt']} tail(s); "
                    f"{run['ingest_cpu_s']:.2f} s CPU",
                ),
                (
                    f"history {days} days: (b) mart update",
                    run["update_s"],
                    f"{run['jobs_recomputed']} of {run['jobs']} jobs, "
                    f"{run['weeks_recomputed']} week(s); {run['update_cpu_s']:.2f} s CPU",
                ),
                (
                    f"history {days} days: (a) + (b)",
                    run["append_s"],
                    f"{run['samples']:,} samples; {run['append_cpu_s']:.2f} s CPU",
                ),
                (f"history {days} days: nothing changed", run["unchanged_s"], ""),
            ]
    prom = r.get("prometheus") or {}
    if "ours_s" in prom:
        rows.append(("Prometheus JSON → Parquet", prom["ours_s"], f"{prom['samples']:,} samples"))
    if "client_dataframe_s" in prom:
        rows.append(
            (
                "  prometheus-api-client DataFrame",
                prom["client_dataframe_s"],
                f"ours {prom['speedup']}× faster",
            )
        )
    if "jobstats" in r:
        lines.append(_jobstats_header(r["jobstats"]))
        rows += _jobstats_rows(r["jobstats"])
    width = max((len(name) for name, _, _ in rows), default=10)
    lines += [f"  {name:<{width}}  {secs:8.2f} s   {note}" for name, secs, note in rows]
    return "\n".join(lines)


def _jobstats_header(j: dict[str, Any]) -> str:
    return (
        f"jobstats: {j['gpus']} GPUs × {j['days']} days at {j['interval_s']} s in Prometheus = "
        f"{j['samples']:,} samples of {j['families']} families, {j['jobs']:,} jobs; "
        f"{j['jobs_within_1_point']} of {j['jobs_compared']} jobs' mean utilisation within "
        "1 point of the peer's"
    )


def _jobstats_rows(j: dict[str, Any]) -> list[tuple[str, float, str]]:
    report = j["job_report"]
    return [
        (
            "jobstats-style: 3 PromQL queries at each job's end",
            j["peer_s"],
            f"{j['peer_per_job_ms']:,.1f} ms per job",
        ),
        (
            "gpuledger: collect prometheus",
            j["collect_s"],
            f"{j['collect_samples_per_s']:,.0f} samples/s ({j['samples']:,} of "
            f"{j['families']} families); CPU {j['collect_cpu_s']:.2f} s, Prometheus "
            f"{j['collect_prometheus_cpu_s']:.2f} s",
        ),
        (
            "  the same, as before (JSON API, every column)",
            j["before"]["collect_s"],
            f"{j['before']['collect_samples_per_s']:,.0f} samples/s ({j['before']['samples']:,}"
            f" of {j['before']['families']} families); CPU {j['before']['collect_cpu_s']:.2f} s,"
            f" Prometheus {j['before']['collect_prometheus_cpu_s']:.2f} s; "
            f"the new collect: {j['collect_speedup']:.1f}× its samples/s",
        ),
        ("gpuledger: attribute", j["attribute_s"], ""),
        ("gpuledger: read job_usage (all jobs)", j["read_s"], ""),
        (
            "gpuledger end to end",
            j["ours_s"],
            f"{j['ours_per_job_ms']:,.1f} ms per job, {j['ours_vs_peer']:.1f}× the peer",
        ),
        (
            "gpuledger job JOBID (median, in process)",
            statistics.median(report["in_process_ms"]) / 1000,
            f"{report['median_in_process_vs_peer']:.0f}× the peer's 3 queries "
            f"({statistics.median(report['peer_ms']):.1f} ms)",
        ),
        (
            "gpuledger job JOBID (median, a new process)",
            statistics.median(report["process_ms"]) / 1000,
            "as a user types it",
        ),
    ]
