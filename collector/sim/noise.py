"""What the hard setting adds to jobs and their telemetry, the noise real clusters have
(issue #27): idle and memory-holding jobs whose GPUs run a small kernel every ~20 minutes
(health checks, monitoring agents, a notebook's periodic poll), bursty inference services that
rest about 40 % of the time and are healthy, hung jobs that trained for hours before they hung,
idle ranks of partially idle jobs holding a few GB of framework memory, more nodes whose
exporter has no profiling fields (only GPU_UTIL), and exporter outages of tens of minutes.

Drawn from their own stream (`[seed, 8]`) after the schedule, so the hard setting keeps the
default's jobs, their times and its failures; only behaviour within a run changes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from collector.sim.fleet import Fleet
from collector.sim.health import Health, Span
from collector.sim.workload import DAY_S, HOUR_S, Job

__all__ = ["POLLED", "add_job_noise", "add_telemetry_noise"]

POLLED = ("idle", "memory_hold")  # archetypes whose idle GPUs a periodic small kernel wakes


def add_job_noise(jobs: list[Job], rng: np.random.Generator) -> None:
    """Give the jobs their hard-setting behaviour (in place; times and states are kept)."""
    for job in jobs:
        name = job.archetype.name
        if name in POLLED and rng.random() < 0.85:
            job.poll_period_s = float(rng.uniform(15, 25) * 60)
            job.poll_len_s = float(rng.uniform(30, 60))
            job.poll_phase_s = float(rng.uniform(0, job.poll_period_s))
        elif name == "inference":
            job.burst_period_s = float(rng.uniform(6, 30) * 60)
            job.rest_frac = float(rng.uniform(0.3, 0.5))
            job.poll_phase_s = float(rng.uniform(0, job.burst_period_s))
        elif name == "hung" and job.hang_s is not None:
            # trained for hours (most of its run) before the collective stalled
            job.hang_s = max(job.hang_s, float(job.runtime_s * rng.uniform(0.35, 0.75)))
        elif name == "partial":
            job.idle_fb_frac = float(rng.uniform(0.02, 0.06))  # 1.6-5 GB of 80 GB


def add_telemetry_noise(
    health: Health, fleet: Fleet, days: int, rng: np.random.Generator
) -> Health:
    """`health` with one node in eight exporting only GPU_UTIL (no profiling fields) and an
    exporter outage of 10-60 minutes per node every ~5 days."""
    n_nodes = len(fleet.nodes)
    extra = rng.choice(n_nodes, size=max(1, n_nodes // 8), replace=False)
    gaps = list(health.gaps)
    horizon = days * DAY_S
    for _ in range(max(1, round(n_nodes * days / 5))):
        start = float(rng.uniform(0, horizon - HOUR_S))
        gaps.append(
            Span(int(rng.integers(n_nodes)), start, start + float(rng.uniform(10, 60)) * 60)
        )
    return replace(
        health,
        no_profiling=health.no_profiling | frozenset(int(n) for n in extra),
        gaps=gaps,
    )
