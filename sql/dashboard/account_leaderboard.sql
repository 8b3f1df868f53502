-- account_leaderboard: GPU-hours, waste and efficiency per account over a window.
--
-- Grain:   one row per account
-- Reads:   job_usage
-- Params:
--   $cluster  the cluster
--   $start    only jobs still running at or after this (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      only jobs started before this
--   $viewer   only this user's jobs, or NULL for everyone's
-- Returns: account, users, jobs, alloc_gpu_h, idle_gpu_h, effective_gpu_h, idle_share,
--          efficiency, energy_kwh, kg_co2e (the known kg CO2e of the jobs; null: none known)

SELECT
    coalesce(account, '(none)') AS account,
    count(DISTINCT user) AS users,
    count(*) AS jobs,
    sum(alloc_gpu_h) AS alloc_gpu_h,
    sum(idle_gpu_h) AS idle_gpu_h,
    sum(effective_gpu_h) AS effective_gpu_h,
    sum(idle_gpu_h) / nullif(sum(observed_gpu_h), 0) AS idle_share,
    sum(effective_gpu_h) / nullif(sum(observed_gpu_h), 0) AS efficiency,
    sum(energy_kwh) AS energy_kwh,
    sum(kg_co2e) AS kg_co2e
FROM job_usage
WHERE cluster = $cluster
    AND (end_ts IS NULL OR end_ts >= $start)
    AND start_ts < $end
    AND ($viewer IS NULL OR user = $viewer)
GROUP BY coalesce(account, '(none)')
ORDER BY alloc_gpu_h DESC NULLS LAST, account
