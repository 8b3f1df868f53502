"""The lake's consistency audit: every figure bounded by the facts (`gpuledger check`).

Each check is one SQL file under `sql/check/` returning one row per violation (`cluster`,
`subject`, `detail`); an empty result means the check holds. The same files are run by the
command and by the tests, so what the tests guarantee is what an operator can verify on any
lake:

- `job_gpu_hours`: a job finding's GPU-hours at stake, and a job's allocated or observed
  GPU-hours in job_usage, never exceed the GPUs of the job's nodes × the job's time inside
  the data (a running job ends at the end of the data, never at the wall clock);
- `observed_within_held`: no recorded job is observed longer than it held its GPUs (the
  samples' owners and the allocations agree);
- `owner_gpu_hours`: a user's or account's finding never exceeds its allocated GPU-hours;
- `hardware_gpu_hours`: a GPU's or node's finding never exceeds its GPUs × the data's span;
- `findings_in_data`: no finding begins or ends after the end of its cluster's data;
- `mart_occupancy`, `mart_totals`: the marts still split and add up the GPU time exactly;
- `throughput_bounded`: no job's reported parameters × tokens/s claim more FLOP/s than its GPUs'
  peak (such a job has no MFU in job_usage: the counts it reported are wrong).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["CHECKS", "Violation", "run_checks"]

# Every check's query (one SQL file under sql/check/), in the order they run; a check's name is
# its file name.
QUERIES: tuple[str, ...] = (
    "check/job_gpu_hours",
    "check/observed_within_held",
    "check/owner_gpu_hours",
    "check/hardware_gpu_hours",
    "check/findings_in_data",
    "check/mart_occupancy",
    "check/mart_totals",
    "check/throughput_bounded",
)
CHECKS: tuple[str, ...] = tuple(q.removeprefix("check/") for q in QUERIES)


@dataclass(frozen=True, slots=True)
class Violation:
    """One row a check found: which check, on which cluster, about what, and why."""

    check: str
    cluster: str
    subject: str
    detail: str

    def line(self) -> str:
        """The violation as one line: `check [cluster] subject: detail`."""
        return f"{self.check} [{self.cluster}] {self.subject}: {self.detail}"


def run_checks(con: duckdb.DuckDBPyConnection, checks: tuple[str, ...] = CHECKS) -> list[Violation]:
    """Run `checks` over the lake behind `con` (a `warehouse.connection.connect` connection);
    return every violation, check by check (none: the lake is consistent)."""
    found: list[Violation] = []
    for check in checks:
        rows = queries.run(con, f"check/{check}")
        found.extend(
            Violation(check, str(r["cluster"]), str(r["subject"]), str(r["detail"]))
            for r in rows.iter_rows(named=True)
        )
    return found
