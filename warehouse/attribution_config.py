"""`AttributionConfig`: the settings of DESIGN §4's attribution, by the `$param` names the mart
SQL binds them as.

Apart from warehouse/attribution.py (which builds the marts, and loads pyarrow with the
per-day pass) so that loading a configuration, whose `[attribute]` table is checked against
these fields, loads no more than it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from warehouse import queries
from warehouse.emissions import CarbonIntensity

if TYPE_CHECKING:
    import duckdb

__all__ = ["AttributionConfig"]


@dataclass(frozen=True, slots=True)
class AttributionConfig:
    """Thresholds of DESIGN §4: idle below `idle_below` busy, 5-minute occupancy buckets; a job
    below `low_efficiency_below` mean busy counts as low-efficiency in `fairness_weekly`.
    `emissions`: each cluster's carbon intensity (`[emissions]`), which only the summary marts
    read (kg_co2e); it is not one of `values()`, so changing it never rebuilds the day
    partitions of the sample-level marts."""

    idle_below: float = 0.01
    bucket_s: int = 300
    hw_event_grace_s: int = 300
    low_efficiency_below: float = 0.25
    emissions: CarbonIntensity = field(default_factory=CarbonIntensity)

    def values(self) -> dict[str, float | int]:
        """Every value by the `$param` name the mart SQL binds it as."""
        return {
            "idle_below": self.idle_below,
            "bucket_s": self.bucket_s,
            "grace_s": self.hw_event_grace_s,
            "low_eff_below": self.low_efficiency_below,
        }

    def params(self, query: str, con: duckdb.DuckDBPyConnection) -> dict[str, float | int]:
        """The subset of this config's values that `query` binds."""
        wanted = queries.parameters(con, query)
        return {k: v for k, v in self.values().items() if k in wanted}
