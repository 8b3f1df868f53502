"""Run the simulator: draw the fleet, people, jobs and faults, schedule, and land every table."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from collector.errors import ConfigError
from collector.sim.fleet import Account, Fleet, User, make_fleet, make_population
from collector.sim.health import Health, make_health
from collector.sim.noise import add_job_noise, add_telemetry_noise
from collector.sim.telemetry import (
    Allocations,
    EnergyState,
    XidTimeline,
    make_allocations,
    make_samples,
)
from collector.sim.throughput import throughput_table
from collector.sim.workload import DAY_S, Job, make_jobs, schedule
from collector.sources.slurm.assoc import AssociationRow, associations_table
from warehouse import layout
from warehouse.arrow_arrays import TIMESTAMP
from warehouse.lake import Lake
from warehouse.writer import foreign_file, write_batch

__all__ = [
    "SimConfig",
    "SimResult",
    "World",
    "build_world",
    "initial_energy",
    "simulate",
    "simulate_records",
]

DEFAULT_START = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)  # a Monday
GPUS_PER_CHUNK = 512
_APP_XIDS = (13, 31, 43)  # application-class XIDs (graphics exception, page fault, GPU stopped)
_EXIT = {
    "COMPLETED": "0:0",
    "FAILED": "1:0",
    "CANCELLED": "0:15",
    "TIMEOUT": "0:0",
    "NODE_FAIL": "0:0",
}
_NAMES = {
    "pretrain": ("llama-70b-pt", "moe-8x7b-pt", "gpt-13b-pretrain"),
    "finetune": ("ft-lora", "sft-7b", "ft-vit-large", "dpo-13b"),
    "input_bound": ("train-resnet", "train-asr", "imagenet-dali"),
    "inference": ("vllm-serve", "triton-infer", "embed-svc"),
    "notebook": ("jupyter", "sys/dashboard", "interactive"),
    "idle": ("train", "run.sh", "job"),
    "partial": ("ddp-train", "train-multi", "accelerate-run"),
    "hung": ("train-ddp", "fsdp-train", "megatron-run"),
    "memory_hold": ("jupyter", "serve", "cache-warm"),
    "overallocated": ("eval-small", "bert-base-ft", "test-infer"),
    "debug": ("test", "debug", "smoke"),
}


@dataclass(frozen=True, slots=True)
class SimConfig:
    """What to simulate. `gpus` is rounded up to whole 8-GPU nodes."""

    cluster: str = "sim"
    gpus: int = 256
    days: int = 7
    seed: int = 42
    interval_s: int = 30
    start: dt.datetime = DEFAULT_START
    load: float = 0.85
    hard: bool = False  # noisier telemetry, subtler failures (collector/sim/health.py)
    failure_rate: float = 1.0  # failing GPUs per 100 GPUs per week

    def validate(self) -> None:
        if not self.cluster.strip():
            raise ConfigError("cluster name is empty; expected e.g. --cluster sim")
        if self.gpus < 1:
            raise ConfigError(f"gpus must be at least 1, got {self.gpus!r}")
        if self.days < 1:
            raise ConfigError(f"days must be at least 1, got {self.days!r}")
        if not 1 <= self.interval_s <= 3600 or 86400 % self.interval_s:
            raise ConfigError(
                f"interval_s must divide a day and be 1-3600 s, got {self.interval_s!r}"
            )
        if not 0 <= self.failure_rate <= 100:
            raise ConfigError(
                f"failure_rate must be 0-100 per 100 GPU-weeks, got {self.failure_rate!r}"
            )
        if self.start.tzinfo is None:
            raise ConfigError("start must be timezone-aware (UTC)")


@dataclass(frozen=True, slots=True)
class SimResult:
    gpus: int
    jobs: int
    samples: int
    files: int


def _ts(t0_ms: int, seconds: list[float | None]) -> pa.Array:
    ms = [None if s is None else t0_ms + round(s * 1000) for s in seconds]
    return pa.array(ms, pa.int64()).cast(TIMESTAMP)


def _jobs_table(
    cfg: SimConfig, jobs: list[Job], fleet: Fleet, t0_ms: int, rng: np.random.Generator
) -> pa.Table:
    horizon = cfg.days * DAY_S
    rows: dict[str, list[object]] = {
        k: []
        for k in (
            "job_id",
            "user",
            "account",
            "partition",
            "job_name",
            "state",
            "exit_code",
            "submit",
            "start",
            "end",
            "time_limit_s",
            "gpus",
            "nodes",
            "cpus",
            "mem_req_mib",
            "cpu_time_s",
            "max_rss_mib",
            "interactive",
            "gpu_type",
        )
    }
    for job in jobs:
        running = job.start_s is not None and job.end_s is not None and job.end_s > horizon
        if job.start_s is None:
            state, end = "PENDING", None
        elif running:
            state, end = "RUNNING", None
        else:
            state, end = job.state, job.end_s
        if state == "CANCELLED":
            state = f"CANCELLED by {job.user.uid}"
        cpus = fleet.gpus_per_node * 12 if job.stranding else job.gpus * 12
        ran = 0.0 if job.start_s is None else min(job.end_s or horizon, horizon) - job.start_s
        names = _NAMES[job.archetype.name]
        rows["job_id"].append(str(job.job_id))
        rows["user"].append(job.user.name)
        rows["account"].append(job.user.account)
        rows["partition"].append(job.archetype.partition)
        rows["job_name"].append(names[job.job_id % len(names)])
        rows["state"].append(state)
        rows["exit_code"].append(_EXIT.get(job.state) if end is not None else None)
        rows["submit"].append(job.submit_s)
        rows["start"].append(job.start_s)
        rows["end"].append(end)
        rows["time_limit_s"].append(int(job.time_limit_s))
        rows["gpus"].append(job.gpus)
        rows["nodes"].append(sorted({fleet.nodes[int(fleet.node_of[g])] for g in job.placement}))
        # the allocated GRES type; a job that never started has none (an untyped request)
        rows["gpu_type"].append(fleet.gpu_type(job.placement[0]) if job.placement else None)
        rows["cpus"].append(cpus)
        rows["mem_req_mib"].append(cpus * 10_240)
        rows["cpu_time_s"].append(ran * cpus * float(rng.uniform(0.2, 0.9)))
        # (drawn for every job, so the same seed lands the same rows; a job that never
        # started used no memory: sacct has no MaxRSS for it)
        rss = float(rng.uniform(0.1, 0.8)) * cpus * 10_240
        rows["max_rss_mib"].append(rss if job.placement else None)
        rows["interactive"].append(job.archetype.partition == "interactive")
    n = len(jobs)
    return pa.table(
        {
            "cluster": pa.repeat(pa.scalar(cfg.cluster), n),
            "job_id": pa.array(rows["job_id"], pa.string()),
            "job_id_raw": pa.array(rows["job_id"], pa.string()),
            "user": pa.array(rows["user"], pa.string()),
            "account": pa.array(rows["account"], pa.string()),
            "partition": pa.array(rows["partition"], pa.string()),
            "qos": pa.repeat(pa.scalar("normal"), n),
            "job_name": pa.array(rows["job_name"], pa.string()),
            "state": pa.array(rows["state"], pa.string()),
            "exit_code": pa.array(rows["exit_code"], pa.string()),
            "submit_ts": _ts(t0_ms, rows["submit"]),  # type: ignore[arg-type]
            "start_ts": _ts(t0_ms, rows["start"]),  # type: ignore[arg-type]
            "end_ts": _ts(t0_ms, rows["end"]),  # type: ignore[arg-type]
            "time_limit_s": pa.array(rows["time_limit_s"], pa.int64()),
            "gpus": pa.array(rows["gpus"], pa.int32()),
            "gpus_requested": pa.array(rows["gpus"], pa.int32()),
            "gpu_type": pa.array(rows["gpu_type"], pa.string()),
            "nodes": pa.array(rows["nodes"], pa.list_(pa.string())),
            "cpus": pa.array(rows["cpus"], pa.int32()),
            "mem_req_mib": pa.array(rows["mem_req_mib"], pa.int64()),
            "cpu_time_s": pa.array(rows["cpu_time_s"], pa.float64()),
            "max_rss_mib": pa.array(rows["max_rss_mib"], pa.float64()),
            "interactive": pa.array(rows["interactive"], pa.bool_()),
            "requeues": pa.array([0] * n, pa.int32()),
            "source": pa.repeat(pa.scalar("sim"), n),
            "updated_ts": _ts(t0_ms, [horizon] * n),
        }
    )


def _job_gpus_table(cfg: SimConfig, jobs: list[Job], fleet: Fleet, t0_ms: int) -> pa.Table:
    horizon = cfg.days * DAY_S
    rows = [
        (str(j.job_id), g, j.start_s, None if j.end_s > horizon else j.end_s)
        for j in jobs
        if j.start_s is not None and j.end_s is not None
        for g in j.placement
    ]
    gpu = np.array([r[1] for r in rows], dtype=np.int64)
    n = len(rows)
    return pa.table(
        {
            "cluster": pa.repeat(pa.scalar(cfg.cluster), n),
            "job_id": pa.array([r[0] for r in rows], pa.string()),
            "node": pa.array([fleet.nodes[i] for i in fleet.node_of[gpu]], pa.string()),
            "gpu_index": pa.array(fleet.index_of[gpu], pa.int16()),
            "gpu_uuid": pa.array([fleet.uuids[g] for g in gpu], pa.string()),
            "start_ts": _ts(t0_ms, [r[2] for r in rows]),
            "end_ts": _ts(t0_ms, [r[3] for r in rows]),
            "mapping": pa.repeat(pa.scalar("sim"), n),
        }
    )


def _app_xids(
    jobs: list[Job], rng: np.random.Generator, horizon: float
) -> list[tuple[int, float, int]]:
    """Some failed jobs die with an application XID on one of their GPUs: those that end
    inside the simulated span (an XID after it moved the data's end past the last sample, and
    jobs still running there ran past their limits). The draws are made for every failed job
    as before, so a seed's other events stay as they were."""
    out = []
    for job in jobs:
        if (
            job.state == "FAILED"
            and job.end_s is not None
            and job.placement
            and rng.random() < 0.08
        ):
            xid = int(rng.choice(_APP_XIDS))
            if job.end_s <= horizon:
                out.append((job.placement[0], job.end_s - 1.0, xid))
    return out


def _events_table(
    cfg: SimConfig, fleet: Fleet, health: Health, app_xids: list[tuple[int, float, int]], t0_ms: int
) -> pa.Table:
    rows: list[tuple[int, float, str, int | None, str]] = []
    for f in health.failures:
        rows.append((f.gpu, f.fail_s, "xid", f.xid, f"XID {f.xid}"))
        if f.xid == 48:
            rows.append((f.gpu, f.fail_s, "ecc_dbe", 1, "double-bit ECC error"))
        if f.remap_failure:
            rows.append((f.gpu, f.fail_s, "row_remap_failure", None, "row remapping failed"))
        rows.append((f.gpu, f.fail_s, "offline", None, "node drained for repair"))
    per = fleet.gpus_per_node
    for span in health.thermal:
        for i in range(per):
            rows.append((span.node * per + i, span.start_s, "thermal", 0x40, "HW thermal slowdown"))
    rows.extend((g, t, "xid", code, f"XID {code}") for g, t, code in app_xids)
    rows.extend((g, t, "xid", code, f"XID {code}") for g, t, code in health.precursor_xids)
    rows.sort(key=lambda r: (r[1], r[0]))
    gpu = np.array([r[0] for r in rows], dtype=np.int64)
    return pa.table(
        {
            "cluster": pa.repeat(pa.scalar(cfg.cluster), len(rows)),
            "node": pa.array([fleet.nodes[i] for i in fleet.node_of[gpu]], pa.string()),
            "gpu_uuid": pa.array([fleet.uuids[g] for g in gpu], pa.string()),
            "gpu_index": pa.array(fleet.index_of[gpu], pa.int16()),
            "ts": _ts(t0_ms, [r[1] for r in rows]),
            "kind": pa.array([r[2] for r in rows], pa.string()),
            "code": pa.array([r[3] for r in rows], pa.int64()),
            "detail": pa.array([r[4] for r in rows], pa.string()),
        }
    )


def _xid_timeline(health: Health, app_xids: list[tuple[int, float, int]]) -> XidTimeline:
    events = [(g, t, c) for g, t, c in app_xids] + list(health.precursor_xids)
    for f in health.failures:
        events.append((f.gpu, f.fail_s, f.xid))
        events.append((f.gpu, f.repair_s, 0))  # the driver reload clears the gauge
    events.sort()
    key = np.array([(g << 42) | round(t * 1000) for g, t, _ in events], dtype=np.int64)
    return XidTimeline(key=key, code=np.array([c for _, _, c in events], dtype=np.int32))


def _gpus_table(cfg: SimConfig, fleet: Fleet, t0_ms: int) -> pa.Table:
    n = fleet.n_gpus
    models = [fleet.model(g) for g in range(n)]
    return pa.table(
        {
            "cluster": pa.repeat(pa.scalar(cfg.cluster), n),
            "node": pa.array([fleet.nodes[i] for i in fleet.node_of], pa.string()),
            "gpu_index": pa.array(fleet.index_of, pa.int16()),
            "gpu_uuid": pa.array(list(fleet.uuids), pa.string()),
            "model": pa.array([m.name for m in models], pa.string()),
            "fb_total_mib": pa.array([m.fb_total_mib for m in models], pa.float32()),
            "power_limit_w": pa.array([m.power_limit_w for m in models], pa.float32()),
            "first_seen": _ts(t0_ms, [0.0] * n),
            "last_seen": _ts(t0_ms, [cfg.days * DAY_S] * n),
        }
    )


def _truth_table(
    cfg: SimConfig, jobs: list[Job], fleet: Fleet, health: Health, t0_ms: int
) -> pa.Table:
    horizon = cfg.days * DAY_S
    rows: list[tuple[str, str, str, float, float | None]] = []
    for j in jobs:
        if j.start_s is None or j.end_s is None:
            continue
        end = min(j.end_s, horizon)
        jid = str(j.job_id)
        rows.append(("job", jid, f"workload:{j.archetype.name}", j.start_s, end))
        rows.extend(("job", jid, label, j.start_s, end) for label in j.archetype.labels)
        if j.hang_s is not None and j.start_s + j.hang_s < end:
            rows.append(("job", jid, "hung", j.start_s + j.hang_s, end))
        if j.straggler >= 0:
            rows.append(("job", jid, "straggler", j.start_s, end))
        if j.stranding:
            rows.append(("job", jid, "stranded_gpus", j.start_s, end))
        ran = j.end_s - j.start_s
        if j.state == "COMPLETED" and j.end_s <= horizon and j.time_limit_s >= 5 * ran:
            rows.append(("job", jid, "time_limit_excess", j.start_s, end))
    for f in health.failures:
        rows.append(("gpu", fleet.uuids[f.gpu], "failing_gpu", f.degrade_s, f.fail_s))
        node = fleet.nodes[int(fleet.node_of[f.gpu])]
        rows.append(("node", node, "drained", f.fail_s, min(f.repair_s, horizon)))
    for span in health.thermal:
        rows.append(("node", fleet.nodes[span.node], "thermal", span.start_s, span.end_s))
    for gap in health.gaps:
        rows.append(("node", fleet.nodes[gap.node], "telemetry_gap", gap.start_s, gap.end_s))
    for n in sorted(health.no_profiling):
        rows.append(("node", fleet.nodes[n], "no_profiling", 0.0, horizon))
    users = {j.user.name: j.user for j in jobs}
    rows.extend(
        ("user", u.name, "wasteful_user", 0.0, horizon) for u in users.values() if u.wasteful
    )
    return pa.table(
        {
            "cluster": pa.repeat(pa.scalar(cfg.cluster), len(rows)),
            "subject_kind": pa.array([r[0] for r in rows], pa.string()),
            "subject_id": pa.array([r[1] for r in rows], pa.string()),
            "label": pa.array([r[2] for r in rows], pa.string()),
            "start_ts": _ts(t0_ms, [r[3] for r in rows]),
            "end_ts": _ts(t0_ms, [r[4] for r in rows]),
        }
    )


def _associations_table(
    cfg: SimConfig, accounts: list[Account], users: list[User], t0_ms: int
) -> pa.Table:
    """The accounts' fair-share entitlements as Slurm's association tree, landed like
    `collect slurm-shares` lands sacctmgr's: root, each account under root with its RawShares,
    each user under its account with FairShare=1 (Slurm's default). Stamped at the end of the
    simulated window, so the same config lands the same snapshot."""
    rows = [AssociationRow(cfg.cluster, "root", None, None, 1)]
    rows += [AssociationRow(cfg.cluster, a.name, None, "root", a.raw_shares) for a in accounts]
    rows += [AssociationRow(cfg.cluster, u.account, u.name, None, 1) for u in users]
    stamp = dt.datetime.fromtimestamp((t0_ms + cfg.days * DAY_S * 1000) / 1000, tz=dt.UTC)
    return associations_table(rows, stamp, source="sim")


@dataclass(frozen=True, slots=True)
class World:
    """Everything drawn before telemetry: the fleet, its jobs (scheduled) and its faults."""

    fleet: Fleet
    jobs: list[Job]
    health: Health
    app_xids: list[tuple[int, float, int]]
    allocs: Allocations
    xids: XidTimeline
    accounts: list[Account]
    users: list[User]


def build_world(cfg: SimConfig, rng: np.random.Generator) -> World:
    """Draw `cfg`'s fleet, people, jobs and faults and schedule the jobs (deterministic).

    `rng` draws the fleet; everything else has its own stream from `cfg.seed`.
    """
    cfg.validate()
    fleet = make_fleet(cfg.cluster, cfg.gpus, rng)
    accounts, users = make_population(np.random.default_rng([cfg.seed, 2]))
    health = make_health(
        np.random.default_rng([cfg.seed, 3]),
        fleet,
        cfg.days,
        failure_rate=cfg.failure_rate,
        hard=cfg.hard,
        hard_rng=np.random.default_rng([cfg.seed, 7]),
    )
    jobs = make_jobs(
        np.random.default_rng([cfg.seed, 4]),
        fleet,
        users,
        {a.name for a in accounts if a.pretrain},
        cfg.days,
        cfg.load,
    )
    schedule(jobs, fleet, health.outages(fleet), cfg.days * DAY_S)
    if cfg.hard:  # behaviour within runs and telemetry noise; the schedule stays the default's
        noise_rng = np.random.default_rng([cfg.seed, 8])
        add_job_noise(jobs, noise_rng)
        health = add_telemetry_noise(health, fleet, cfg.days, noise_rng)
    app_xids = _app_xids(jobs, np.random.default_rng([cfg.seed, 5]), cfg.days * DAY_S)
    return World(
        fleet=fleet,
        jobs=jobs,
        health=health,
        app_xids=app_xids,
        allocs=make_allocations(jobs),
        xids=_xid_timeline(health, app_xids),
        accounts=accounts,
        users=users,
    )


def initial_energy(cfg: SimConfig, n_gpus: int) -> EnergyState:
    """Each GPU's energy counter (J) at the start of the simulation."""
    e_rng = np.random.default_rng([cfg.seed, 6])
    return EnergyState(joules=e_rng.uniform(1e8, 5e9, size=n_gpus))


# The options each cluster of a lake was simulated with (cluster -> SimConfig as JSON values).
SIMULATED_FILE = "simulated.json"


def _options(cfg: SimConfig) -> dict[str, object]:
    return {
        field: str(getattr(cfg, field)) if field == "start" else getattr(cfg, field)
        for field in SimConfig.__slots__
    }


def _simulated(lake: Lake) -> dict[str, dict[str, object]]:
    path = lake.root / "_state" / SIMULATED_FILE
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a record this version can read ({exc})") from None
    return found if isinstance(found, dict) else {}


def _refuse_other_options(cfg: SimConfig, lake: Lake) -> None:
    """ConfigError where `lake` holds `cfg.cluster` simulated with other options: the days,
    GPUs and jobs of both would mix (a third day of 3 beside a run of 2, jobs without their
    records) and every figure over them would be wrong."""
    before = _simulated(lake).get(cfg.cluster)
    if before is None or before == _options(cfg):
        return
    changed = [
        f"--{key.replace('_s', '')} {before.get(key)} → {value}"
        for key, value in _options(cfg).items()
        if before.get(key) != value and key not in ("load", "hard", "failure_rate")
    ] or ["other settings"]
    raise ConfigError(
        f"the lake {str(lake.root)!r} holds cluster {cfg.cluster!r} simulated with other "
        f"options ({', '.join(changed)}); simulating into it would mix both: use another "
        "--lake, or another --cluster"
    )


def _refuse_other_sources(cfg: SimConfig, lake: Lake) -> None:
    """ConfigError where `lake` holds rows of `cfg.cluster` that the simulator did not land (an
    imported trace, a collector's): the simulated jobs and samples would mix with them and
    count in their figures, with nothing to tell them apart."""
    for table in ("jobs", "job_gpus", "gpu_samples"):
        other = foreign_file(lake.root, table, cfg.cluster, f"sim-{cfg.cluster}")
        if other is not None:
            raise ConfigError(
                f"cluster {cfg.cluster!r} already holds {table} that were not simulated "
                f"({str(other)!r}): simulate under a cluster name of its own (e.g. --cluster "
                "sim), or into another --lake"
            )


def _record_options(cfg: SimConfig, lake: Lake) -> None:
    recorded = _simulated(lake)
    recorded[cfg.cluster] = _options(cfg)
    path = lake.state_dir() / SIMULATED_FILE
    fd, tmp = layout.create_temp(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(recorded, out, indent=1, sort_keys=True)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # renamed into place already, unless the write failed


def simulate(
    cfg: SimConfig,
    lake: Lake,
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Simulate `cfg` and land it in `lake`; the same config lands the same rows. ConfigError
    where the lake holds `cfg.cluster` simulated with other options, or rows of `cfg.cluster`
    from another source (they would mix).

    `progress(done, total)` is called after each day-slice of telemetry is landed.
    """
    cfg.validate()
    _refuse_other_sources(cfg, lake)
    # checked and recorded in one turn: two runs at once both passed the check (a lake of
    # both runs' days), or one's record of its cluster was lost
    with layout.table_lock(lake.root, SIMULATED_FILE):
        _refuse_other_options(cfg, lake)
        _record_options(cfg, lake)  # before the first row: a run stopped part way is refused too
    rng = np.random.default_rng([cfg.seed, 1])
    t0_ms = int(cfg.start.timestamp() * 1000)
    horizon = cfg.days * DAY_S
    world = build_world(cfg, rng)
    fleet, jobs, health, app_xids = world.fleet, world.jobs, world.health, world.app_xids

    batch = f"sim-{cfg.cluster}"
    files = 0
    files += len(write_batch(lake.root, "gpus", _gpus_table(cfg, fleet, t0_ms), batch))
    files += len(write_batch(lake.root, "jobs", _jobs_table(cfg, jobs, fleet, t0_ms, rng), batch))
    files += len(
        write_batch(lake.root, "job_gpus", _job_gpus_table(cfg, jobs, fleet, t0_ms), batch)
    )
    files += len(
        write_batch(
            lake.root, "gpu_events", _events_table(cfg, fleet, health, app_xids, t0_ms), batch
        )
    )
    files += len(
        write_batch(
            lake.root,
            "associations",
            _associations_table(cfg, world.accounts, world.users, t0_ms),
            batch,
        )
    )
    files += len(
        write_batch(lake.root, "sim_truth", _truth_table(cfg, jobs, fleet, health, t0_ms), batch)
    )
    reported = throughput_table(
        cfg.cluster, jobs, fleet, t0_ms, horizon, np.random.default_rng([cfg.seed, 8])
    )
    files += len(write_batch(lake.root, "app_throughput", reported, batch))

    energy = initial_energy(cfg, fleet.n_gpus)
    chunks = [
        np.arange(s, min(s + GPUS_PER_CHUNK, fleet.n_gpus))
        for s in range(0, fleet.n_gpus, GPUS_PER_CHUNK)
    ]
    total = cfg.days * len(chunks)
    samples = 0
    for day in range(cfg.days):
        for c, gpus in enumerate(chunks):
            table = make_samples(
                fleet=fleet,
                jobs=jobs,
                allocs=world.allocs,
                health=health,
                xids=world.xids,
                energy=energy,
                gpus=gpus,
                day=day,
                t0_ms=t0_ms,
                interval_s=cfg.interval_s,
                horizon_s=horizon,
                rng=np.random.default_rng([cfg.seed, 100, day, c]),
            )
            samples += table.num_rows
            landed = write_batch(lake.root, "gpu_samples", table, f"{batch}-d{day:03d}-g{c:03d}")
            files += len(landed)
            if progress:
                progress(day * len(chunks) + c + 1, total)
    return SimResult(gpus=fleet.n_gpus, jobs=len(jobs), samples=samples, files=files)


def simulate_records(cfg: SimConfig, lake: Lake) -> SimResult:
    """Land `cfg`'s fleet, jobs, allocations and associations without telemetry: what a
    scheduler replay reads (`gpuledger bench`'s replay scenario), at any size, in seconds."""
    cfg.validate()
    _refuse_other_sources(cfg, lake)
    rng = np.random.default_rng([cfg.seed, 1])  # as `simulate` draws: the same records
    world = build_world(cfg, rng)
    t0_ms = int(cfg.start.timestamp() * 1000)
    batch = f"sim-{cfg.cluster}"
    tables = {
        "gpus": _gpus_table(cfg, world.fleet, t0_ms),
        "jobs": _jobs_table(cfg, world.jobs, world.fleet, t0_ms, rng),
        "job_gpus": _job_gpus_table(cfg, world.jobs, world.fleet, t0_ms),
        "associations": _associations_table(cfg, world.accounts, world.users, t0_ms),
    }
    files = sum(len(write_batch(lake.root, name, table, batch)) for name, table in tables.items())
    return SimResult(gpus=world.fleet.n_gpus, jobs=len(world.jobs), samples=0, files=files)
