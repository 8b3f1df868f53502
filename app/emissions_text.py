"""How a job's emissions read in words, in `gpuledger job` and on the dashboard's job page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["describe_emissions", "window_co2e_text"]


def describe_emissions(job: Mapping[str, Any]) -> str:
    """The job's kg CO2e (job_usage.kg_co2e), or why it is unknown, and the hours its
    cluster's hourly intensity CSV lacked (counted at the cluster's constant instead)."""
    kg = job.get("kg_co2e")
    if kg is None:
        why = (
            "no energy data"
            if job.get("energy_kwh") is None
            else "no carbon intensity configured for its cluster ([emissions])"
        )
        return f"Emissions: unknown ({why})"
    line = f"Emissions: {kg:.3f} kg CO2e"
    fallback = job.get("co2e_fallback_hours") or 0
    if fallback:
        hours = "hour" if fallback == 1 else "hours"
        line += f" ({fallback} {hours} not in the cluster's intensity CSV: its constant used)"
    return line


def window_co2e_text(row: Mapping[str, Any]) -> str:
    """The jobs' emissions on the UTC days a window touches (sql/dashboard/window_co2e.sql)."""
    days = f"{row['first_date']:%Y-%m-%d} to {row['last_date']:%Y-%m-%d}"
    if row.get("kg_co2e") is None:
        return (
            f"Emissions of the jobs' energy ({days}, whole UTC days): unknown, no carbon "
            "intensity configured ([emissions])"
        )
    return (
        f"Emissions of the jobs' {row['energy_kwh'] or 0:,.0f} kWh on {days} (whole UTC days): "
        f"{row['kg_co2e']:,.1f} kg CO2e"
    )
