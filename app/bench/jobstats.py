"""The `jobstats` scenario of `gpuledger bench`: gpuledger against jobstats-style PromQL.

One real Prometheus (the `prometheus` and `promtool` binaries) holds simulated dcgm-exporter
history: `gpus` GPUs × `days` at 15 s, every family of the 4.8 exporter, with the `hpc_job`
label, loaded with `promtool tsdb create-blocks-from openmetrics`. In this one process:

- the baseline, as Princeton's jobstats reads a finished job: three instant PromQL queries
  at the job's end over its run (`avg_over_time` of GPU utilisation, `max_over_time` of
  framebuffer used, `avg_over_time` of power), per job, over HTTP with a kept-alive session;
- gpuledger end to end: `collect prometheus` as configured by default (the families of the
  columns gpuledger reads, by remote read), attribution (the per-day pass and the summary
  marts) and one read of job_usage for all jobs; the jobs' records (start, end, GPUs: what
  Slurm would give both) are landed first;
- the collect as it was before (the JSON API, every family with a column), into a lake of its
  own, timed after the first; for both the CPU time of this process and of Prometheus;
- `gpuledger job JOBID` for a few jobs: in this process (the lake's views for the job, the
  report, its text) and as a user types it (a new process), against the baseline's three
  queries for the same job.

The figures are compared too: each job's mean GPU utilisation from both sides.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from app.bench.job_timing import report_in_process, report_process
from app.errors import AppError
from warehouse.lake import Lake

__all__ = ["JOBSTATS_QUERIES", "run_jobstats_bench"]

INTERVAL_S: Final = 15
CLUSTER: Final = "bench"
START: Final = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
# jobstats' three GPU queries: utilisation, memory, power over the job's run, at its end
JOBSTATS_QUERIES: Final = (
    "avg_over_time(DCGM_FI_DEV_GPU_UTIL{{hpc_job={job}}}[{seconds}s])",
    "max_over_time(DCGM_FI_DEV_FB_USED{{hpc_job={job}}}[{seconds}s])",
    "avg_over_time(DCGM_FI_DEV_POWER_USAGE{{hpc_job={job}}}[{seconds}s])",
)
_REPORTS: Final = 5  # jobs whose `gpuledger job` is timed (the largest first)
Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class _Job:
    job_id: str
    start: dt.datetime
    end: dt.datetime
    gpus: int


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise AppError(
            f"the jobstats scenario needs `{name}` (Prometheus 2.x) on PATH: "
            "apt-get install prometheus (it ships promtool)"
        )
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _history(gpus: int, days: int, folder: Path) -> tuple[pa.Table, Path]:
    """Simulated samples and the Prometheus blocks promtool made of them."""
    from collector.sim.exporters import FleetConfig, history
    from collector.sim.exposition import render_openmetrics

    samples = history(
        FleetConfig(cluster=CLUSTER, gpus=gpus, seed=7),
        start=START,
        days=days,
        interval_s=INTERVAL_S,
    )
    text = folder / "history.om"
    with open(text, "w", encoding="utf-8") as out:
        for chunk in render_openmetrics(
            samples, version="4.8", extra_labels=(("cluster", CLUSTER), ("job", "dcgm"))
        ):
            out.write(chunk)
    blocks = folder / "data"
    done = subprocess.run(
        [
            _binary("promtool"),
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--max-block-duration=72h",
            str(text),
            str(blocks),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    text.unlink()
    if done.returncode != 0:
        raise AppError(f"promtool could not load the history: {done.stderr.strip()[-500:]}")
    return samples, blocks


class _Prometheus:
    """A Prometheus over `data` on a free port of 127.0.0.1, stopped on exit."""

    def __init__(self, folder: Path, data: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = folder / "prometheus.yml"
        config.write_text(json.dumps({"global": {"scrape_interval": "15s"}}), encoding="utf-8")
        with open(folder / "prometheus.log", "ab") as log:
            self.proc = subprocess.Popen(
                [
                    _binary("prometheus"),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={data}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=100y",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def __enter__(self) -> _Prometheus:
        import requests

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if requests.get(f"{self.url}/-/ready", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.__exit__()
        raise AppError("the bench's Prometheus did not become ready (see prometheus.log)")

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _jobs(samples: pa.Table) -> list[_Job]:
    """Each job's run as its scheduler would record it: first to last sample, its GPUs."""
    held = samples.filter(pc.is_valid(samples.column("hpc_job")))
    spans = held.group_by("hpc_job").aggregate(
        [("ts", "min"), ("ts", "max"), ("gpu_uuid", "count_distinct")]
    )
    return sorted(
        (
            _Job(row["hpc_job"], row["ts_min"], row["ts_max"], row["gpu_uuid_count_distinct"])
            for row in spans.to_pylist()
        ),
        key=lambda j: (-j.gpus, j.job_id),
    )


def _land_jobs(lake: Path, jobs: list[_Job]) -> None:
    from warehouse.schema import TABLES
    from warehouse.writer import write_batch

    rows = [
        {
            "cluster": CLUSTER,
            "job_id": j.job_id,
            "state": "COMPLETED",
            "submit_ts": j.start,
            "start_ts": j.start,
            "end_ts": j.end + dt.timedelta(seconds=INTERVAL_S),
            "gpus": j.gpus,
            "source": "bench",
            "updated_ts": j.end + dt.timedelta(seconds=INTERVAL_S),
        }
        for j in jobs
    ]
    write_batch(lake, "jobs", pa.Table.from_pylist(rows, schema=TABLES["jobs"].schema), "bench")


def _jobstats(session: Any, url: str, job: _Job) -> dict[str, float | None]:
    """The baseline for one job: three instant queries at its end; means over its GPUs."""
    end = job.end + dt.timedelta(seconds=INTERVAL_S)
    seconds = int((end - job.start).total_seconds())
    means: list[float | None] = []
    for template in JOBSTATS_QUERIES:
        query = template.format(job=json.dumps(job.job_id), seconds=seconds)
        reply = session.get(
            f"{url}/api/v1/query",
            params={"query": query, "time": f"{end.timestamp():.3f}"},
            timeout=60,
        )
        reply.raise_for_status()
        values = [float(r["value"][1]) for r in reply.json()["data"]["result"]]
        means.append(statistics.fmean(values) if values else None)
    util, fb, power = means
    return {"gpu_util_pct_mean": util, "fb_used_mib_max": fb, "power_w_mean": power}


def _held_samples(session: Any, url: str, days: int, families: list[str]) -> int:
    """How many raw samples of `families` Prometheus holds (one count per family: their
    series' labels are alike once the name is dropped)."""
    end = START + dt.timedelta(days=days)
    total = 0
    for family in sorted(families):
        reply = session.get(
            f"{url}/api/v1/query",
            params={
                "query": f"sum(count_over_time({family}[{days * 86_400}s]))",
                "time": f"{end.timestamp() - 0.001:.3f}",
            },
            timeout=120,
        )
        reply.raise_for_status()
        result = reply.json()["data"]["result"]
        total += int(float(result[0]["value"][1])) if result else 0
    return total


def _cpu_s(pid: int | None = None) -> float:
    """CPU seconds (user + system) of this process, every thread, or of process `pid`."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class _Collect:
    """One timed `collect prometheus`: wall and CPU seconds (ours, Prometheus'), its summary."""

    wall_s: float
    cpu_s: float
    prometheus_cpu_s: float
    summary: Any


def _collect(
    lake: Path, prom: _Prometheus, until: dt.timedelta = dt.timedelta(days=1), **options: Any
) -> _Collect:
    """`collect prometheus` of the history from START to START + `until` into `lake`."""
    from collector.sources.prometheus.pull import PullConfig, pull
    from collector.sources.prometheus.transport import ApiClientTransport

    cfg = PullConfig(cluster=CLUSTER, since=START, until=START + until, settle_s=0.0, **options)
    cpu, prom_cpu = _cpu_s(), _cpu_s(prom.proc.pid)
    with ApiClientTransport(prom.url) as transport:
        wall, summary = _timed(lambda: pull(cfg, Lake(lake), transport))
    return _Collect(wall, _cpu_s() - cpu, _cpu_s(prom.proc.pid) - prom_cpu, summary)


def _timed(func: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = func()
    return time.perf_counter() - t0, out


def _seconds(func: Callable[..., Any], *args: Any) -> float:
    t0 = time.perf_counter()
    func(*args)
    return time.perf_counter() - t0


def run_jobstats_bench(
    *, gpus: int, days: int, workdir: Path | None = None, echo: Echo = lambda _: None
) -> dict[str, Any]:
    """Run the scenario in a throw-away folder under `workdir`; return its figures."""
    import tempfile

    import requests

    from app.pipeline import default_pipeline_config
    from collector.sources.prometheus.columns import ALL_COLUMNS
    from warehouse.attribution import build_summary_marts
    from warehouse.connection import WarehouseConfig, connect
    from warehouse.partitions import build_sample_marts

    folder = Path(tempfile.mkdtemp(prefix="gpuledger-jobstats-", dir=workdir))
    try:
        echo(f"bench jobstats: {gpus} GPUs × {days} days at {INTERVAL_S} s into Prometheus")
        history_s, (samples, blocks) = _timed(lambda: _history(gpus, days, folder))
        jobs = _jobs(samples)
        with _Prometheus(folder, blocks) as prom:
            echo(f"bench jobstats: the baseline's 3 queries for each of {len(jobs)} jobs")
            with requests.Session() as session:
                peer_s, peer = _timed(
                    lambda: {j.job_id: _jobstats(session, prom.url, j) for j in jobs}
                )
            lake = folder / "lake"
            _land_jobs(lake, jobs)
            echo("bench jobstats: gpuledger collect prometheus")
            # both ways once over an hour first: imports and first calls are not timed
            for protocol in ("remote-read", "json"):
                _collect(folder / "warm-up", prom, dt.timedelta(hours=1), protocol=protocol)
                shutil.rmtree(folder / "warm-up")
            ours = _collect(lake, prom, dt.timedelta(days=days))
            echo("bench jobstats: collect prometheus as before (JSON API, every column)")
            before = _collect(
                folder / "lake-json",
                prom,
                dt.timedelta(days=days),
                protocol="json",
                columns=ALL_COLUMNS,
            )
            shutil.rmtree(folder / "lake-json")
            with requests.Session() as session:
                held = _held_samples(session, prom.url, days, ours.summary.families)
                held_before = _held_samples(session, prom.url, days, before.summary.families)
            collect_s, pulled = ours.wall_s, ours.summary
            echo("bench jobstats: attribution (per-day pass with owners, summary marts)")
            config = default_pipeline_config().attribution
            con = connect(lake, require=("gpu_samples",))
            attribute_s, _ = _timed(
                lambda: (
                    build_sample_marts(WarehouseConfig(lake), config.values(), force=True),
                    build_summary_marts(con, lake, config),
                )
            )
            con.close()
            read_s, usage = _timed(lambda: _job_usage(lake))
            echo(f"bench jobstats: gpuledger job for {_REPORTS} jobs, and the peer's queries")
            picked = jobs[:: max(len(jobs) // _REPORTS, 1)][:_REPORTS]
            with requests.Session() as session:
                peer_one = [_seconds(_jobstats, session, prom.url, j) for j in picked]
            in_process_s = [report_in_process(lake, j.job_id, CLUSTER) for j in picked]
            report_process_s = [report_process(lake, j.job_id) for j in picked]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ours_s = collect_s + attribute_s + read_s
    pairs = [(j, peer[j]["gpu_util_pct_mean"], usage.get(j)) for j in peer]
    compared = [(j, a, b) for j, a, b in pairs if a is not None and b is not None]
    agree = [abs(a - b) <= 1.0 for _, a, b in compared]
    apart = [{"job_id": j, "peer": a, "ours": b} for j, a, b in compared if abs(a - b) > 1.0]
    n = max(len(jobs), 1)
    return {
        "gpus": gpus,
        "days": days,
        "interval_s": INTERVAL_S,
        "jobs": len(jobs),
        "history_s": history_s,
        "families": len(pulled.families),
        "samples": held,
        "gpu_samples_rows": pulled.samples,
        "peer_s": peer_s,
        "peer_per_job_ms": peer_s / n * 1000,
        "collect_s": collect_s,
        "collect_samples_per_s": held / collect_s,
        "collect_cpu_s": ours.cpu_s,
        "collect_prometheus_cpu_s": ours.prometheus_cpu_s,
        "before": {  # the JSON API, every family with a column: `collect` before issue #24
            "families": len(before.summary.families),
            "samples": held_before,
            "gpu_samples_rows": before.summary.samples,
            "collect_s": before.wall_s,
            "collect_samples_per_s": held_before / before.wall_s,
            "collect_cpu_s": before.cpu_s,
            "collect_prometheus_cpu_s": before.prometheus_cpu_s,
        },
        "collect_speedup": (held / collect_s) / (held_before / before.wall_s),
        "attribute_s": attribute_s,
        "read_s": read_s,
        "ours_s": ours_s,
        "ours_per_job_ms": ours_s / n * 1000,
        "ours_vs_peer": ours_s / peer_s,
        "jobs_compared": len(agree),
        "jobs_within_1_point": sum(agree),
        "jobs_apart": apart,  # mean GPU utilisation (%) where the two differ by over a point
        "job_report": {
            "jobs": [j.job_id for j in picked],
            "gpus": [j.gpus for j in picked],
            "peer_ms": [s * 1000 for s in peer_one],
            "in_process_ms": [s * 1000 for s in in_process_s],
            "process_ms": [s * 1000 for s in report_process_s],
            "median_in_process_vs_peer": statistics.median(in_process_s)
            / statistics.median(peer_one),
        },
    }


def _job_usage(lake: Path) -> dict[str, float | None]:
    """Every job's mean GPU utilisation (%) from job_usage: gpuledger's one read for all jobs."""
    from warehouse import queries
    from warehouse.connection import connect

    con = connect(lake, require=("job_usage",))
    try:
        rows = queries.rows(con, "bench/job_util")
    finally:
        con.close()
    return {row["job_id"]: row["gpu_util_pct_mean"] for row in rows}
