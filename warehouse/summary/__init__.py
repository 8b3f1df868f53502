"""The summary marts (job_usage, job_outcomes, usage_daily, cluster_occupancy, fairness_weekly),
built whole or brought up to date from the day partitions of the sample-level marts.

`build_summary_marts` builds them whole. `refresh_summary_marts` compares the day partitions
of the sample-level marts and the scheduler's batch files (`jobs`, `job_gpus`) with the ones
the summary marts were last built from and, when only some days or scheduler batches changed
(and nothing else they read: the other raw tables, the SQL, the config), updates only the rows
they can touch. A late scheduler record — a batch new, rewritten (the Slurm collector closes
an allocation so) or removed — puts its jobs in scope and adds every day they held GPUs, ran or
had samples on, before and after (`sql/attribution/late_days.sql`), to the changed days:

- `usage_daily`: the (cluster, date) partitions of the changed days, and of the days between
  the old and the new end of the data (allocations still open run to it; where a cluster's
  data begins or ends, from its earliest open allocation's start);
- `job_usage`, `job_outcomes`: the jobs that had or have samples on those days, that hold an
  allocation overlapping them, or that are still running where the data's end moved —
  recomputed from all of their days, their shares of GPUs held by several jobs at once
  (`job_gpu_shares`) cut from every job's intervals on those GPUs, in scope or not;
- `cluster_occupancy`: the buckets of those days and of the days where the data's end moved,
  from the partials reaching them; every bucket where the data's start or device count moved;
- `fairness_weekly`: the weeks of those days and every week a job in scope spans (a job
  spanning weeks changes the weeks before the new day too), from every job reaching them;

and of the last two only the partitions whose rows changed are written.

Each is the mart's own SQL reading views restricted to the rows in scope, so there is one
definition per mart. `gpu_job_buckets`, which the summary marts read only for the data's
start, end and devices, is stood in for by a small per-day index kept in
`<lake>/_state/summary_index/` (`sql/attribution/summary_index.sql`). Anything unexpected —
no state, other raw tables or SQL changed, mart or index files changed by someone else,
sample files outside the partition layout — rebuilds them whole, as before.

The package, by what each module owns:

- `whole`: the summary marts, their whole build and row counts;
- `state`: what they were last built from (SQLite state, fingerprints) and why they are stale;
- `carry`: that state carried across the raw tables' compaction merges;
- `index`: the per-day index standing in for `gpu_job_buckets`, and the cached derived views;
- `scope`: the days, jobs and weeks an update puts in scope (late records included);
- `landing`: landing whole marts, changed date partitions, and merged per-job rows;
- `views`: standing Arrow tables and raw tables up as views in the update's engine;
- `update`: `refresh_summary_marts`, the in-place update (or whole rebuild).
"""

from warehouse.summary.landing import land_mart
from warehouse.summary.state import record_summary_state
from warehouse.summary.update import SummaryUpdate, refresh_summary_marts
from warehouse.summary.whole import SUMMARY_MARTS, build_summary_marts, mart_rows

__all__ = [
    "SUMMARY_MARTS",
    "SummaryUpdate",
    "build_summary_marts",
    "land_mart",
    "mart_rows",
    "record_summary_state",
    "refresh_summary_marts",
]
