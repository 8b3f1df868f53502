"""The `[emissions]` table: each cluster's carbon intensity, in grams of CO2e per kWh.

    [emissions]
    default_g_per_kwh = 400            # every cluster not listed below (optional)

    [emissions.clusters.della]
    g_per_kwh = 380                    # a constant ...
    csv = "intensity/della.csv"        # ... and/or hourly values: hour_start_utc,g_per_kwh

A CSV path is relative to the configuration file's folder. The hours a cluster's CSV lacks
are counted at its `g_per_kwh`, else at `default_g_per_kwh` (one of them is required with a
CSV), and counted in job_usage.co2e_fallback_hours. Only the default has an environment
override (GPULEDGER_EMISSIONS_DEFAULT_G_PER_KWH): cluster names are not stable variable names.
The intensity reaches the summary marts in `AttributionConfig.emissions` (warehouse/emissions.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.config import ConfigError, convert_setting, env_name, register_table_section, show_value
from warehouse.emissions import (
    MOST_G_PER_KWH,
    CarbonIntensity,
    ClusterIntensity,
    IntensityCsvError,
    parse_intensity_csv,
)

__all__ = ["ENV_VARIABLES", "EmissionsSettings", "load_emissions"]

_TOP_KEYS = ("default_g_per_kwh", "clusters")
# The table's only environment override.
ENV_VARIABLES = (env_name("emissions", "default_g_per_kwh"),)
_CLUSTER_KEYS = ("g_per_kwh", "csv")


@dataclass(frozen=True, slots=True)
class EmissionsSettings:
    """The `[emissions]` table, read: the intensity and where each key came from."""

    intensity: CarbonIntensity = field(default_factory=CarbonIntensity)
    sources: Mapping[str, str] = field(default_factory=dict)

    def effective(self) -> Iterator[tuple[str, str, str]]:
        """(key, printable value, source) of every key `config check` shows."""
        key = "emissions.default_g_per_kwh"
        default = self.intensity.default_g_per_kwh
        shown = "(unset)" if default is None else repr(default)
        yield key, shown, self.sources.get(key, "default")
        for c in self.intensity.clusters:
            name = f"emissions.clusters.{c.cluster}"
            if c.g_per_kwh is not None:
                yield f"{name}.g_per_kwh", repr(c.g_per_kwh), self.sources[f"{name}.g_per_kwh"]
            if c.csv is not None:
                yield f"{name}.csv", _describe_csv(c), self.sources[f"{name}.csv"]


def _describe_csv(c: ClusterIntensity) -> str:
    """The CSV's path, its hours and their span, as `config check` prints it."""
    if not c.hours:
        return f"{show_value(c.csv)} (no hours)"
    first, last = (dt.datetime.fromtimestamp(h, dt.UTC) for h in (c.hours[0][0], c.hours[-1][0]))
    return (
        f"{show_value(c.csv)} ({len(c.hours):,} hours, "
        f"{first:%Y-%m-%dT%H:%MZ} to {last:%Y-%m-%dT%H:%MZ})"
    )


def _grams(key: str, raw: Any, from_env: bool, source: str) -> float:
    """A g CO2e/kWh value: a non-negative number; ConfigError names the key."""
    try:
        value = float(convert_setting(float, raw, from_env))
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc} ({source})") from None
    if not 0 <= value <= MOST_G_PER_KWH:  # (NaN too)
        raise ConfigError(
            f"{key}: expected a number of g CO2e per kWh from 0 to {MOST_G_PER_KWH:,.0f}, got "
            f"{value!r} ({source})"
        )
    return value


def _read_csv(
    key: str, raw: Any, base: Path, source: str
) -> tuple[str, tuple[tuple[int, float], ...]]:
    """The CSV's path (as resolved) and its hours; ConfigError names the key and the line."""
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(f"{key}: expected the path of a CSV file, got {raw!r} ({source})")
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = base / path
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"{key}: cannot read {str(path)!r} ({why}) ({source})") from None
    try:
        return str(path), parse_intensity_csv(text)
    except IntensityCsvError as exc:
        raise ConfigError(f"{key}: {str(path)!r} {exc} ({source})") from None


def load_emissions(table: dict[str, Any], env: Mapping[str, str], where: str) -> EmissionsSettings:
    """Load `[emissions]` and its `[emissions.clusters.<name>]` tables, reading every CSV."""
    [default_var] = ENV_VARIABLES
    prefix = env_name("emissions", "")
    for var in env:
        if var.startswith(prefix) and var != default_var:
            raise ConfigError(
                f"{var}: no such setting in [emissions] (a typo?); only {default_var} "
                "(cluster intensities are set in the file)"
            )
    for key in table:
        if key not in _TOP_KEYS:
            raise ConfigError(
                f"emissions.{key}: unknown key {where}; known: {', '.join(_TOP_KEYS)}"
            )
    file_source = f"file {where[3:]}"
    base = Path(where[3:]).parent if where else Path.cwd()
    sources: dict[str, str] = {}
    default: float | None = None
    key = "emissions.default_g_per_kwh"
    if default_var in env:
        sources[key] = f"env {default_var}"
        default = _grams(key, env[default_var], True, sources[key])
    elif "default_g_per_kwh" in table:
        sources[key] = file_source
        default = _grams(key, table["default_g_per_kwh"], False, file_source)
    clusters_table = table.get("clusters", {})
    if not isinstance(clusters_table, dict):
        raise ConfigError(
            f"emissions.clusters: expected tables ([emissions.clusters.<name>]) {where}"
        )
    clusters = []
    for name, entry in clusters_table.items():
        full = f"emissions.clusters.{name}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{full}: expected a table ([{full}]) {where}")
        for k in entry:
            if k not in _CLUSTER_KEYS:
                raise ConfigError(
                    f"{full}.{k}: unknown key {where}; known: {', '.join(_CLUSTER_KEYS)}"
                )
        if not entry:
            raise ConfigError(f"{full}: expected g_per_kwh or csv (or both) {where}")
        grams = None
        if "g_per_kwh" in entry:
            grams = _grams(f"{full}.g_per_kwh", entry["g_per_kwh"], False, file_source)
            sources[f"{full}.g_per_kwh"] = file_source
        csv_path: str | None = None
        hours: tuple[tuple[int, float], ...] = ()
        if "csv" in entry:
            csv_path, hours = _read_csv(f"{full}.csv", entry["csv"], base, file_source)
            sources[f"{full}.csv"] = file_source
            if grams is None and default is None:
                raise ConfigError(
                    f"{full}: a csv needs g_per_kwh (or [emissions] default_g_per_kwh) for the "
                    f"hours it lacks {where}"
                )
        clusters.append(ClusterIntensity(str(name), grams, csv_path, hours))
    return EmissionsSettings(CarbonIntensity(default, tuple(clusters)), sources)


register_table_section("emissions", load_emissions)
