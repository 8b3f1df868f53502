"""A test double of nvidia-ml-py's `pynvml` module: the functions the node agent calls.

Return types are pynvml's own: device handles are ctypes `c_nvmlDevice_t` pointers (a new
pointer object per call, as NVML gives), memory info is `c_nvmlMemory_t`/`_v2_t`, field values
are `c_nvmlFieldValue_t` arrays, events are `c_nvmlEventData_t`, processes are
`nvmlFriendlyObject`s, and errors are `pynvml.NVMLError(code)` (which maps to its subclass).
Every `NVML_*` / `nvml*` constant is copied from the real module.
"""

from __future__ import annotations

import ctypes
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import pynvml

NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
GIB = 1 << 30


@dataclass
class FakeMig:
    """One MIG device (GPU instance) of a FakeGpu."""

    gpu_instance: int
    profile: str
    total: int
    used: int
    processes: list[tuple[int, int]] = field(default_factory=list)  # (pid, bytes)
    struct: Any = field(default_factory=pynvml.struct_c_nvmlDevice_t)


@dataclass
class FakeGpu:
    """One physical GPU with the values NVML would report (raw NVML units)."""

    uuid: str
    name: str = "NVIDIA H200"
    util_gpu: int = 87
    util_memory: int = 40
    total: int = 141 * GIB
    reserved: int = 512 << 20
    used: int = 40 * GIB
    power_mw: int = 412_345
    energy_mj: int = 987_654_321
    temp_c: int = 54
    mem_temp_c: int = 61  # HBM; 0 on GDDR boards
    sm_clock: int = 1980
    mem_clock: int = 3201
    reasons: int = 0x4  # SW power cap
    sbe: int = 3
    dbe: int = 0
    remap: tuple[int, int, int, int] = (1, 0, 0, 0)  # corrected, uncorrected, pending, failure
    power_limit_mw: int = 700_000
    processes: list[tuple[int, int]] = field(default_factory=list)
    mig: list[FakeMig] | None = None  # None: MIG not supported; [] : enabled, no instance
    unsupported: set[str] = field(default_factory=set)  # function names → NOT_SUPPORTED
    lost: bool = False
    events_supported: bool = True
    struct: Any = field(default_factory=pynvml.struct_c_nvmlDevice_t)


def _error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


class FakeNvml:
    """The module object the agent receives as `nvml`. Mutate `gpus` between ticks."""

    NVMLError = pynvml.NVMLError

    def __init__(self, gpus: list[FakeGpu], *, init_error: int | None = None) -> None:
        for name in dir(pynvml):
            value = getattr(pynvml, name)
            if isinstance(value, int) and (name.startswith("NVML_") or name.startswith("nvml")):
                setattr(self, name, value)
        self.gpus = gpus
        self.init_error = init_error
        self.initialized = False
        self.shutdowns = 0
        self.calls: list[str] = []
        self._events: deque[Any] = deque()
        self._registered: set[int] = set()
        self._event_sets = 0

    # ---- helpers for tests

    def push_xid(self, gpu: FakeGpu, xid: int, gpu_instance: int | None = None) -> None:
        """Raise an XID on `gpu`: queued only if it is registered (NVML keeps no history)."""
        if ctypes.addressof(gpu.struct) not in self._registered:
            return
        self._events.append(
            pynvml.c_nvmlEventData_t(
                device=ctypes.pointer(gpu.struct),
                eventType=pynvml.nvmlEventTypeXidCriticalError,
                eventData=xid,
                gpuInstanceId=0xFFFFFFFF if gpu_instance is None else gpu_instance,
                computeInstanceId=0xFFFFFFFF,
            )
        )

    def _find(self, handle: Any) -> FakeGpu | FakeMig:
        address = ctypes.cast(handle, ctypes.c_void_p).value
        for gpu in self.gpus:
            if ctypes.addressof(gpu.struct) == address:
                return gpu
            for mig in gpu.mig or ():
                if ctypes.addressof(mig.struct) == address:
                    return mig
        raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def _gpu(self, handle: Any, fn: str) -> FakeGpu:
        self.calls.append(fn)
        if not self.initialized:
            raise _error(pynvml.NVML_ERROR_UNINITIALIZED)
        device = self._find(handle)
        gpu = device if isinstance(device, FakeGpu) else self._parent(device)
        if gpu.lost:
            raise _error(pynvml.NVML_ERROR_GPU_IS_LOST)
        if fn in gpu.unsupported:
            raise _error(NOT_SUPPORTED)
        if not isinstance(device, FakeGpu) and fn in _DEVICE_ONLY:
            raise _error(NOT_SUPPORTED)  # what NVML answers for these on a MIG handle
        return gpu

    def _parent(self, mig: FakeMig) -> FakeGpu:
        return next(g for g in self.gpus if g.mig and mig in g.mig)

    # ---- init and enumeration

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise _error(self.init_error)
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self.initialized = False
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        if not self.initialized:
            raise _error(pynvml.NVML_ERROR_UNINITIALIZED)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        gpu = self.gpus[index]
        if gpu.lost:
            raise _error(pynvml.NVML_ERROR_GPU_IS_LOST)
        return ctypes.pointer(gpu.struct)

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        device = self._find(handle)
        self._gpu(handle, "nvmlDeviceGetUUID")
        if isinstance(device, FakeMig):
            return f"MIG-{device.gpu_instance:08x}-0000-0000-0000-000000000000"
        return device.uuid

    def nvmlDeviceGetName(self, handle: Any) -> str:
        device = self._find(handle)
        gpu = self._gpu(handle, "nvmlDeviceGetName")
        return f"{gpu.name} MIG {device.profile}" if isinstance(device, FakeMig) else gpu.name

    # ---- MIG

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        gpu = self._gpu(handle, "nvmlDeviceGetMigMode")
        if gpu.mig is None:
            raise _error(NOT_SUPPORTED)
        return [pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetMaxMigDeviceCount")
        return 7 if gpu.mig is not None else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetMigDeviceHandleByIndex")
        if gpu.mig is None or index >= len(gpu.mig):
            raise _error(pynvml.NVML_ERROR_NOT_FOUND)
        return ctypes.pointer(gpu.mig[index].struct)

    def nvmlDeviceGetGpuInstanceId(self, handle: Any) -> int:
        device = self._find(handle)
        self._gpu(handle, "nvmlDeviceGetGpuInstanceId")
        if not isinstance(device, FakeMig):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return device.gpu_instance

    # ---- readings

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        return pynvml.c_nvmlUtilization_t(gpu=gpu.util_gpu, memory=gpu.util_memory)

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        device = self._find(handle)
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        total, used = (
            (device.total, device.used)
            if isinstance(device, FakeMig)
            else (
                gpu.total,
                gpu.used,
            )
        )
        if not version:  # v1: `used` includes the driver's reserved memory
            reserved = 0 if isinstance(device, FakeMig) else gpu.reserved
            return pynvml.c_nvmlMemory_t(
                total=total, free=total - used - reserved, used=used + reserved
            )
        if "nvmlDeviceGetMemoryInfo_v2" in gpu.unsupported:
            raise _error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        reserved = 0 if isinstance(device, FakeMig) else gpu.reserved
        return pynvml.c_nvmlMemory_v2_t(
            version=version, total=total, reserved=reserved, free=total - used - reserved, used=used
        )

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self._gpu(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        return self._gpu(handle, "nvmlDeviceGetTotalEnergyConsumption").energy_mj

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return self._gpu(handle, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu(handle, "nvmlDeviceGetTemperature").temp_c

    def nvmlDeviceGetFieldValues(self, handle: Any, field_ids: list[int]) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetFieldValues")
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for i, field_id in enumerate(field_ids):
            values[i].fieldId = field_id
            if field_id == pynvml.NVML_FI_DEV_MEMORY_TEMP and "memory_temp" not in gpu.unsupported:
                values[i].nvmlReturn = pynvml.NVML_SUCCESS
                values[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                values[i].value.uiVal = gpu.mem_temp_c
            else:
                values[i].nvmlReturn = NOT_SUPPORTED
        return values

    def nvmlDeviceGetClockInfo(self, handle: Any, clock: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetClockInfo")
        return {pynvml.NVML_CLOCK_SM: gpu.sm_clock, pynvml.NVML_CLOCK_MEM: gpu.mem_clock}[clock]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        return self._gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons").reasons

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetTotalEccErrors")
        assert counter == pynvml.NVML_VOLATILE_ECC
        return gpu.sbe if error_type == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED else gpu.dbe

    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]:
        return self._gpu(handle, "nvmlDeviceGetRemappedRows").remap

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        device = self._find(handle)
        gpu = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        if isinstance(device, FakeMig):
            procs, gi = device.processes, device.gpu_instance
        else:
            procs, gi = gpu.processes, 0xFFFFFFFF
        return [
            pynvml.nvmlFriendlyObject(
                {"pid": pid, "usedGpuMemory": used, "gpuInstanceId": gi, "computeInstanceId": 0}
            )
            for pid, used in procs
        ]

    def nvmlDeviceGetMPSComputeRunningProcesses(self, handle: Any) -> list[Any]:
        self._gpu(handle, "nvmlDeviceGetMPSComputeRunningProcesses")
        return []

    # ---- events

    def nvmlEventSetCreate(self) -> Any:
        self._event_sets += 1
        return pynvml.c_nvmlEventSet_t()

    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetSupportedEventTypes")
        return pynvml.nvmlEventTypeXidCriticalError if gpu.events_supported else 0

    def nvmlDeviceRegisterEvents(self, handle: Any, types: int, event_set: Any) -> None:
        self._gpu(handle, "nvmlDeviceRegisterEvents")
        assert types & pynvml.nvmlEventTypeXidCriticalError
        self._registered.add(ctypes.cast(handle, ctypes.c_void_p).value or 0)

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> Any:
        assert timeout_ms == 0, "the agent must never block on events"
        while self._events:
            data = self._events.popleft()
            if (ctypes.cast(data.device, ctypes.c_void_p).value or 0) in self._registered:
                return data
        raise _error(pynvml.NVML_ERROR_TIMEOUT)

    def nvmlEventSetFree(self, event_set: Any) -> None:
        self._event_sets -= 1


# Device-level functions NVML refuses on a MIG device handle.
_DEVICE_ONLY = frozenset({"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage"})
