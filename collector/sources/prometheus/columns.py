"""Which `gpu_samples` columns a Prometheus pull fills, hence which DCGM families it asks for.

Every exporter family in `dcgm_exporter.fields.FIELDS` maps to a column, but not every column is
read by anything downstream: `READ_COLUMNS` are those the marts, views, detectors, reports and
dashboard read (named in sql/ outside sql/bench/, in detectors/ or app/), plus the columns the
collector turns into `gpu_events` (XID, ECC, row remaps, throttle reasons). A pull asks for the
families of these by default: the other four (SM occupancy, free framebuffer, memory
temperature, memory clock) stay null. tests/prometheus/test_columns.py keeps the list equal to
what the code reads.
"""

from __future__ import annotations

from typing import Final

from collector.errors import ConfigError
from collector.sources.dcgm_exporter.fields import FIELDS, METRIC_COLUMNS

__all__ = ["ALL_COLUMNS", "READ_COLUMNS", "families_of", "parse_columns"]

ALL_COLUMNS: Final = METRIC_COLUMNS
READ_COLUMNS: Final[tuple[str, ...]] = tuple(
    c
    for c in METRIC_COLUMNS
    if c not in {"sm_occupancy", "fb_free_mib", "mem_temp_c", "mem_clock_mhz"}
)


def parse_columns(text: str) -> tuple[str, ...]:
    """`read` (the default), `all` (every column a DCGM family maps to), or column names
    separated by commas (e.g. `gpu_util_pct,power_w,energy_j`). Raises ConfigError."""
    spec = text.strip()
    if spec == "read":
        return READ_COLUMNS
    if spec == "all":
        return ALL_COLUMNS
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in METRIC_COLUMNS]
    if unknown or not names:
        raise ConfigError(
            f"columns {text!r}: expected read, all, or gpu_samples metric columns separated by "
            f"commas; {', '.join(unknown) or 'none given'} is not one of: "
            + ", ".join(METRIC_COLUMNS)
        )
    return tuple(c for c in METRIC_COLUMNS if c in names)


def families_of(columns: tuple[str, ...]) -> frozenset[str]:
    """The exporter families (every generation's names) that land in `columns`."""
    wanted = set(columns)
    return frozenset(name for name, spec in FIELDS.items() if spec.column in wanted)
