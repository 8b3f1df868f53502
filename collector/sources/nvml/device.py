"""Read one node's GPUs through NVML (nvidia-ml-py's `pynvml` module, passed in as `nvml`).

Every field is read by its own call; an NVMLError on it (NOT_SUPPORTED, NO_PERMISSION,
FUNCTION_NOT_FOUND on an older driver, …) makes that field null and is counted under
`<field>: <ERROR_NAME>`, never fatal. NVML_ERROR_GPU_IS_LOST raises `DeviceLost`, which the agent
turns into an `offline` event. Units are converted to the contract's here: bytes → MiB, mW → W,
mJ → J (reference/dcgm.md §3). `pynvml` itself is imported only by `load_nvml`.
"""

from __future__ import annotations

import ctypes
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, Final

from collector.errors import CollectorError

__all__ = [
    "DeviceLost",
    "GpuReading",
    "InstanceReading",
    "NvmlReader",
    "NvmlUnavailable",
    "PhysicalGpu",
    "XidEvent",
    "XidWatch",
    "handle_key",
    "load_nvml",
]

MIB: Final = float(1 << 20)
MAX_EVENTS_PER_DRAIN: Final = 1000
XID_GPU_FALLEN_OFF_BUS: Final = 79
_NO_INSTANCE: Final = 0xFFFFFFFF  # gpuInstanceId of an event outside any MIG instance
_MIG_PROFILE: Final = re.compile(r"\bMIG\s+(\S+)\s*$")

INSTALL_HINT: Final = "install it with: pip install 'gpuledger[nvml]' (the nvidia-ml-py package)"


class NvmlUnavailable(CollectorError):
    """NVML cannot be used on this node: no nvidia-ml-py, no driver library, or no GPU."""


class DeviceLost(Exception):
    """A GPU answered NVML_ERROR_GPU_IS_LOST (fallen off the bus, XID 79)."""


def load_nvml() -> ModuleType:
    """Import nvidia-ml-py's `pynvml`, or raise NvmlUnavailable saying how to install it."""
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable(f"the NVML Python bindings are missing; {INSTALL_HINT}") from exc
    module: ModuleType = pynvml
    return module


def handle_key(handle: object) -> int:
    """A stable key for a device handle: the address a ctypes handle points to, else its id.

    NVML hands back a new ctypes pointer object each time (e.g. in event data), so handles are
    compared by the address they point to.
    """
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value or 0  # type: ignore[arg-type]
    except (ctypes.ArgumentError, TypeError):
        return id(handle)


class NvmlReader:
    """Calls NVML functions by name; an NVMLError becomes None and a count (see module doc)."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.counts: Counter[str] = Counter()
        self._names = {
            getattr(nvml, n): n.removeprefix("NVML_ERROR_")
            for n in dir(nvml)
            if n.startswith("NVML_ERROR_") and isinstance(getattr(nvml, n), int)
        }
        self.lost_code: int = getattr(nvml, "NVML_ERROR_GPU_IS_LOST", 15)
        self.timeout_code: int = getattr(nvml, "NVML_ERROR_TIMEOUT", 10)

    def error_name(self, exc: BaseException) -> str:
        """The name of an NVMLError's code, e.g. NOT_SUPPORTED."""
        return self.return_name(getattr(exc, "value", -1))

    def call(self, fn_name: str, *args: Any, **kwargs: Any) -> Any:
        """Call `nvml.<fn_name>`; raise NVMLError as is (DeviceLost for GPU_IS_LOST)."""
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:
            raise AttributeError(f"this nvidia-ml-py has no {fn_name}")
        try:
            return fn(*args, **kwargs)
        except self.nvml.NVMLError as exc:
            if getattr(exc, "value", None) == self.lost_code:
                raise DeviceLost(fn_name) from exc
            raise

    def return_name(self, code: int) -> str:
        """The name of an nvmlReturn_t code, e.g. NOT_SUPPORTED."""
        return self._names.get(code, f"NVML error {code!r}")

    def attempt(self, column: str, fn_name: str, *args: Any) -> bool:
        """Call a function that returns nothing; False (counted under `column`) if refused."""
        try:
            self.call(fn_name, *args)
        except AttributeError:
            self.counts[f"{column}: FUNCTION_NOT_FOUND"] += 1
            return False
        except self.nvml.NVMLError as exc:
            self.counts[f"{column}: {self.error_name(exc)}"] += 1
            return False
        return True

    def get(self, column: str, fn_name: str, *args: Any, count: bool = True, **kwargs: Any) -> Any:
        """`nvml.<fn_name>(*args)`, or None (counted under `column`) when NVML refuses it."""
        try:
            return self.call(fn_name, *args, **kwargs)
        except AttributeError:
            if count:
                self.counts[f"{column}: FUNCTION_NOT_FOUND"] += 1
            return None
        except self.nvml.NVMLError as exc:
            if count:
                self.counts[f"{column}: {self.error_name(exc)}"] += 1
            return None


@dataclass(frozen=True, slots=True)
class PhysicalGpu:
    """One enumerated GPU: NVML index, handle, UUID."""

    index: int
    handle: Any
    uuid: str


@dataclass(frozen=True, slots=True)
class InstanceReading:
    """One MIG instance (or, for a GPU without MIG, the GPU itself: `gpu_instance` None)."""

    gpu_instance: int | None
    profile: str | None
    fb_used_mib: float | None
    fb_free_mib: float | None
    fb_total_mib: float | None
    pids: tuple[int, ...] | None  # None: the process list could not be read


@dataclass(frozen=True, slots=True)
class GpuReading:
    """Device-level values of one physical GPU at one tick, in the contract's units."""

    gpu: PhysicalGpu
    model: str | None
    gpu_util_pct: float | None
    power_w: float | None
    energy_j: float | None
    temp_c: float | None
    mem_temp_c: float | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    clock_event_reasons: int | None
    ecc_sbe_volatile: int | None
    ecc_dbe_volatile: int | None
    remap_pending: bool | None
    remap_failure: bool | None
    power_limit_w: float | None
    fb_total_mib: float | None
    mig: bool
    instances: tuple[InstanceReading, ...] = field(default_factory=tuple)
    # a MIG device whose GPU instance could not be read: what runs on this GPU's instances is
    # not known in full this tick (their jobs' runs are kept open, not ended)
    unkeyed_instances: bool = False


def _text(value: object) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _scaled(value: object, divide: float) -> float | None:
    return None if value is None else float(value) / divide  # type: ignore[arg-type]


def enumerate_gpus(reader: NvmlReader) -> tuple[list[PhysicalGpu], list[int], list[int]]:
    """The GPUs NVML lists now, the indices that answered GPU_IS_LOST, and those that answered
    another error (a GPU NVML still counts but did not name this time: not gone).

    Raises NvmlUnavailable when NVML cannot even count devices (driver unloaded).
    """
    try:
        count = int(reader.call("nvmlDeviceGetCount"))
    except (reader.nvml.NVMLError, DeviceLost, AttributeError) as exc:
        raise NvmlUnavailable(f"NVML cannot list GPUs: {exc}") from exc
    gpus: list[PhysicalGpu] = []
    lost: list[int] = []
    unread: list[int] = []
    for index in range(count):
        try:
            handle = reader.call("nvmlDeviceGetHandleByIndex", index)
            uuid = _text(reader.call("nvmlDeviceGetUUID", handle))
        except DeviceLost:
            lost.append(index)
            continue
        except reader.nvml.NVMLError as exc:
            reader.counts[f"device {index}: {reader.error_name(exc)}"] += 1
            unread.append(index)
            continue
        if uuid:
            gpus.append(PhysicalGpu(index, handle, uuid))
        else:
            unread.append(index)
    return gpus, lost, unread


def _memory(reader: NvmlReader, handle: Any) -> tuple[float | None, float | None, float | None]:
    """(used, free, total) MiB; used excludes driver-reserved memory where NVML can say so."""
    info = None
    v2 = getattr(reader.nvml, "nvmlMemory_v2", None)
    if v2 is not None:  # v2 separates `reserved` from `used`, as DCGM's FB_USED does
        info = reader.get("fb_used_mib", "nvmlDeviceGetMemoryInfo", handle, count=False, version=v2)
    if info is None:
        info = reader.get("fb_used_mib", "nvmlDeviceGetMemoryInfo", handle)
    if info is None:
        return None, None, None
    return info.used / MIB, info.free / MIB, info.total / MIB


def _pids(reader: NvmlReader, handle: Any) -> tuple[int, ...] | None:
    """PIDs with a compute context (and MPS clients) on `handle`; host PIDs (dcgm.md §3)."""
    compute = reader.get("processes", "nvmlDeviceGetComputeRunningProcesses", handle)
    if compute is None:  # unknown, not "none": the agent keeps this GPU's intervals open
        return None
    mps = reader.get("processes", "nvmlDeviceGetMPSComputeRunningProcesses", handle, count=False)
    return tuple(sorted({int(p.pid) for p in [*compute, *(mps or ())]}))


def _field_value(reader: NvmlReader, column: str, handle: Any, field_id: int) -> float | None:
    values = reader.get(column, "nvmlDeviceGetFieldValues", handle, [field_id])
    if not values:
        return None
    value = values[0]
    if value.nvmlReturn != 0:
        reader.counts[f"{column}: {reader.return_name(int(value.nvmlReturn))}"] += 1
        return None
    nvml = reader.nvml
    member = {
        getattr(nvml, "NVML_VALUE_TYPE_DOUBLE", 0): "dVal",
        getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_INT", 1): "uiVal",
        getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_LONG", 2): "ulVal",
        getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG", 3): "ullVal",
        getattr(nvml, "NVML_VALUE_TYPE_SIGNED_LONG_LONG", 4): "sllVal",
        getattr(nvml, "NVML_VALUE_TYPE_SIGNED_INT", 5): "siVal",
    }.get(value.valueType, "uiVal")
    return float(getattr(value.value, member))


def _instances(reader: NvmlReader, gpu: PhysicalGpu) -> tuple[tuple[InstanceReading, ...], bool]:
    """The GPU instances of a MIG GPU, one reading each, and whether some MIG device's GPU
    instance could not be read (its row, and what runs on it, unknown this tick).

    NVML lists one MIG device per compute instance: several compute instances of one GPU
    instance share its memory, and are one instance of the lake (`mig_instance` is the GPU
    instance), its processes theirs together; read one by one, the last one's processes
    replaced the others' and their jobs lost the GPU."""
    nvml = reader.nvml
    slots = reader.get("mig", "nvmlDeviceGetMaxMigDeviceCount", gpu.handle) or 0
    found: dict[int, InstanceReading] = {}
    unkeyed = False
    for slot in range(int(slots)):
        try:
            mig = reader.call("nvmlDeviceGetMigDeviceHandleByIndex", gpu.handle, slot)
        except nvml.NVMLError:  # NOT_FOUND: an empty slot
            continue
        gi = reader.get("mig_instance", "nvmlDeviceGetGpuInstanceId", mig)
        if gi is None:  # which instance it is, unknown: not merged into another
            unkeyed = True
            continue
        pids = _pids(reader, mig)
        before = found.get(int(gi))
        if before is not None:  # another compute instance of this GPU instance
            merged = None if before.pids is None or pids is None else (*before.pids, *pids)
            found[int(gi)] = replace(before, pids=merged)
            continue
        name = _text(reader.get("mig_profile", "nvmlDeviceGetName", mig)) or ""
        profile = match.group(1) if (match := _MIG_PROFILE.search(name)) else None
        used, free, total = _memory(reader, mig)
        found[int(gi)] = InstanceReading(int(gi), profile, used, free, total, pids)
    return tuple(found[gi] for gi in sorted(found)), unkeyed


def read_gpu(reader: NvmlReader, gpu: PhysicalGpu) -> GpuReading:
    """Every field of `gpu` this NVML can give; raises DeviceLost for a lost GPU."""
    nvml, h = reader.nvml, gpu.handle
    mode = reader.get("mig", "nvmlDeviceGetMigMode", h, count=False)
    mig = bool(mode) and mode[0] == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1)
    util = None if mig else reader.get("gpu_util_pct", "nvmlDeviceGetUtilizationRates", h)
    remap = reader.get("remap_pending", "nvmlDeviceGetRemappedRows", h)
    reasons = reader.get("clock_event_reasons", "nvmlDeviceGetCurrentClocksEventReasons", h)
    if reasons is None and not hasattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons"):
        reasons = reader.get("clock_event_reasons", "nvmlDeviceGetCurrentClocksThrottleReasons", h)
    ecc = (
        getattr(nvml, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0),
        getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
        getattr(nvml, "NVML_VOLATILE_ECC", 0),
    )
    sbe = reader.get("ecc_sbe_volatile", "nvmlDeviceGetTotalEccErrors", h, ecc[0], ecc[2])
    dbe = reader.get("ecc_dbe_volatile", "nvmlDeviceGetTotalEccErrors", h, ecc[1], ecc[2])
    mem_temp = _field_value(reader, "mem_temp_c", h, getattr(nvml, "NVML_FI_DEV_MEMORY_TEMP", 82))
    used, free, total = _memory(reader, h)
    instances, unkeyed = _instances(reader, gpu) if mig else ((), False)
    if not instances:  # a whole GPU, MIG enabled with no instance yet, or none told apart
        # (the GPU's own row then, its processes unknown: it stays observed)
        pids = None if unkeyed else _pids(reader, h)
        instances = (InstanceReading(None, None, used, free, total, pids),)
    temp = reader.get("temp_c", "nvmlDeviceGetTemperature", h, nvml.NVML_TEMPERATURE_GPU)
    sm_clock = reader.get("sm_clock_mhz", "nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_SM)
    mem_clock = reader.get("mem_clock_mhz", "nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_MEM)
    energy = reader.get("energy_j", "nvmlDeviceGetTotalEnergyConsumption", h)
    return GpuReading(
        gpu=gpu,
        model=_text(reader.get("model", "nvmlDeviceGetName", h)),
        gpu_util_pct=None if util is None else float(util.gpu),
        power_w=_scaled(reader.get("power_w", "nvmlDeviceGetPowerUsage", h), 1000.0),
        energy_j=_scaled(energy, 1000.0),
        temp_c=_scaled(temp, 1.0),
        # HBM reports its temperature; GDDR boards answer 0, which means "unknown"
        mem_temp_c=mem_temp if mem_temp else None,
        sm_clock_mhz=_scaled(sm_clock, 1.0),
        mem_clock_mhz=_scaled(mem_clock, 1.0),
        clock_event_reasons=None if reasons is None else int(reasons),
        ecc_sbe_volatile=None if sbe is None else int(sbe),
        ecc_dbe_volatile=None if dbe is None else int(dbe),
        remap_pending=None if remap is None else bool(remap[2]),
        remap_failure=None if remap is None else bool(remap[3]),
        power_limit_w=_scaled(
            reader.get("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit", h), 1000.0
        ),
        fb_total_mib=total,
        mig=mig,
        instances=instances,
        unkeyed_instances=unkeyed,
    )


@dataclass(frozen=True, slots=True)
class XidEvent:
    """One XID critical-error event: the GPU (None if its handle is unknown), code, instance."""

    gpu_uuid: str | None
    xid: int
    gpu_instance: int | None


class XidWatch:
    """An NVML event set registered for XID critical errors on each GPU that supports them.

    `drain()` reads what arrived since the last call without blocking (timeout 0). NVML keeps no
    history: only XIDs after registration are seen.
    """

    def __init__(self, reader: NvmlReader) -> None:
        self._reader = reader
        self._mask: int = getattr(reader.nvml, "nvmlEventTypeXidCriticalError", 8)
        self._set = reader.get("xid_last", "nvmlEventSetCreate")
        self.registered: dict[int, str] = {}  # handle key → UUID
        self._refused: set[int] = set()  # tried once per NVML session, counted once

    def register(self, gpu: PhysicalGpu) -> bool:
        """Register `gpu` once; return whether its XIDs are being watched."""
        key = handle_key(gpu.handle)
        if key in self.registered:
            return True
        if self._set is None or key in self._refused:
            return False
        supported = self._reader.get("xid_last", "nvmlDeviceGetSupportedEventTypes", gpu.handle)
        if (
            supported is None
            or not int(supported) & self._mask
            or not self._reader.attempt(
                "xid_last", "nvmlDeviceRegisterEvents", gpu.handle, self._mask, self._set
            )
        ):
            self._refused.add(key)
            return False
        self.registered[key] = gpu.uuid
        return True

    def drain(self) -> list[XidEvent]:
        """Every XID event waiting now (at most MAX_EVENTS_PER_DRAIN)."""
        if self._set is None or not self.registered:
            return []
        nvml, events = self._reader.nvml, []
        for _ in range(MAX_EVENTS_PER_DRAIN):
            try:
                data = nvml.nvmlEventSetWait(self._set, 0)
            except nvml.NVMLError as exc:
                if getattr(exc, "value", None) != self._reader.timeout_code:
                    self._reader.counts[f"xid_last: {self._reader.error_name(exc)}"] += 1
                break
            if not int(data.eventType) & self._mask:
                continue
            gi = int(data.gpuInstanceId)
            events.append(
                XidEvent(
                    self.registered.get(handle_key(data.device)),
                    int(data.eventData),
                    None if gi == _NO_INSTANCE else gi,
                )
            )
        return events

    def close(self) -> None:
        """Free the event set (registrations end with it)."""
        if self._set is not None:
            self._reader.get("xid_last", "nvmlEventSetFree", self._set, count=False)
            self._set = None
