"""The NVML node agent: sample this node's GPUs, find which job uses each, spool, land.

Each tick reads every GPU (one `gpu_samples` row per GPU, or per MIG instance where MIG is on,
device-level fields repeated on each instance as dcgm-exporter does), drains XID events without
waiting, maps every compute process's host PID to its Slurm job or Kubernetes pod through
`/proc/<pid>/cgroup` (collector.sources.nvml.cgroups), stamps each row with its job (a GPU whose
processes belong to several jobs at once — MPS, time-slicing — gets one row per job, see
`nvml.rows.owned_rows`) and keeps one `job_gpus` interval (mapping
`nvml-cgroup`) per contiguous run of a job on a GPU: `[first tick seen, last tick seen +
interval_s)`, rewritten under the same batch id each tick it grows, so it is never open-ended if
the agent dies. A run ends when a tick no longer sees the job there; ticks more than
2 × interval_s apart (an agent restart) start a new run. XIDs land as `gpu_events` kind `xid`;
a GPU that is lost (XID 79, NVML_ERROR_GPU_IS_LOST, or no longer listed) lands one `offline`
event and the agent carries on; new ECC DBE counts, row-remap failures and HW slowdown / thermal /
power-brake clock reasons land once per onset (the dcgm-exporter collector's EventLatch).

Everything is written to the spool first and then landed (collector.sources.spool), so an
unreachable lake only delays landing. Small state (open intervals, first-seen times, last XIDs)
lives in `<spool>/_state/` so that `--once` runs from cron extend the same intervals.
Seams: `nvml` (the pynvml module), `proc_root`, `clock` and the lake `write` function.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from collector.errors import CollectorError, ConfigError
from collector.sources.dcgm_exporter.rows import observed_conditions, to_ms
from collector.sources.dcgm_exporter.scrape import Clock, EventLatch, utc_now
from collector.sources.nvml.cgroups import Owner, resolve_owners
from collector.sources.nvml.device import (
    XID_GPU_FALLEN_OFF_BUS,
    DeviceLost,
    GpuReading,
    NvmlReader,
    NvmlUnavailable,
    PhysicalGpu,
    XidWatch,
    enumerate_gpus,
    load_nvml,
    read_gpu,
)
from collector.sources.nvml.pod_names import DEFAULT_POD_LOGS, PodNames
from collector.sources.nvml.rows import (
    CONDITION_KINDS,
    GPU_EVENTS,
    GPU_SAMPLES,
    MAPPING,
    Row,
    condition_rows,
    digest,
    interval_table,
    inventory_table,
    owned_rows,
    sample_rows,
    table,
)
from collector.sources.nvml.state import AgentState, Slot, advance_intervals
from collector.sources.spool import LandResult, Spool, Writer
from warehouse import state_files
from warehouse.lake import Lake
from warehouse.writer import write_batch

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "DEFAULT_INTERVAL_S",
    "MAPPING",
    "AgentConfig",
    "AgentSummary",
    "NvmlAgent",
    "ProcessSeen",
    "SpoolNotWritable",
    "TickResult",
    "run_agent",
]

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL_S: Final = 30.0
INVENTORY_REFRESH_S: Final = 600.0  # how stale `gpus.last_seen` may get
STATE_FILE: Final = "nvml_agent.json"
EVENT_STATE_FILE: Final = state_files.NVML_EVENTS.name


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Where the agent runs and writes. `interval_s` is both the tick period and row span."""

    cluster: str
    node: str
    spool: Path
    lake: Lake
    interval_s: float = DEFAULT_INTERVAL_S

    def validate(self) -> None:
        """Raise ConfigError on a value the agent cannot use (checked before NVML is touched)."""
        if not self.cluster.strip():
            raise ConfigError("cluster name is empty; expected e.g. --cluster della")
        if not self.node.strip():
            raise ConfigError("node name is empty; expected e.g. --node g001")
        if not self.interval_s > 0:
            raise ConfigError(f"interval {self.interval_s!r} s must be positive")


@dataclass(frozen=True, slots=True)
class ProcessSeen:
    """A compute process on a GPU (or MIG instance) and the job it maps to, or why none."""

    gpu_index: int
    gpu_uuid: str
    mig_instance: int | None
    pid: int
    owner: Owner | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class TickResult:
    """One tick: what was read, spooled and landed, and what was nulled or skipped (`counts`)."""

    ts: dt.datetime
    gpus: int
    samples: int
    events: int
    job_gpus: int
    jobs: tuple[str, ...]
    offline: tuple[str, ...]
    counts: dict[str, int]
    landed: LandResult
    processes: tuple[ProcessSeen, ...] = ()


@dataclass(slots=True)
class AgentSummary:
    """Totals over a `run_agent` run."""

    ticks: int = 0
    samples: int = 0
    events: int = 0
    job_gpus: int = 0
    landed_files: int = 0
    land_failures: int = 0
    last_land_error: str | None = None
    pending: int = 0
    counts: Counter[str] = field(default_factory=Counter)

    def add(self, tick: TickResult) -> None:
        self.ticks += 1
        self.samples += tick.samples
        self.events += tick.events
        self.job_gpus += tick.job_gpus
        self.landed_files += tick.landed.files
        self.counts.update(tick.counts)
        self.pending = tick.landed.pending
        if tick.landed.error is not None:
            self.land_failures += 1
            self.last_land_error = tick.landed.error


@dataclass(slots=True)
class _Observed:
    """What one tick read from NVML: the GPUs listed, their readings, the lost, the events."""

    gpus: list[PhysicalGpu]
    readings: list[GpuReading]
    lost: dict[str, str]  # UUID → why
    listed: bool
    events: list[Row]
    # GPUs seen before that NVML counted but did not name this time (an error reading the
    # handle or UUID): not offline, and their jobs' runs are not ended
    unread: set[str] = field(default_factory=set)


class NvmlAgent:
    """One node's agent; `open()`, then `tick()` every interval, then `close()` (or `with`)."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        nvml: Any = None,
        proc_root: Path = Path("/proc"),
        pod_logs: Path | None = DEFAULT_POD_LOGS,
        clock: Clock = utc_now,
        write: Writer = write_batch,
    ) -> None:
        config.validate()
        self.config = config
        self._nvml = nvml
        self._proc_root = proc_root
        self._pods = PodNames(pod_logs)
        self._arrays: dict[str, str] = {}  # raw Slurm job id → array task id, as seen
        self._clock = clock
        self._write = write
        self.spool = Spool(config.spool)
        self._owner = f"{config.cluster}\n{config.node}"
        self._span_ms = round(config.interval_s * 1000)
        self._reader: NvmlReader | None = None
        self._xids: XidWatch | None = None
        self._latch: EventLatch | None = None
        self._inventoried: dict[str, int] = {}  # UUID → ms of the last `gpus` row this run
        self.state = AgentState()

    def __enter__(self) -> NvmlAgent:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> int:
        """Initialise NVML and the spool; return the number of GPUs.

        Raises NvmlUnavailable (no bindings, no driver library, no GPU) with a message that
        says which.
        """
        nvml = self._nvml if self._nvml is not None else load_nvml()
        reader = NvmlReader(nvml)
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            name = reader.error_name(exc)
            hint = {
                "LIBRARY_NOT_FOUND": "the NVIDIA driver library libnvidia-ml.so.1 is not installed",
                "DRIVER_NOT_LOADED": "the NVIDIA kernel driver is not loaded",
                "NO_PERMISSION": "no permission to open the NVIDIA device files",
            }.get(name, f"nvmlInit failed: {name}")
            raise NvmlUnavailable(f"NVML is not usable on this node: {hint}") from exc
        gpus, lost, _ = enumerate_gpus(reader)
        if not gpus and not lost:
            self._shutdown(reader)
            raise NvmlUnavailable(
                f"no NVIDIA GPU found on {self.config.node!r} (NVML lists 0 devices)"
            )
        self._reader = reader
        self._xids = XidWatch(reader)
        self.spool.open_inbox()
        state_dir = self.spool.state_dir
        self.state = AgentState.load(state_dir / STATE_FILE, self._owner)
        self._latch = EventLatch(
            state_dir / EVENT_STATE_FILE, state_files.NVML_EVENTS, CONDITION_KINDS
        )
        if self._latch.land_staged(self.config.cluster, self._spool_again):
            self.state.save(state_dir / STATE_FILE, self._owner)
        return len(gpus) + len(lost)

    def _spool_again(self, events: pa.Table, batch_id: str) -> None:
        """Spool again the events of a tick killed after staging them, before its commit: under
        their own batch, which replaces what that tick spooled (or landed). Its conditions are
        then latched (EventLatch.land_staged) and its offline GPUs known offline, so the next
        tick lands neither again as a new onset."""
        self.spool.put("gpu_events", events, batch_id)
        kinds = events.column("kind").to_pylist()
        uuids = events.column("gpu_uuid").to_pylist()
        self.state.offline.update(u for u, k in zip(uuids, kinds, strict=True) if k == "offline")

    @staticmethod
    def _shutdown(reader: NvmlReader) -> None:
        try:
            reader.nvml.nvmlShutdown()
        except reader.nvml.NVMLError as exc:
            logger.info("nvmlShutdown: %s", reader.error_name(exc))

    def _reinitialise(self) -> None:
        """Start NVML afresh (after a driver reload); old event registrations are void."""
        assert self._reader is not None and self._xids is not None
        nvml = self._reader.nvml
        self._xids.close()
        self._shutdown(self._reader)
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            logger.warning("nvmlInit: %s", self._reader.error_name(exc))
        self._xids = XidWatch(self._reader)

    def close(self) -> None:
        """Free the event set, save state and shut NVML down."""
        if self._reader is None:
            return
        if self._xids is not None:
            self._xids.close()
        try:
            with _spool_writes(self.spool.root):
                self.state.save(self.spool.state_dir / STATE_FILE, self._owner)
        finally:
            self._shutdown(self._reader)
            self._reader = None

    def tick(self) -> TickResult:
        """Sample, attribute, spool and land once (see module doc)."""
        if self._reader is None or self._latch is None:
            raise RuntimeError("NvmlAgent.tick() before open()")
        reader, cfg = self._reader, self.config
        reader.counts = Counter()
        ts = self._clock()
        ts_ms = to_ms(ts)
        seen = self._observe(ts_ms)
        offline = self._offline_transitions(seen, ts_ms)

        watched = set(self._xids.registered.values()) if self._xids else set()
        xid_last: dict[str, int | None] = {
            r.gpu.uuid: self.state.xid_last.get(r.gpu.uuid, 0 if r.gpu.uuid in watched else None)
            for r in seen.readings
        }
        samples, slots_pids = sample_rows(
            seen.readings,
            cluster=cfg.cluster,
            node=cfg.node,
            interval_s=cfg.interval_s,
            ts_ms=ts_ms,
            xid_last=xid_last,
        )
        slot_jobs, processes = self._attribute(seen.readings, slots_pids)
        samples = owned_rows(samples, slot_jobs)
        # slots whose processes could not be listed keep their jobs' runs open: those of a GPU
        # NVML did not name this time or whose MIG instances it did not tell apart, and every
        # one while NVML is unavailable (a driver reload)
        unreadable = set(slots_pids) - set(slot_jobs)
        unknown = seen.unread | {r.gpu.uuid for r in seen.readings if r.unkeyed_instances}
        unreadable |= {
            (uuid, gi) for _, uuid, gi in self.state.intervals if not seen.listed or uuid in unknown
        }
        intervals = advance_intervals(
            self.state.intervals,
            slot_jobs,
            unreadable=unreadable,
            index={r.gpu.uuid: r.gpu.index for r in seen.readings},
            ts_ms=ts_ms,
            max_gap_ms=2 * self._span_ms,
        )

        sample_table = table(GPU_SAMPLES, samples)
        conditions = table(
            GPU_EVENTS,
            condition_rows(seen.readings, cluster=cfg.cluster, node=cfg.node, ts_ms=ts_ms),
        )
        new_conditions = self._latch.transitions(conditions).to_pylist()
        event_table = table(GPU_EVENTS, seen.events + new_conditions)
        batch_id = f"nvml-{ts_ms}-{digest(cfg.cluster, cfg.node, ts_ms)}"
        # staged before they spool, until the commit below: a tick killed in between has its
        # events spooled again at the next start (`_spool_again`), not its conditions and
        # offline GPUs landed twice as new onsets
        with _spool_writes(self.spool.root):
            self._latch.stage(batch_id, cfg.cluster, event_table)
            self.spool.put("gpu_samples", sample_table, batch_id)
            self.spool.put("gpu_events", event_table, batch_id)
            for interval in intervals:
                ident = digest(cfg.cluster, cfg.node, *interval.key, interval.start_ms)
                rows = interval_table(
                    interval, cluster=cfg.cluster, node=cfg.node, span_ms=self._span_ms
                )
                self.spool.put("job_gpus", rows, f"nvml-jobgpu-{ident}")
            for reading in seen.readings:
                self._spool_inventory(reading, ts_ms)
            self.state.save(self.spool.state_dir / STATE_FILE, self._owner)  # (offline first)
            self._latch.commit(cfg.cluster, observed_conditions(sample_table), conditions, batch_id)

        landed = self.spool.land(cfg.lake, cfg.cluster, write=self._write)
        counts = dict(reader.counts)
        if landed.rejected:
            counts["spool: rejected files"] = landed.rejected
        if landed.skipped_lines:
            counts["app_throughput: malformed lines"] = landed.skipped_lines
        if landed.refused_rows:
            counts["app_throughput: rows for jobs not the writer's"] = landed.refused_rows
        return TickResult(
            ts=ts,
            gpus=len(seen.readings),
            samples=sample_table.num_rows,
            events=event_table.num_rows,
            job_gpus=len(intervals),
            jobs=tuple(sorted({i.job_id for i in intervals})),
            offline=tuple(offline),
            counts=counts,
            landed=landed,
            processes=processes,
        )

    def _event(self, uuid: str, kind: str, code: int | None, detail: str, ts_ms: int) -> Row:
        return {
            "cluster": self.config.cluster,
            "node": self.config.node,
            "gpu_uuid": uuid,
            "gpu_index": self.state.index.get(uuid),
            "ts": ts_ms,
            "kind": kind,
            "code": code,
            "detail": detail,
        }

    def _observe(self, ts_ms: int) -> _Observed:
        """List the GPUs, drain XIDs, read every GPU that is not lost."""
        assert self._reader is not None and self._xids is not None
        reader, xids = self._reader, self._xids
        try:
            gpus, _lost_indices, unread_indices = enumerate_gpus(reader)
        except NvmlUnavailable as exc:  # driver reloading: no samples, no offline verdicts
            logger.warning("%s; initialising NVML again for the next tick", exc)
            reader.counts["nvml_unavailable"] += 1
            self._reinitialise()
            return _Observed([], [], {}, False, [])
        named = {gpu.uuid for gpu in gpus}
        unread = {
            uuid
            for uuid, index in self.state.index.items()
            if index in unread_indices and uuid not in named
        }
        seen = _Observed(gpus, [], {}, True, [], unread)
        for gpu in gpus:
            self.state.index[gpu.uuid] = gpu.index
            try:
                xids.register(gpu)
            except DeviceLost:
                seen.lost[gpu.uuid] = "NVML_ERROR_GPU_IS_LOST"
        for xid in xids.drain():
            if xid.gpu_uuid is None:
                reader.counts["xid_unknown_device"] += 1
                continue
            self.state.xid_last[xid.gpu_uuid] = xid.xid
            where = f" on MIG instance {xid.gpu_instance}" if xid.gpu_instance is not None else ""
            seen.events.append(
                self._event(xid.gpu_uuid, "xid", xid.xid, f"XID {xid.xid}{where}", ts_ms)
            )
            if xid.xid == XID_GPU_FALLEN_OFF_BUS:
                seen.lost[xid.gpu_uuid] = "XID 79: GPU has fallen off the bus"
        for gpu in gpus:
            if gpu.uuid in seen.lost:
                continue
            try:
                seen.readings.append(read_gpu(reader, gpu))
            except DeviceLost:
                seen.lost[gpu.uuid] = "NVML_ERROR_GPU_IS_LOST"
        return seen

    def _offline_transitions(self, seen: _Observed, ts_ms: int) -> list[str]:
        """Add one `offline` event per GPU that was seen before and is gone or lost now."""
        present = {r.gpu.uuid for r in seen.readings}
        self.state.offline -= present  # back (e.g. after a reset): may go offline again later
        gone = set(seen.lost)
        if seen.listed:
            gone |= set(self.state.first_seen) - {g.uuid for g in seen.gpus} - seen.unread
        newly = sorted(gone - present - self.state.offline)
        for uuid in newly:
            why = seen.lost.get(uuid, "no longer listed by NVML")
            code = XID_GPU_FALLEN_OFF_BUS if why.startswith("XID 79") else None
            seen.events.append(self._event(uuid, "offline", code, f"GPU offline: {why}", ts_ms))
            self.state.offline.add(uuid)
        return newly

    def _attribute(
        self, readings: list[GpuReading], slots_pids: dict[Slot, tuple[int, ...] | None]
    ) -> tuple[dict[Slot, list[str]], tuple[ProcessSeen, ...]]:
        """The jobs on each slot whose processes could be listed, and every process seen.

        PIDs without an owner are counted under `pid: <reason>`.
        """
        assert self._reader is not None
        self._pods.refresh()
        lookups = resolve_owners(
            [pid for pids in slots_pids.values() if pids for pid in pids],
            self._proc_root,
            self._pods,
            self._arrays,
        )
        self._reader.counts.update(
            f"pid: {found.reason}" for found in lookups.values() if found.reason is not None
        )
        # a pod no log folder names keeps its UID: its time meets no job the collector landed
        self._reader.counts.update(
            "pid: pod_unnamed"
            for found in lookups.values()
            if found.owner is not None
            and found.owner.kind == "k8s"
            and found.owner.job_id == found.owner.raw_id
        )
        index = {r.gpu.uuid: r.gpu.index for r in readings}
        slot_jobs: dict[Slot, list[str]] = {}
        processes: list[ProcessSeen] = []
        for (uuid, gi), pids in slots_pids.items():
            if pids is None:
                continue
            owners = [lookups[pid].owner for pid in pids]
            slot_jobs[(uuid, gi)] = sorted({o.job_id for o in owners if o is not None})
            processes += [
                ProcessSeen(index[uuid], uuid, gi, pid, owner, lookups[pid].reason)
                for pid, owner in zip(pids, owners, strict=True)
            ]
        return slot_jobs, tuple(processes)

    def _spool_inventory(self, reading: GpuReading, ts_ms: int) -> None:
        """Spool the `gpus` row of a GPU when first seen this run and every INVENTORY_REFRESH_S."""
        uuid = reading.gpu.uuid
        first = self.state.first_seen.setdefault(uuid, ts_ms)
        last = self._inventoried.get(uuid)
        if last is not None and ts_ms - last < INVENTORY_REFRESH_S * 1000:
            return
        self._inventoried[uuid] = ts_ms
        cfg = self.config
        rows = inventory_table(
            reading, cluster=cfg.cluster, node=cfg.node, first_ms=first, last_ms=ts_ms
        )
        self.spool.put("gpus", rows, f"nvml-gpus-{digest(cfg.cluster, cfg.node, uuid, first)}")


class SpoolNotWritable(CollectorError):
    """The spool (or the agent's state in it) cannot be written: a full or failing disk."""


@contextmanager
def _spool_writes(root: Path) -> Iterator[None]:
    """Raise SpoolNotWritable, one line naming the spool and the reason, for an OSError of the
    writes in the body (a tick's samples, events, runs and state); the tick lands nothing, and
    what was spooled before stays for the next start."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SpoolNotWritable(
            f"cannot write the spool {str(root)!r}: {reason}; free space there or give "
            "--spool another folder (what it holds lands at the next start)"
        ) from None


def run_agent(
    config: AgentConfig,
    *,
    once: bool = False,
    nvml: Any = None,
    proc_root: Path = Path("/proc"),
    pod_logs: Path | None = DEFAULT_POD_LOGS,
    clock: Clock = utc_now,
    write: Writer = write_batch,
    stop: threading.Event | None = None,
    max_ticks: int | None = None,
    on_tick: Callable[[TickResult], None] | None = None,
) -> AgentSummary:
    """Tick once (`once`) or every `config.interval_s` until `stop` is set; return totals.

    Raises ConfigError or NvmlUnavailable before the first tick; after that, NVML and lake
    trouble is counted and reported per tick, never fatal.
    """
    stop = stop or threading.Event()
    summary = AgentSummary()
    with NvmlAgent(
        config, nvml=nvml, proc_root=proc_root, pod_logs=pod_logs, clock=clock, write=write
    ) as agent:
        next_tick = time.monotonic()
        while True:
            result = agent.tick()
            summary.add(result)
            if on_tick is not None:
                on_tick(result)
            if once or stop.is_set():
                break
            if max_ticks is not None and summary.ticks >= max_ticks:
                break
            next_tick += config.interval_s
            delay = next_tick - time.monotonic()
            if delay < 0:  # the tick overran the interval: start the next one now
                logger.warning("tick took %.1f s longer than the interval", -delay)
                next_tick = time.monotonic()
                delay = 0.0
            if stop.wait(delay):
                break
    return summary
