-- user_leaderboard: GPU-hours, waste and efficiency per user over a window.
--
-- Grain:   one row per (user, account)
-- Reads:   usage_daily, job_usage
-- Params:
--   $cluster  the cluster
--   $start    the window's first day (TIMESTAMP WITH TIME ZONE, UTC midnight; its date counts)
--   $end      the window's end (exclusive; its date does not count)
--   $viewer   only this user, or NULL for everyone
--             (a user name matches in any case)
--   $needle   lower-case text the user or account must contain ('' = any)
-- Returns: user, account, jobs, alloc_gpu_h, observed_gpu_h, idle_gpu_h, effective_gpu_h,
--          idle_share, efficiency, gpus_never_active, energy_kwh, kg_co2e
--
-- The GPU-hours are those inside the window (usage_daily's days), so the users add up to the
-- Overview's and never exceed the GPUs × hours of the window; a job running across its edges
-- counts for its part inside. jobs and gpus_never_active are of the jobs that ran in the
-- window. efficiency = effective / observed GPU-hours (Σ busy × time over the time it was
-- seen), so a large job counts for what it held. kg_co2e: the known kg CO2e (null: none known).
-- observed_gpu_h: the part telemetry saw; idle, effective GPU-hours and kWh are unknown (null)
-- where it saw none (a cluster with its scheduler's records alone), not 0.

WITH used AS (
    SELECT
        user,
        account,
        sum(alloc_gpu_h) AS alloc_gpu_h,
        sum(observed_gpu_h) AS observed_gpu_h,
        sum(idle_gpu_h) AS idle_gpu_h,
        sum(effective_gpu_h) AS effective_gpu_h,
        sum(energy_kwh) AS energy_kwh,
        sum(kg_co2e) AS kg_co2e
    FROM usage_daily
    WHERE cluster = $cluster
        AND date >= CAST($start AS DATE)
        AND date < CAST($end AS DATE)
        AND user IS NOT NULL
        AND ($viewer IS NULL OR lower(user) = lower($viewer))
    GROUP BY user, account
),
ran AS (
    SELECT
        user,
        account,
        count(*) AS jobs,
        sum(gpus_never_active) AS gpus_never_active
    FROM job_usage
    WHERE cluster = $cluster
        AND (end_ts IS NULL OR end_ts > $start OR start_ts >= $start)
        AND start_ts < $end
        AND user IS NOT NULL
        AND ($viewer IS NULL OR lower(user) = lower($viewer))
    GROUP BY user, account
)
SELECT
    coalesce(r.user, u.user) AS user,
    coalesce(r.account, u.account) AS account,
    coalesce(r.jobs, 0) AS jobs,
    u.alloc_gpu_h,
    u.observed_gpu_h,
    CASE WHEN u.observed_gpu_h > 0 THEN u.idle_gpu_h END AS idle_gpu_h,
    CASE WHEN u.observed_gpu_h > 0 THEN u.effective_gpu_h END AS effective_gpu_h,
    u.idle_gpu_h / nullif(u.observed_gpu_h, 0) AS idle_share,
    u.effective_gpu_h / nullif(u.observed_gpu_h, 0) AS efficiency,
    r.gpus_never_active,
    CASE WHEN u.observed_gpu_h > 0 THEN u.energy_kwh END AS energy_kwh,
    u.kg_co2e
FROM ran AS r
FULL JOIN used AS u
    ON u.user = r.user
    AND u.account IS NOT DISTINCT FROM r.account
WHERE $needle = ''
    OR contains(lower(coalesce(r.user, u.user)), $needle)
    OR contains(lower(coalesce(r.account, u.account, '')), $needle)
ORDER BY u.alloc_gpu_h DESC NULLS LAST, user, account
