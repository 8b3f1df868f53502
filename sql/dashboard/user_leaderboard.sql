-- user_leaderboard: GPU-hours, waste and efficiency per user over a window.
--
-- Grain:   one row per (user, account)
-- Reads:   job_usage
-- Params:
--   $cluster  the cluster
--   $start    only jobs still running at or after this (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      only jobs started before this
--   $viewer   only this user, or NULL for everyone
--   $needle   lower-case text the user or account must contain ('' = any)
-- Returns: user, account, jobs, alloc_gpu_h, idle_gpu_h, effective_gpu_h, idle_share,
--          efficiency, gpus_never_active, energy_kwh, kg_co2e
--
-- efficiency = effective / observed GPU-hours (Σ busy × time over the time it was seen), so a
-- large job counts for what it held. kg_co2e: the known kg CO2e of the jobs (null: none known).

SELECT
    user,
    account,
    count(*) AS jobs,
    sum(alloc_gpu_h) AS alloc_gpu_h,
    sum(idle_gpu_h) AS idle_gpu_h,
    sum(effective_gpu_h) AS effective_gpu_h,
    sum(idle_gpu_h) / nullif(sum(observed_gpu_h), 0) AS idle_share,
    sum(effective_gpu_h) / nullif(sum(observed_gpu_h), 0) AS efficiency,
    sum(gpus_never_active) AS gpus_never_active,
    sum(energy_kwh) AS energy_kwh,
    sum(kg_co2e) AS kg_co2e
FROM job_usage
WHERE cluster = $cluster
    AND (end_ts IS NULL OR end_ts >= $start)
    AND start_ts < $end
    AND user IS NOT NULL
    AND ($viewer IS NULL OR user = $viewer)
    AND (
        $needle = ''
        OR contains(lower(user), $needle)
        OR contains(lower(coalesce(account, '')), $needle)
    )
GROUP BY user, account
ORDER BY alloc_gpu_h DESC NULLS LAST, user, account
