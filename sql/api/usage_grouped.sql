-- usage_grouped: GPU-hours over whole UTC days, grouped by cluster, account, user or partition.
--
-- Grain:   one row per (cluster, group) — a NULL group is jobs the scheduler never reported
-- Reads:   job_gpu_shares, job_gpu_daily, jobs_latest
-- Params:
--   $group_by  'cluster', 'account', 'user' or 'partition'
--   $cluster   only this cluster, or NULL for every cluster
--   $user      only this user's jobs, or NULL for everyone's
--              (a user name matches in any case, as the API's viewers are named)
--   $start     first day counted (DATE)
--   $end       first day not counted (DATE)
-- Returns: cluster, group_value, jobs, alloc_gpu_h, observed_gpu_h, active_gpu_h, idle_gpu_h,
--          effective_gpu_h, energy_kwh
--
-- The usage_daily mart's rules (sql/marts/usage_daily.sql) with the job's partition kept:
-- allocated time, and the time a sample stands for, are cut at the window's midnights, and
-- allocated time is split among jobs sharing a GPU; energy counts on the day of its sample's
-- ts. So a window's GPU-hours per user equal the sum of usage_daily's days, and no job's
-- GPU-hours exceed what it held in the window.

WITH alloc AS (
    SELECT
        cluster,
        job_id,
        sum(
            (least(end_e, epoch(CAST($end AS TIMESTAMP)))
                - greatest(start_e, epoch(CAST($start AS TIMESTAMP))))
            * gpus * share
        ) AS alloc_s
    FROM job_gpu_shares
    WHERE end_e > epoch(CAST($start AS TIMESTAMP))
        AND start_e < epoch(CAST($end AS TIMESTAMP))
        AND ($cluster IS NULL OR cluster = $cluster)
    GROUP BY cluster, job_id
),
-- a day's part past its midnight (next_day_*; null in a file written before they were) counts
-- on the next day, in the window when that day is: the day before the window gives its part
used AS (
    SELECT
        cluster,
        job_id,
        sum(
            CASE WHEN date >= $start THEN observed_s - coalesce(next_day_s, 0) ELSE 0 END
            + CASE WHEN date + 1 < $end THEN coalesce(next_day_s, 0) ELSE 0 END
        ) AS observed_s,
        sum(
            CASE WHEN date >= $start THEN active_s - coalesce(next_day_active_s, 0) ELSE 0 END
            + CASE WHEN date + 1 < $end THEN coalesce(next_day_active_s, 0) ELSE 0 END
        ) AS active_s,
        sum(
            CASE WHEN date >= $start THEN idle_s - coalesce(next_day_idle_s, 0) ELSE 0 END
            + CASE WHEN date + 1 < $end THEN coalesce(next_day_idle_s, 0) ELSE 0 END
        ) AS idle_s,
        sum(
            CASE WHEN date >= $start THEN effective_s - coalesce(next_day_effective_s, 0) ELSE 0 END
            + CASE WHEN date + 1 < $end THEN coalesce(next_day_effective_s, 0) ELSE 0 END
        ) AS effective_s,
        -- energy counts on the day of its sample's ts
        sum(CASE WHEN date >= $start THEN energy_j END) AS energy_j
    FROM job_gpu_daily
    WHERE date >= CAST($start AS DATE) - 1 AND date < $end
        AND (date >= $start OR next_day_s > 0)
        AND ($cluster IS NULL OR cluster = $cluster)
    GROUP BY cluster, job_id
),
job_window AS (
    SELECT
        coalesce(a.cluster, u.cluster) AS cluster,
        coalesce(a.job_id, u.job_id) AS job_id,
        coalesce(a.alloc_s, 0) AS alloc_s,
        coalesce(u.observed_s, 0) AS observed_s,
        coalesce(u.active_s, 0) AS active_s,
        coalesce(u.idle_s, 0) AS idle_s,
        coalesce(u.effective_s, 0) AS effective_s,
        u.energy_j
    FROM alloc AS a
    FULL OUTER JOIN used AS u
        ON u.cluster = a.cluster AND u.job_id = a.job_id
)
SELECT
    w.cluster,
    CASE $group_by
        WHEN 'cluster' THEN w.cluster
        WHEN 'account' THEN j.account
        WHEN 'user' THEN j.user
        WHEN 'partition' THEN j.partition
    END AS group_value,
    count(*) AS jobs,
    sum(w.alloc_s) / 3600.0 AS alloc_gpu_h,
    sum(w.observed_s) / 3600.0 AS observed_gpu_h,
    -- what telemetry tells is unknown, not 0, where it saw none of the group's GPU time (and
    -- energy where no sample of it carried power)
    CASE WHEN sum(w.observed_s) > 0 THEN sum(w.active_s) / 3600.0 END AS active_gpu_h,
    CASE WHEN sum(w.observed_s) > 0 THEN sum(w.idle_s) / 3600.0 END AS idle_gpu_h,
    CASE WHEN sum(w.observed_s) > 0 THEN sum(w.effective_s) / 3600.0 END AS effective_gpu_h,
    sum(w.energy_j) / 3600000.0 AS energy_kwh
FROM job_window AS w
LEFT JOIN jobs_latest AS j
    ON j.cluster = w.cluster AND j.job_id = w.job_id
WHERE $user IS NULL OR lower(j.user) = lower($user)
GROUP BY ALL
ORDER BY w.cluster, alloc_gpu_h DESC, group_value NULLS LAST
