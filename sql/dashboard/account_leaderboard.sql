-- account_leaderboard: GPU-hours, waste and efficiency per account over a window.
--
-- Grain:   one row per account
-- Reads:   usage_daily, job_usage
-- Params:
--   $cluster  the cluster
--   $start    the window's first day (TIMESTAMP WITH TIME ZONE, UTC midnight; its date counts)
--   $end      the window's end (exclusive; its date does not count)
--   $viewer   only this user's jobs, or NULL for everyone's
--             (a user name matches in any case)
-- Returns: account, users, jobs, alloc_gpu_h, observed_gpu_h, idle_gpu_h, effective_gpu_h,
--          idle_share, efficiency, energy_kwh, kg_co2e (the known kg CO2e of the jobs; null:
--          none known)
--
-- The GPU-hours are those inside the window (usage_daily's days), so the accounts add up to
-- the Overview's and never exceed the GPUs × hours of the window; a job running across its
-- edges counts for its part inside. users and jobs count those that ran in the window.
-- observed_gpu_h: the part telemetry saw; idle, effective GPU-hours and kWh are unknown (null)
-- where it saw none (a cluster with its scheduler's records alone), not 0.

WITH used AS (
    SELECT
        coalesce(account, '(none)') AS account,
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
        AND ($viewer IS NULL OR lower(user) = lower($viewer))
    GROUP BY coalesce(account, '(none)')
),
ran AS (
    SELECT
        coalesce(account, '(none)') AS account,
        count(DISTINCT user) AS users,
        count(*) AS jobs
    FROM job_usage
    WHERE cluster = $cluster
        AND (end_ts IS NULL OR end_ts > $start OR start_ts >= $start)
        AND start_ts < $end
        AND ($viewer IS NULL OR lower(user) = lower($viewer))
    GROUP BY coalesce(account, '(none)')
)
SELECT
    coalesce(r.account, u.account) AS account,
    coalesce(r.users, 0) AS users,
    coalesce(r.jobs, 0) AS jobs,
    u.alloc_gpu_h,
    u.observed_gpu_h,
    CASE WHEN u.observed_gpu_h > 0 THEN u.idle_gpu_h END AS idle_gpu_h,
    CASE WHEN u.observed_gpu_h > 0 THEN u.effective_gpu_h END AS effective_gpu_h,
    u.idle_gpu_h / nullif(u.observed_gpu_h, 0) AS idle_share,
    u.effective_gpu_h / nullif(u.observed_gpu_h, 0) AS efficiency,
    CASE WHEN u.observed_gpu_h > 0 THEN u.energy_kwh END AS energy_kwh,
    u.kg_co2e
FROM ran AS r
FULL JOIN used AS u
    ON u.account = r.account
ORDER BY u.alloc_gpu_h DESC NULLS LAST, account
