-- top_jobs_by_idle: the jobs that left the most allocated GPU-hours idle.
--
-- Grain:   one row per (cluster, job_id)
-- Reads:   job_usage
-- Params:
--   $cluster  the cluster to rank, or NULL for every cluster
--   $start    only jobs running after this, or starting at or after it (one that ran before and ended at it ran none of the window) (TIMESTAMP WITH TIME ZONE), or NULL
--   $end      only jobs started before this, or NULL
--   $limit    how many jobs to return
-- Returns: cluster, job_id, user, account, state, gpus, alloc_gpu_h, idle_gpu_h, busy_mean,
--          gpus_never_active, start_ts, end_ts

SELECT
    cluster,
    job_id,
    user,
    account,
    state,
    gpus,
    alloc_gpu_h,
    idle_gpu_h,
    busy_mean,
    gpus_never_active,
    start_ts,
    end_ts
FROM job_usage
WHERE ($cluster IS NULL OR cluster = $cluster)
    AND ($start IS NULL OR end_ts IS NULL OR end_ts > $start OR start_ts >= $start)
    AND ($end IS NULL OR start_ts < $end)
ORDER BY idle_gpu_h DESC, cluster, job_id
LIMIT $limit
