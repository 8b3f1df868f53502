-- user_daily_usage: one user's GPU-hours per UTC day — active, idle, and allocated but unseen.
--
-- Grain:   one row per date
-- Reads:   usage_daily
-- Params:
--   $cluster  the cluster
--   $user     the user
--   $start    inclusive lower bound on date (TIMESTAMP WITH TIME ZONE, UTC; its date counts)
--   $end      exclusive upper bound (its date does not count)
-- Returns: date, jobs, alloc_gpu_h, active_gpu_h, idle_gpu_h, effective_gpu_h, unobserved_gpu_h

SELECT
    date,
    sum(jobs) AS jobs,
    sum(alloc_gpu_h) AS alloc_gpu_h,
    sum(active_gpu_h) AS active_gpu_h,
    sum(idle_gpu_h) AS idle_gpu_h,
    sum(effective_gpu_h) AS effective_gpu_h,
    greatest(sum(alloc_gpu_h) - sum(observed_gpu_h), 0) AS unobserved_gpu_h
FROM usage_daily
WHERE cluster = $cluster
    AND user = $user
    AND date >= CAST($start AS DATE)
    AND date < CAST($end AS DATE)
GROUP BY date
ORDER BY date
