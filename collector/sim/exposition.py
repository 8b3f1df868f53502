"""Render simulated `gpu_samples` rows as dcgm-exporter's /metrics text (or OpenMetrics history).

The exact shape of dcgm-exporter's output (reference/dcgm.md §1.4): one `# HELP`/`# TYPE` pair
per family, then one line per GPU with the labels in the exporter's order — `gpu`, `UUID`,
`pci_bus_id`, `device`, `modelName`, (`GPU_I_PROFILE`, `GPU_I_ID`), the host label, the driver
label, then attributes sorted (`err_code`, `err_msg`, `hpc_job`). INT64 fields print as `%d`,
DOUBLE fields as `%f`. `4.8` writes the ≤4.8 names and units with `Hostname`; `4.9` the renamed
fields in base units (Hz, J, bytes, ratio) with `hostname`. A null field is left out, as the
exporter does, except memory temperature on GDDR boards, which the exporter reports as 0.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "EXPORTER_VERSIONS",
    "FAMILIES",
    "ExporterVersion",
    "Family",
    "render_exposition",
    "render_openmetrics",
]

ExporterVersion = Literal["4.8", "4.9"]
EXPORTER_VERSIONS: Final = ("4.8", "4.9")
DRIVER_VERSION: Final = "570.133.20"
_MIB: Final = float(1 << 20)
# PCI bus numbers of the eight GPUs of an HGX H100 board, by device ordinal
_PCI_BUS: Final = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
# dcgm-exporter's err_msg for the XIDs the simulator raises (its table covers 0..172)
_XID_NAMES: Final = {
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
}


@dataclass(frozen=True, slots=True)
class Family:
    """One exported family: raw value = column value × `factor`, printed as `%d` or `%f`."""

    name: str
    type: str
    help: str
    column: str
    factor: float = 1.0
    integer: bool = True


def _families(version: ExporterVersion) -> tuple[Family, ...]:
    new = version == "4.9"

    def pick(old: str, renamed: str) -> str:
        return renamed if new else old

    prof = "DCGM_FI_PROF_"
    return (
        Family(
            pick("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_SM_CLOCK_HERTZ"),
            "gauge",
            f"SM clock frequency (in {pick('MHz', 'Hz')}).",
            "sm_clock_mhz",
            1e6 if new else 1.0,
        ),
        Family(
            pick("DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ"),
            "gauge",
            f"Memory clock frequency (in {pick('MHz', 'Hz')}).",
            "mem_clock_mhz",
            1e6 if new else 1.0,
        ),
        Family(
            pick("DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS"),
            "gauge",
            "Memory temperature (in C).",
            "mem_temp_c",
        ),
        Family(
            pick("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"),
            "gauge",
            "GPU temperature (in C).",
            "temp_c",
        ),
        Family(
            pick("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS"),
            "gauge",
            "Power draw (in W).",
            "power_w",
            integer=False,
        ),
        Family(
            pick("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL"),
            "counter",
            pick(
                "Total energy consumption since boot (in mJ).",
                "Total energy consumption since the driver was last reloaded (in J).",
            ),
            "energy_j",
            1.0 if new else 1000.0,
            integer=not new,
        ),
        Family(
            pick("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO"),
            "gauge",
            pick("GPU utilization (in %).", "GPU utilization (ratio 0-1)."),
            "gpu_util_pct",
            0.01 if new else 1.0,
            integer=not new,
        ),
        Family(
            pick("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR"),
            "gauge",
            "Value of the last XID error encountered.",
            "xid_last",
        ),
        Family(
            pick("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_FREE_BYTES"),
            "gauge",
            f"Framebuffer memory free (in {pick('MiB', 'bytes')}).",
            "fb_free_mib",
            _MIB if new else 1.0,
        ),
        Family(
            pick("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_USED_BYTES"),
            "gauge",
            f"Framebuffer memory used (in {pick('MiB', 'bytes')}).",
            "fb_used_mib",
            _MIB if new else 1.0,
        ),
        Family(
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
            "counter",
            "Total number of single-bit volatile ECC errors.",
            "ecc_sbe_volatile",
        ),
        Family(
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "counter",
            "Total number of double-bit volatile ECC errors.",
            "ecc_dbe_volatile",
        ),
        Family(
            "DCGM_FI_DEV_ROW_REMAP_PENDING",
            "gauge",
            "Whether remapping of rows is pending.",
            "remap_pending",
        ),
        Family(
            pick("DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILED"),
            "gauge",
            "Whether remapping of rows has failed",
            "remap_failure",
        ),
        Family(
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
            "gauge",
            "Current clock event reasons (bitmask).",
            "clock_event_reasons",
        ),
        Family(
            prof + pick("GR_ENGINE_ACTIVE", "GR_ENGINE_UTIL_RATIO"),
            "gauge",
            "Ratio of time the graphics engine is active.",
            "engine_active",
            integer=False,
        ),
        Family(
            prof + pick("SM_ACTIVE", "SM_UTIL_RATIO"),
            "gauge",
            "The ratio of cycles an SM has at least 1 warp assigned.",
            "sm_active",
            integer=False,
        ),
        Family(
            prof + pick("SM_OCCUPANCY", "SM_OCCUPANCY_RATIO"),
            "gauge",
            "The ratio of number of warps resident on an SM.",
            "sm_occupancy",
            integer=False,
        ),
        Family(
            prof + pick("PIPE_TENSOR_ACTIVE", "TENSOR_UTIL_RATIO"),
            "gauge",
            "Ratio of cycles the tensor (HMMA) pipe is active.",
            "tensor_active",
            integer=False,
        ),
        Family(
            prof + pick("DRAM_ACTIVE", "DRAM_UTIL_RATIO"),
            "gauge",
            "Ratio of cycles the device memory interface is active sending or receiving data.",
            "dram_active",
            integer=False,
        ),
        *(
            Family(
                f"{prof}{bus}_{way}_BYTES",
                "gauge",
                f"The rate of data {verb} over the {bus_name} - including both protocol "
                "headers and data payloads - in bytes per second.",
                f"{bus.lower()}_{way.lower()}_bps",
                integer=False,
            )
            for bus, bus_name in (("PCIE", "PCIe bus"), ("NVLINK", "NVLink"))
            for way, verb in (("TX", "transmitted"), ("RX", "received"))
        ),
    )


FAMILIES: Final[dict[str, tuple[Family, ...]]] = {v: _families(v) for v in ("4.8", "4.9")}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _base_labels(row: dict[str, object], version: ExporterVersion, driver: str) -> str:
    index = int(row["gpu_index"] or 0)  # type: ignore[call-overload]
    bus = _PCI_BUS[index % len(_PCI_BUS)] + 0x100 * (index // len(_PCI_BUS))
    labels = [
        f'gpu="{index}"',
        f'UUID="{row["gpu_uuid"]}"',
        f'pci_bus_id="00000000:{bus:02X}:00.0"',
        f'device="nvidia{index}"',
        f'modelName="{_escape(str(row["model"]))}"',
    ]
    if row.get("mig_instance") is not None:
        labels += [f'GPU_I_PROFILE="{row["mig_profile"]}"', f'GPU_I_ID="{row["mig_instance"]}"']
    host = "hostname" if version == "4.9" else "Hostname"
    driver_label = "DCGM_FI_SYSTEM_DRIVER_VERSION" if version == "4.9" else "DCGM_FI_DRIVER_VERSION"
    labels += [f'{host}="{_escape(str(row["node"]))}"', f'{driver_label}="{driver}"']
    return ",".join(labels)


def _value(family: Family, value: object) -> str | None:
    if value is None:
        return "0" if family.column == "mem_temp_c" else None  # GDDR: the exporter says 0
    number = float(value) * family.factor  # type: ignore[arg-type]
    return f"{round(number)}" if family.integer else f"{number:f}"


def _attributes(family: Family, row: dict[str, object]) -> str:
    extra = []
    if family.column == "xid_last":
        code = int(row["xid_last"] or 0)  # type: ignore[call-overload]
        extra += [f'err_code="{code}"', f'err_msg="{_XID_NAMES.get(code, "Unknown Error")}"']
    if row.get("hpc_job"):
        extra.append(f'hpc_job="{_escape(str(row["hpc_job"]))}"')
    return "".join(f",{label}" for label in extra)


def render_exposition(
    samples: pa.Table, *, version: ExporterVersion = "4.8", driver: str = DRIVER_VERSION
) -> str:
    """One scrape of /metrics for `samples` (one row per GPU), families in the exporter's order."""
    rows = samples.to_pylist()
    bases = [_base_labels(row, version, driver) for row in rows]
    out: list[str] = []
    for family in FAMILIES[version]:
        lines = []
        for row, base in zip(rows, bases, strict=True):
            value = _value(family, row.get(family.column))
            if value is not None:
                lines.append(f"{family.name}{{{base}{_attributes(family, row)}}} {value}")
        if lines:
            out += [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} {family.type}"]
            out += lines
    return "\n".join(out) + "\n"


def render_openmetrics(
    samples: pa.Table,
    *,
    version: ExporterVersion = "4.8",
    driver: str = DRIVER_VERSION,
    extra_labels: Sequence[tuple[str, str]] = (),
    families: Sequence[str] | None = None,
) -> Iterator[str]:
    """`samples` as OpenMetrics text with timestamps, for `promtool tsdb create-blocks-from`.

    Each family (all of `version`'s, or those named in `families`) is contiguous with one
    `# TYPE` (`gauge`: OpenMetrics wants `_total` on counters, which dcgm-exporter's names
    lack); within it each series' samples are contiguous and in time order (a job label or an
    XID changing starts a new series); timestamps are in seconds; the text ends with `# EOF`.
    `extra_labels` (e.g. `instance`, `job`) stand in for what Prometheus adds at scrape time.
    """
    identity = ("gpu_index", "gpu_uuid", "model", "mig_instance", "mig_profile", "node")
    rows = samples.select([c for c in identity if c in samples.column_names])
    extra = "".join(f',{k}="{_escape(v)}"' for k, v in extra_labels)
    bases = [_base_labels(row, version, driver) + extra for row in rows.to_pylist()]
    jobs = [f',hpc_job="{_escape(j)}"' if j else "" for j in samples.column("hpc_job").to_pylist()]
    seconds = pc.divide(pc.cast(samples.column("ts"), pa.int64()), 1000.0).to_pylist()
    chosen = [f for f in FAMILIES[version] if families is None or f.name in families]
    for family in chosen:
        values = samples.column(family.column).to_pylist()
        lines: list[tuple[str, float, str]] = []
        for i, raw in enumerate(values):
            value = _value(family, raw)
            if value is None:
                continue
            labels = bases[i]
            if family.column == "xid_last":
                labels += _attributes(family, {"xid_last": raw})
            lines.append((labels + jobs[i], seconds[i], value))
        lines.sort(key=lambda line: (line[0], line[1]))
        yield f"# HELP {family.name} {family.help}\n# TYPE {family.name} gauge\n"
        for start in range(0, len(lines), 50_000):
            yield "".join(
                f"{family.name}{{{labels}}} {value} {ts:.3f}\n"
                for labels, ts, value in lines[start : start + 50_000]
            )
    yield "# EOF\n"
