"""The short text summary `gpuledger demo` and `gpuledger attribute` print."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

__all__ = ["render_summary"]


def _h(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def render_summary(con: duckdb.DuckDBPyConnection, top: int = 5) -> str:
    """Cluster occupancy, idle GPU-hours, and the top idle users and jobs, as plain text."""
    from warehouse import queries

    lines = []
    clusters = queries.run(con, "dashboard/cluster_summary")
    if clusters.is_empty():
        return "No samples in the lake yet: nothing to summarise."
    for c in clusters.iter_rows(named=True):
        lines += [
            f"Cluster {c['cluster']}: {c['gpus_total']:.0f} GPUs, "
            # to the second: the last samples' intervals reach past the hour, and capacity is
            # GPUs × this span (256 GPUs × 168.01 h, not × 168 h)
            f"{c['data_start']:%Y-%m-%d %H:%M:%S} to {c['data_end']:%Y-%m-%d %H:%M:%S} UTC "
            f"({c['span_h']:,.2f} h), {c['jobs']:,} jobs",
            f"  occupancy (allocated / capacity)   {_pct(c['occupancy'])}",
            f"  allocated GPU-hours (observed)     {_h(c['allocated_gpu_h'])}"
            f"  of {_h(c['capacity_gpu_h'])} possible",
            f"  idle while allocated               {_h(c['idle_allocated_gpu_h'])} GPU-h"
            f"  ({_pct(c['idle_share_of_allocated'])} of allocated)",
            f"  effective GPU-hours                {_h(c['effective_gpu_h'])}"
            "  (busy × time: the GPUs' worth of work done)",
            f"  unallocated / unobserved           {_h(c['unallocated_gpu_h'])}"
            f" / {_h(c['unobserved_gpu_h'])} GPU-h",
            f"  energy                             {_h(c['energy_kwh'])} kWh",
        ]
        users = queries.run(
            con,
            "dashboard/top_users_by_idle",
            cluster=c["cluster"],
            start=None,
            end=None,
            limit=top,
        )
        lines.append(f"  top {top} users by idle GPU-hours:")
        for u in users.iter_rows(named=True):
            lines.append(
                f"    {u['user']:<12} {u['account']:<14} {u['idle_gpu_h']:>8,.0f} idle GPU-h"
                f"  of {u['alloc_gpu_h']:>8,.0f} allocated  (busy {_pct(u['busy_mean'])})"
            )
        jobs = queries.run(
            con, "dashboard/top_jobs_by_idle", cluster=c["cluster"], start=None, end=None, limit=top
        )
        lines.append(f"  top {top} jobs by idle GPU-hours:")
        for j in jobs.iter_rows(named=True):
            lines.append(
                f"    job {j['job_id']:<8} {j['user'] or '?':<12} {j['gpus'] or 0:>3} GPUs"
                f" {j['idle_gpu_h']:>8,.0f} idle GPU-h of {j['alloc_gpu_h']:>8,.0f}"
                f"  state {j['state'] or '?'}"
            )
    return "\n".join(lines)
