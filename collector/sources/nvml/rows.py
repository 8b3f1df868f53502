"""The contract rows the NVML agent writes: `gpu_samples`, `gpu_events`, `job_gpus`, `gpus`.

Pure functions from readings (collector.sources.nvml.device) to rows in the contract's units and
Arrow types; the agent decides when to write them.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import pyarrow as pa

from collector.sources.dcgm_exporter.rows import (
    CLOCK_HW_POWER_BRAKE,
    CLOCK_HW_SLOWDOWN,
    CLOCK_THERMAL,
    describe_clock_reasons,
)
from collector.sources.nvml.device import GpuReading
from collector.sources.nvml.state import OpenInterval, Slot
from warehouse.schema import RAW_TABLES

__all__ = [
    "CONDITION_KINDS",
    "MAPPING",
    "SOURCE",
    "condition_rows",
    "digest",
    "interval_table",
    "inventory_table",
    "owned_rows",
    "sample_rows",
    "table",
]

SOURCE: Final = "nvml"
MAPPING: Final = "nvml-cgroup"
GPU_SAMPLES: Final = RAW_TABLES["gpu_samples"].schema
GPU_EVENTS: Final = RAW_TABLES["gpu_events"].schema
JOB_GPUS: Final = RAW_TABLES["job_gpus"].schema
GPUS: Final = RAW_TABLES["gpus"].schema

Row = dict[str, Any]


def digest(*parts: object) -> str:
    """A short stable hash of `parts`, for batch ids."""
    return hashlib.sha256("\n".join(map(str, parts)).encode()).hexdigest()[:20]


def table(schema: pa.Schema, rows: list[Row]) -> pa.Table:
    """`rows` as a table of `schema` (timestamps given as epoch ms)."""
    return pa.Table.from_arrays(
        [pa.array([r.get(f.name) for r in rows], type=f.type) for f in schema], schema=schema
    )


def sample_rows(
    readings: list[GpuReading],
    *,
    cluster: str,
    node: str,
    interval_s: float,
    ts_ms: int,
    xid_last: dict[str, int | None],
) -> tuple[list[Row], dict[Slot, tuple[int, ...] | None]]:
    """One `gpu_samples` row per GPU or MIG instance, and the PIDs on each (None: unreadable).

    Device-level fields repeat on every MIG instance of a GPU, as dcgm-exporter writes them
    (DESIGN §4 takes them once per physical GPU). `job_id` is left for the caller to fill
    (`owned_rows`).
    """
    rows: list[Row] = []
    pids: dict[Slot, tuple[int, ...] | None] = {}
    for r in readings:
        for inst in r.instances:
            pids[(r.gpu.uuid, inst.gpu_instance)] = inst.pids
            rows.append(
                {
                    "ts": ts_ms,
                    "cluster": cluster,
                    "node": node,
                    "gpu_index": r.gpu.index,
                    "gpu_uuid": r.gpu.uuid,
                    "mig_profile": inst.profile,
                    "mig_instance": inst.gpu_instance,
                    "model": r.model,
                    "interval_s": interval_s,
                    "job_id": None,
                    "gpu_util_pct": r.gpu_util_pct,
                    "fb_used_mib": inst.fb_used_mib,
                    "fb_free_mib": inst.fb_free_mib,
                    "power_w": r.power_w,
                    "energy_j": r.energy_j,
                    "temp_c": r.temp_c,
                    "mem_temp_c": r.mem_temp_c,
                    "sm_clock_mhz": r.sm_clock_mhz,
                    "mem_clock_mhz": r.mem_clock_mhz,
                    "clock_event_reasons": r.clock_event_reasons,
                    "xid_last": xid_last.get(r.gpu.uuid),
                    "ecc_sbe_volatile": r.ecc_sbe_volatile,
                    "ecc_dbe_volatile": r.ecc_dbe_volatile,
                    "remap_pending": r.remap_pending,
                    "remap_failure": r.remap_failure,
                    "source": SOURCE,
                }
            )
    return rows, pids


def owned_rows(rows: list[Row], slot_jobs: dict[Slot, list[str]]) -> list[Row]:
    """`rows` with `job_id` set from the jobs whose processes run on each GPU or MIG instance.

    A slot used by several jobs at once (MPS, time-slicing: PIDs of different jobs) gets one row
    per job (in `slot_jobs`' order) with the same device values, so the marts split the GPU's
    time among them (DESIGN §4); one with no job (or unreadable processes) keeps a null job_id.
    """
    out: list[Row] = []
    for row in rows:
        jobs: list[str | None] = [*slot_jobs.get((row["gpu_uuid"], row["mig_instance"]), [])]
        out += [{**row, "job_id": job} for job in jobs or [None]]
    return out


# the kinds of `gpu_events` row that are conditions present while they apply (`_conditions`),
# landed once per onset; XIDs and offline GPUs are events, landed once as they happen
CONDITION_KINDS: Final = frozenset(
    {"ecc_dbe", "row_remap_failure", "hw_slowdown", "thermal", "power_brake"}
)


def _conditions(reading: GpuReading) -> list[tuple[str, int | None, str]]:
    """Health conditions present on one GPU now: (kind, code, detail), as dcgm_rows defines."""
    out: list[tuple[str, int | None, str]] = []
    if reading.ecc_dbe_volatile:
        dbe = reading.ecc_dbe_volatile
        out.append(("ecc_dbe", dbe, f"{dbe} volatile double-bit ECC error(s)"))
    if reading.remap_failure:
        out.append(("row_remap_failure", None, "row remapping failed"))
    reasons = reading.clock_event_reasons
    if reasons:
        for kind, mask in (
            ("hw_slowdown", CLOCK_HW_SLOWDOWN),
            ("thermal", CLOCK_THERMAL),
            ("power_brake", CLOCK_HW_POWER_BRAKE),
        ):
            if reasons & mask:
                out.append((kind, reasons, describe_clock_reasons(reasons)))
    return out


def condition_rows(readings: list[GpuReading], *, cluster: str, node: str, ts_ms: int) -> list[Row]:
    """The health conditions present now, one `gpu_events` row per physical GPU and kind."""
    return [
        {
            "cluster": cluster,
            "node": node,
            "gpu_uuid": r.gpu.uuid,
            "gpu_index": r.gpu.index,
            "ts": ts_ms,
            "kind": kind,
            "code": code,
            "detail": detail,
        }
        for r in readings
        for kind, code, detail in _conditions(r)
    ]


def interval_table(interval: OpenInterval, *, cluster: str, node: str, span_ms: int) -> pa.Table:
    """The `job_gpus` row of one run: `[first seen, last seen + span)`."""
    row = {
        "cluster": cluster,
        "job_id": interval.job_id,
        "node": node,
        "gpu_index": interval.gpu_index,
        "gpu_uuid": interval.gpu_uuid,
        "mig_instance": interval.mig_instance,
        "start_ts": interval.start_ms,
        "end_ts": interval.last_ms + span_ms,
        "mapping": MAPPING,
    }
    return table(JOB_GPUS, [row])


def inventory_table(
    reading: GpuReading, *, cluster: str, node: str, first_ms: int, last_ms: int
) -> pa.Table:
    """The `gpus` row of one physical GPU; a MIG GPU lists its instances' profiles, `+`-joined."""
    profiles = [i.profile or "?" for i in reading.instances if i.gpu_instance is not None]
    row = {
        "cluster": cluster,
        "node": node,
        "gpu_index": reading.gpu.index,
        "gpu_uuid": reading.gpu.uuid,
        "model": reading.model,
        "mig_profile": "+".join(profiles) if profiles else None,
        "fb_total_mib": reading.fb_total_mib,
        "power_limit_w": reading.power_limit_w,
        "first_seen": first_ms,
        "last_seen": last_ms,
    }
    return table(GPUS, [row])
