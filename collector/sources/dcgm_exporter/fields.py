"""dcgm-exporter metric names of every generation → `gpu_samples` columns, units and validity.

One alias table maps the 1.x names, the ≤4.8 names and the ≥4.9/4.10 renamed names (DESIGN §3.1,
reference/dcgm.md §1.8) onto the contract's columns, with the factor that brings each to the
contract's unit. `convert` turns one exposition value token into a typed cell or a reason it is
null (DCGM sentinels, `ERROR - FAILED TO CONVERT TO STRING`, NaN, out of range). `identify` turns a
series' labels into the GPU it describes. Shared by the exporter scraper and the Prometheus puller.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

import pyarrow as pa

from warehouse.schema import RAW_TABLES

__all__ = [
    "FIELDS",
    "METRIC_COLUMNS",
    "Cell",
    "FieldSpec",
    "Series",
    "Value",
    "convert",
    "identify",
    "read_number",
    "scale",
]

_MIB: Final = float(1 << 20)
_HZ_PER_MHZ: Final = 1e6
_MJ_PER_J: Final = 1e3

Generation = Literal["1.x", "<=4.8", ">=4.9", ">=4.10"]


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """Where one exporter metric lands: `column` = raw × `multiply` / `divide` (column's unit).

    Dividing (not multiplying by a reciprocal) keeps mJ → J exact to the last digit.
    `zero_is_null`: 0 means "not supported" rather than a reading (MEMORY_TEMP on GDDR boards).
    """

    column: str
    multiply: float = 1.0
    divide: float = 1.0
    generation: Generation = "<=4.8"
    zero_is_null: bool = False


def _g48(column: str, *, divide: float = 1.0, zero_is_null: bool = False) -> FieldSpec:
    return FieldSpec(column, 1.0, divide, "<=4.8", zero_is_null)


def _g49(
    column: str, *, multiply: float = 1.0, divide: float = 1.0, zero_is_null: bool = False
) -> FieldSpec:
    return FieldSpec(column, multiply, divide, ">=4.9", zero_is_null)


def _g410(column: str) -> FieldSpec:
    return FieldSpec(column, generation=">=4.10")


def _g1x(column: str, *, divide: float = 1.0, zero_is_null: bool = False) -> FieldSpec:
    return FieldSpec(column, 1.0, divide, "1.x", zero_is_null)


# Exporter metric name → column. Names not listed here are counted as `unknown_metric` and ignored
# (MEM_COPY_UTIL, FB_RESERVED, PCIE_REPLAY_COUNTER, DCGM_EXP_*, … have no column in the contract).
FIELDS: Final[Mapping[str, FieldSpec]] = {
    # ---- ≤4.8 names (shipped default-counters.csv and commonly added rows; dcgm.md §1.2) ----
    "DCGM_FI_DEV_GPU_UTIL": _g48("gpu_util_pct"),  # % 0–100
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": _g48("engine_active"),  # ratio 0–1 (HELP may say "%")
    "DCGM_FI_PROF_SM_ACTIVE": _g48("sm_active"),
    "DCGM_FI_PROF_SM_OCCUPANCY": _g48("sm_occupancy"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": _g48("tensor_active"),
    "DCGM_FI_PROF_DRAM_ACTIVE": _g48("dram_active"),
    "DCGM_FI_DEV_FB_USED": _g48("fb_used_mib"),  # MiB
    "DCGM_FI_DEV_FB_FREE": _g48("fb_free_mib"),
    "DCGM_FI_DEV_POWER_USAGE": _g48("power_w"),  # W
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": _g48("energy_j", divide=_MJ_PER_J),  # mJ → J
    "DCGM_FI_DEV_GPU_TEMP": _g48("temp_c"),
    "DCGM_FI_DEV_MEMORY_TEMP": _g48("mem_temp_c", zero_is_null=True),  # 0 on GDDR = unsupported
    "DCGM_FI_DEV_SM_CLOCK": _g48("sm_clock_mhz"),  # MHz
    "DCGM_FI_DEV_MEM_CLOCK": _g48("mem_clock_mhz"),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": _g48("clock_event_reasons"),  # bitmask
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": _g48("clock_event_reasons"),  # its pre-rename name
    "DCGM_FI_PROF_PCIE_TX_BYTES": _g48("pcie_tx_bps"),  # a rate in B/s despite the name
    "DCGM_FI_PROF_PCIE_RX_BYTES": _g48("pcie_rx_bps"),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": _g48("nvlink_tx_bps"),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": _g48("nvlink_rx_bps"),
    "DCGM_FI_DEV_XID_ERRORS": _g48("xid_last"),  # last XID code, sticky — never a count
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": _g48("ecc_sbe_volatile"),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": _g48("ecc_dbe_volatile"),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": _g48("remap_pending"),  # 0/1
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": _g48("remap_failure"),
    # ---- ≥4.9 (DCGM 4.7 names) and ≥4.10 renames (dcgm.md §1.8) ----
    # Canonical in fixtures/dcgm-exporter/dcgm_4.6.0_field_ids.csv (ids 1001–1005, 140, 150, 155,
    # 203, 230, 395): the 4.9 release renamed the exporter's rows to these canonical names.
    "DCGM_FI_DEV_GPU_UTIL_RATIO": _g49("gpu_util_pct", multiply=100.0),  # ratio 0–1 → %
    "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO": _g49("engine_active"),
    "DCGM_FI_PROF_SM_UTIL_RATIO": _g49("sm_active"),
    "DCGM_FI_PROF_SM_OCCUPANCY_RATIO": _g49("sm_occupancy"),
    "DCGM_FI_PROF_TENSOR_UTIL_RATIO": _g49("tensor_active"),
    "DCGM_FI_PROF_DRAM_UTIL_RATIO": _g49("dram_active"),
    "DCGM_FI_DEV_BOARD_POWER_WATTS": _g49("power_w"),
    "DCGM_FI_DEV_GPU_TEMP_CELSIUS": _g49("temp_c"),
    "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS": _g49("mem_temp_c", zero_is_null=True),
    "DCGM_FI_DEV_XID_ERROR": _g49("xid_last"),
    "DCGM_FI_DEV_ROW_REMAP_FAILED": _g49("remap_failure"),
    # UNCERTAIN: not in the 4.6 id CSV (DCGM 4.6 still names fields 100/101/156/251/252 in MHz,
    # mJ and MiB). Derived from the naming standard (`_HERTZ`, `_JOULES…_TOTAL`, `_BYTES`) and
    # matching the DCGM 4.7 base-unit field ids 1603 (SM_CLOCK_HERTZ), 1604 (MEMORY_CLOCK_HERTZ),
    # 1611 (GPU_ENERGY_JOULES_TOTAL), 1626/1627 (FB_FREE/USED_BYTES) as go-dcgm names them.
    # Verify against the HELP lines of a real 4.9 scrape (dcgm.md §8).
    "DCGM_FI_DEV_SM_CLOCK_HERTZ": _g49("sm_clock_mhz", divide=_HZ_PER_MHZ),  # Hz → MHz
    "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ": _g49("mem_clock_mhz", divide=_HZ_PER_MHZ),
    "DCGM_FI_DEV_MEM_CLOCK_HERTZ": _g49("mem_clock_mhz", divide=_HZ_PER_MHZ),  # defensive spelling
    "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL": _g49("energy_j"),  # J
    "DCGM_FI_DEV_FB_USED_BYTES": _g49("fb_used_mib", divide=_MIB),  # bytes → MiB
    "DCGM_FI_DEV_FB_FREE_BYTES": _g49("fb_free_mib", divide=_MIB),
    # 4.10: PCIe/NVLink rates gained the unit in their name; still bytes per second.
    "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND": _g410("pcie_tx_bps"),
    "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND": _g410("pcie_rx_bps"),
    "DCGM_FI_PROF_NVLINK_TX_BYTES_PER_SECOND": _g410("nvlink_tx_bps"),
    "DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND": _g410("nvlink_rx_bps"),
    # ---- 1.x names (1.x-compatibility-metrics.csv, `-o`), ≤4.8 units ----
    "dcgm_gpu_utilization": _g1x("gpu_util_pct"),
    "dcgm_fi_prof_gr_engine_active": _g1x("engine_active"),
    "dcgm_fi_prof_sm_active": _g1x("sm_active"),
    "dcgm_fi_prof_sm_occupancy": _g1x("sm_occupancy"),
    "dcgm_fi_prof_pipe_tensor_active": _g1x("tensor_active"),
    "dcgm_fi_prof_dram_active": _g1x("dram_active"),
    "dcgm_fb_used": _g1x("fb_used_mib"),
    "dcgm_fb_free": _g1x("fb_free_mib"),
    "dcgm_power_usage": _g1x("power_w"),
    "dcgm_total_energy_consumption": _g1x("energy_j", divide=_MJ_PER_J),
    "dcgm_gpu_temp": _g1x("temp_c"),
    "dcgm_memory_temp": _g1x("mem_temp_c", zero_is_null=True),
    "dcgm_sm_clock": _g1x("sm_clock_mhz"),
    "dcgm_memory_clock": _g1x("mem_clock_mhz"),
    "dcgm_fi_prof_pcie_tx_bytes": _g1x("pcie_tx_bps"),
    "dcgm_fi_prof_pcie_rx_bytes": _g1x("pcie_rx_bps"),
    "dcgm_xid_errors": _g1x("xid_last"),
    "dcgm_ecc_sbe_volatile_total": _g1x("ecc_sbe_volatile"),
    "dcgm_ecc_dbe_volatile_total": _g1x("ecc_dbe_volatile"),
}

_SAMPLES = RAW_TABLES["gpu_samples"].schema
METRIC_COLUMNS: Final[tuple[str, ...]] = tuple(dict.fromkeys(s.column for s in FIELDS.values()))

Kind = Literal["float", "int", "bool"]


def _kind(t: pa.DataType) -> Kind:
    if pa.types.is_boolean(t):
        return "bool"
    return "int" if pa.types.is_integer(t) else "float"


_KIND: Final[dict[str, Kind]] = {c: _kind(_SAMPLES.field(c).type) for c in METRIC_COLUMNS}
_INT_MAX: Final[dict[str, int]] = {
    c: (1 << (_SAMPLES.field(c).type.bit_width - 1)) - 1
    for c in METRIC_COLUMNS
    if _KIND[c] == "int"
}
# Plausible range of each column in its contract unit; outside it the value is null and counted.
# Ratios may overshoot 1 a little (dcgm.md §6 filters ratios outside [0, 1.05]).
_RANGE: Final[dict[str, tuple[float, float]]] = {
    "gpu_util_pct": (0.0, 105.0),
    "engine_active": (0.0, 1.05),
    "sm_active": (0.0, 1.05),
    "sm_occupancy": (0.0, 1.05),
    "tensor_active": (0.0, 1.05),
    "dram_active": (0.0, 1.05),
    "temp_c": (0.0, 200.0),  # NVML reports unsigned °C
    "mem_temp_c": (0.0, 200.0),
    "remap_pending": (0.0, 1.0),
    "remap_failure": (0.0, 1.0),
}
_FLOAT32_MAX: Final = 3.4e38

# DCGM blank values (dcgm_structs.h): INT32 0x7ffffff0+0..3, INT64 0x7ffffffffffffff0+0..3, and
# any FP64 ≥ 2^47 (DCGM_FP64_IS_BLANK). Only the exact INT32 values count: byte-valued INT64
# fields (≥4.9 FB_*_BYTES) legitimately exceed 2^31.
_INT32_BLANK: Final = range(0x7FFFFFF0, 0x7FFFFFF4)
_INT64_BLANK: Final = range(0x7FFFFFFFFFFFFFF0, 0x7FFFFFFFFFFFFFF4)
_FP64_BLANK: Final = float(1 << 47)
_STRING_BLANKS: Final = frozenset(
    {"<<<NULL>>>", "<<<NOT_FOUND>>>", "<<<NOT_SUPPORTED>>>", "<<<NOT_PERM>>>"}
)
_NUMBER: Final = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_NON_FINITE: Final = frozenset({"nan", "+nan", "-nan", "inf", "+inf", "-inf"})

Value = float | int | bool


@dataclass(frozen=True, slots=True)
class Cell:
    """One converted value (`value`), or why there is none (`reason`, e.g. 'sentinel')."""

    value: Value | None
    reason: str | None = None


def read_number(token: str) -> float | str:
    """The number a value token holds, or why it holds none (whatever metric it belongs to).

    Reasons: `conversion_error` (the exporter's `ERROR - FAILED TO CONVERT TO STRING`),
    `sentinel` (DCGM blank values, numeric or `<<<NOT_SUPPORTED>>>`-style), `not_finite` (NaN,
    ±Inf, literals too large for a double), `not_a_number`.
    """
    if not _NUMBER.fullmatch(token):
        if token.startswith("ERROR"):
            return "conversion_error"
        if token in _STRING_BLANKS:
            return "sentinel"
        if token.lower() in _NON_FINITE:
            return "not_finite"
        return "not_a_number"
    # Exact integer sentinels are checked on the text: as floats they are not exact.
    if (len(token) == 10 and token.isdigit() and int(token) in _INT32_BLANK) or (
        len(token) == 19 and token.isdigit() and int(token) in _INT64_BLANK
    ):
        return "sentinel"
    raw = float(token)  # float() of a huge literal gives inf, never an error
    if not math.isfinite(raw):
        return "not_finite"
    if abs(raw) >= _FP64_BLANK:  # a huge negative is as much garbage as a blank
        return "sentinel"
    return raw


def scale(spec: FieldSpec, raw: float) -> Cell:
    """Bring `raw` (as the exporter wrote it) to `spec.column`'s unit and type.

    Null reasons: `out_of_range` (negative, implausible, not an integer where one is expected, a
    boolean other than 0/1) and `zero_means_unsupported`.
    """
    if raw == 0 and spec.zero_is_null:
        return Cell(None, "zero_means_unsupported")
    value = raw * spec.multiply / spec.divide
    low, high = _RANGE.get(spec.column, (0.0, _FLOAT32_MAX))
    if not low <= value <= high:
        return Cell(None, "out_of_range")
    kind = _KIND[spec.column]
    if kind == "float":
        return Cell(value)
    if not value.is_integer():
        return Cell(None, "out_of_range")
    if kind == "bool":
        return Cell(value == 1.0)
    if value > _INT_MAX[spec.column]:
        return Cell(None, "out_of_range")
    return Cell(int(value))


def convert(spec: FieldSpec, token: str) -> Cell:
    """`read_number` then `scale`: one value token to a typed cell, or the reason it is null."""
    raw = read_number(token)
    return Cell(None, raw) if isinstance(raw, str) else scale(spec, raw)


@dataclass(frozen=True, slots=True)
class Series:
    """The GPU (or MIG instance) a series describes, and the attribution hints it carries."""

    gpu_uuid: str
    mig_instance: int | None
    mig_profile: str | None
    gpu_index: int | None
    node: str
    model: str | None
    hpc_job: str | None
    k8s_namespace: str | None
    k8s_pod: str | None
    k8s_container: str | None
    err_msg: str | None  # on XID series only


_INT16_MAX: Final = (1 << 15) - 1
# Kubernetes label families, most specific first: with Prometheus `honorLabels: false` the
# exporter's pod labels are renamed `exported_*` (the bare ones then name the exporter's own pod);
# `-o` (1.x namespace) writes pod_name/pod_namespace/container_name.
_POD_FAMILIES: Final = (
    ("exported_namespace", "exported_pod", "exported_container"),
    ("namespace", "pod", "container"),
    ("pod_namespace", "pod_name", "container_name"),
)


def _text(labels: Mapping[str, str], *names: str) -> str | None:
    """The first non-empty value among `names` (old exporters write `pod=""` for none)."""
    for name in names:
        value = labels.get(name, "").strip()
        if value:
            return value
    return None


def _small_int(raw: str | None) -> int | None:
    """An int16 label value (`gpu`, `GPU_I_ID`), or None when absent or not a small integer."""
    if raw is None or not (raw.isascii() and raw.isdigit()) or len(raw) > 5:
        return None
    value = int(raw)
    return value if value <= _INT16_MAX else None


def identify(labels: Mapping[str, str], default_node: str | None = None) -> Series | str:
    """Return the series' GPU, or the reason it cannot be placed.

    Reasons: `no_gpu_uuid` (no `UUID`/`uuid` label), `no_node` (no `hostname`/`Hostname` label and
    no `default_node`), `malformed_labels` (a `GPU_I_ID` that is not a small integer).
    """
    uuid = _text(labels, "UUID", "uuid")
    if uuid is None:
        return "no_gpu_uuid"
    # `hostname` since exporter 4.8.3 (PR #655), `Hostname` before.
    node = _text(labels, "hostname", "Hostname") or default_node
    if not node:
        return "no_node"
    raw_gi = _text(labels, "GPU_I_ID")
    mig_instance = _small_int(raw_gi)
    if raw_gi is not None and mig_instance is None:
        return "malformed_labels"
    pod: tuple[str | None, ...] = (None, None, None)
    for family in _POD_FAMILIES:
        if any(name in labels for name in family):
            pod = tuple(_text(labels, name) for name in family)
            break
    return Series(
        gpu_uuid=uuid,
        mig_instance=mig_instance,
        mig_profile=_text(labels, "GPU_I_PROFILE") if mig_instance is not None else None,
        gpu_index=_small_int(_text(labels, "gpu")),
        node=node,
        model=_text(labels, "modelName"),
        hpc_job=_text(labels, "hpc_job"),
        k8s_namespace=pod[0],
        k8s_pod=pod[1],
        k8s_container=pod[2],
        err_msg=_text(labels, "err_msg"),
    )
