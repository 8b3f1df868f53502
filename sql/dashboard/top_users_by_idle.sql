-- top_users_by_idle: the users whose jobs left the most allocated GPU-hours idle.
--
-- Grain:   one row per (cluster, user)
-- Reads:   job_usage
-- Params:
--   $cluster  the cluster to rank, or NULL for every cluster
--   $start    only jobs running after this, or starting at or after it (one that ran before and ended at it ran none of the window) (TIMESTAMP WITH TIME ZONE), or NULL
--   $end      only jobs started before this, or NULL
--   $limit    how many users to return
-- Returns: cluster, user, account, jobs, alloc_gpu_h, idle_gpu_h, idle_share, busy_mean,
--          gpus_never_active, energy_kwh
--
-- busy_mean is weighted by observed GPU-hours, so one large job counts for what it held.

SELECT
    cluster,
    user,
    min(account) AS account,
    count(*) AS jobs,
    sum(alloc_gpu_h) AS alloc_gpu_h,
    sum(idle_gpu_h) AS idle_gpu_h,
    sum(idle_gpu_h) / nullif(sum(observed_gpu_h), 0) AS idle_share,
    sum(effective_gpu_h) / nullif(sum(observed_gpu_h), 0) AS busy_mean,
    sum(gpus_never_active) AS gpus_never_active,
    sum(energy_kwh) AS energy_kwh
FROM job_usage
WHERE ($cluster IS NULL OR cluster = $cluster)
    AND ($start IS NULL OR end_ts IS NULL OR end_ts > $start OR start_ts >= $start)
    AND ($end IS NULL OR start_ts < $end)
    AND user IS NOT NULL
GROUP BY cluster, user
ORDER BY idle_gpu_h DESC, cluster, user
LIMIT $limit
