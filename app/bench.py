"""`gpuledger bench`: throughput of the simulator and of attribution, with in-process baselines.

Absolute times vary from machine to machine; the ratios against a baseline run in the same
process on the same lake are what to compare.
"""

from __future__ import annotations

import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["render_bench", "run_bench"]

# The floor: reading the sample columns the marts need and grouping them, nothing more.
_FLOOR_QUERY = "bench/plain_scan_floor"


def _timed(func: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = func()
    return time.perf_counter() - start, value


def run_bench(
    gpus: int, days: int, workdir: Path | None, echo: Callable[[str], None]
) -> dict[str, Any]:
    """Simulate `gpus` × `days` into a fresh lake, attribute it, and time both and the floor."""
    import os

    from collector.sim import SimConfig, simulate
    from warehouse import queries
    from warehouse.attribution import AttributionConfig, build_marts, reattribute
    from warehouse.connection import connect

    base = Path(tempfile.mkdtemp(prefix="gpuledger-bench-", dir=workdir))
    try:
        lake = base / "lake"
        echo(f"bench: simulating {gpus} GPUs × {days} days into {lake}")
        sim_s, sim = _timed(lambda: simulate(SimConfig(gpus=gpus, days=days), lake))
        con = connect(lake, require=("gpu_samples",))
        echo("bench: plain scan floor")
        floor_s, _ = _timed(lambda: queries.run_arrow(con, _FLOOR_QUERY))
        echo("bench: attribution (check owners + build every mart)")
        check_s, _ = _timed(lambda: reattribute(con, lake))
        marts_s, counts = _timed(lambda: build_marts(con, lake, AttributionConfig()))
        echo("bench: re-check every sample file against job_gpus (forced)")
        (lake / "_state" / "attribution.sqlite").unlink()
        recheck_s, _ = _timed(lambda: reattribute(con, lake))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    attribution_s = check_s + marts_s
    from app.bench_prometheus import run_prometheus_bench

    echo("bench: Prometheus JSON → Parquet vs prometheus-api-client's MetricRangeDataFrame")
    prometheus = run_prometheus_bench(workdir=workdir)
    return {
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "gpus": sim.gpus,
        "days": days,
        "samples": sim.samples,
        "jobs": sim.jobs,
        "simulate_s": sim_s,
        "simulate_samples_per_s": sim.samples / sim_s,
        "floor_scan_s": floor_s,
        "attribution_s": attribution_s,
        "attribution_samples_per_s": sim.samples / attribution_s,
        "attribution_vs_floor": attribution_s / floor_s,
        "forced_owner_recheck_s": recheck_s,
        "simulate_plus_attribute_s": sim_s + attribution_s,
        "mart_rows": counts,
        "prometheus": prometheus,
    }


def render_bench(r: dict[str, Any]) -> str:
    """The results as a small table."""
    rows = [
        ("simulate", r["simulate_s"], f"{r['simulate_samples_per_s']:,.0f} samples/s"),
        ("plain scan floor (DuckDB)", r["floor_scan_s"], "baseline"),
        (
            "attribute (all marts)",
            r["attribution_s"],
            f"{r['attribution_samples_per_s']:,.0f} samples/s, "
            f"{r['attribution_vs_floor']:.1f}× the floor",
        ),
        ("re-check all sample owners", r["forced_owner_recheck_s"], "after late job_gpus"),
        ("simulate + attribute", r["simulate_plus_attribute_s"], ""),
    ]
    head = (
        f"gpuledger bench: {r['gpus']} GPUs × {r['days']} days = {r['samples']:,} samples, "
        f"{r['jobs']:,} jobs ({r['machine']['cpus']} CPUs, {r['machine']['platform']})"
    )
    prom = r.get("prometheus") or {}
    if "ours_s" in prom:
        rows.append(
            (
                "Prometheus JSON → Parquet",
                prom["ours_s"],
                f"{prom['ours_samples_per_s']:,} samples/s ({prom['samples']:,} samples)",
            )
        )
    if "client_dataframe_s" in prom:
        rows.append(
            (
                "  prometheus-api-client DataFrame",
                prom["client_dataframe_s"],
                f"baseline; ours is {prom['speedup']}× faster",
            )
        )
    width = max(len(name) for name, _, _ in rows)
    body = [f"  {name:<{width}}  {secs:8.2f} s   {note}" for name, secs, note in rows]
    return "\n".join([head, *body])
