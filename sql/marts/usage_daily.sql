-- usage_daily: GPU-hours per UTC day, account and user — allocated, observed, active, idle.
--
-- Grain:   one row per (cluster, date, account, user)
-- Reads:   job_gpu_shares, job_gpu_daily, jobs_latest, job_co2e_hourly
-- Params:  none
-- Returns: cluster, date, account, user, jobs, alloc_gpu_h, observed_gpu_h, active_gpu_h,
--          idle_gpu_h, effective_gpu_h, energy_kwh, shared, kg_co2e
--
-- Allocation intervals that cross midnight are split at 00:00 UTC, and so is the time a sample
-- stands for (its energy counts on the day of its ts). Jobs the scheduler never reported have
-- a null account and user. shared: some of the GPU time (observed or allocated) was on a GPU
-- shared by several jobs at once, split evenly among them (an estimate). energy_kwh: of the
-- jobs whose samples carried power or an energy counter; null (unknown, not 0) where none of
-- the row's did. kg_co2e: the day's energy of the jobs, each hour's at that hour's carbon
-- intensity (job_co2e_hourly); null when no job had energy data that day or an hour of it has
-- no intensity configured.

WITH alloc_days AS (
    SELECT
        i.cluster,
        i.job_id,
        CAST(day_n AS BIGINT) AS day_n,
        (least(i.end_e, (day_n + 1) * 86400.0) - greatest(i.start_e, day_n * 86400.0))
            * i.gpus * i.share AS alloc_s,
        i.sharers
    FROM job_gpu_shares AS i,
        unnest(generate_series(
            CAST(floor(i.start_e / 86400.0) AS BIGINT),
            CAST(floor(i.end_e / 86400.0) AS BIGINT)
        )) AS days(day_n)
),
alloc AS (
    SELECT
        cluster,
        job_id,
        DATE '1970-01-01' + CAST(day_n AS INTEGER) AS date,
        sum(alloc_s) AS alloc_s,
        max(CASE WHEN sharers > 1 THEN 1 ELSE 0 END) AS split
    FROM alloc_days
    WHERE alloc_s > 0
    GROUP BY cluster, job_id, day_n
),
-- a day's time is what its samples stand for within it: the part of its last sample past
-- midnight (next_day_*; null in a file written before they were) counts on the next day
day_parts AS (
    SELECT
        cluster,
        job_id,
        date,
        observed_s - coalesce(next_day_s, 0) AS observed_s,
        active_s - coalesce(next_day_active_s, 0) AS active_s,
        idle_s - coalesce(next_day_idle_s, 0) AS idle_s,
        effective_s - coalesce(next_day_effective_s, 0) AS effective_s,
        energy_j,
        shared_s - coalesce(next_day_shared_s, 0) AS shared_s
    FROM job_gpu_daily
    UNION ALL
    SELECT
        cluster,
        job_id,
        date + 1,
        next_day_s,
        next_day_active_s,
        next_day_idle_s,
        next_day_effective_s,
        NULL,  -- (energy counts on the day of its sample's ts)
        next_day_shared_s
    FROM job_gpu_daily
    WHERE next_day_s > 0
),
used AS (
    SELECT
        cluster,
        job_id,
        date,
        sum(observed_s) AS observed_s,
        sum(active_s) AS active_s,
        sum(idle_s) AS idle_s,
        sum(effective_s) AS effective_s,
        sum(energy_j) AS energy_j,
        sum(shared_s) AS shared_s
    FROM day_parts
    GROUP BY cluster, job_id, date
),
co2e AS (
    SELECT
        cluster,
        job_id,
        date,
        sum(energy_j * g_per_kwh) / 3.6e9 AS kg_co2e,
        count(*) FILTER (WHERE g_per_kwh IS NULL) AS unknown_hours
    FROM job_co2e_hourly
    GROUP BY cluster, job_id, date
),
job_days AS (
    SELECT
        coalesce(a.cluster, u.cluster) AS cluster,
        coalesce(a.job_id, u.job_id) AS job_id,
        coalesce(a.date, u.date) AS date,
        coalesce(a.alloc_s, 0) AS alloc_s,
        coalesce(u.observed_s, 0) AS observed_s,
        coalesce(u.active_s, 0) AS active_s,
        coalesce(u.idle_s, 0) AS idle_s,
        coalesce(u.effective_s, 0) AS effective_s,
        u.energy_j,
        coalesce(u.shared_s, 0) AS shared_s,
        coalesce(a.split, 0) AS split,
        c.kg_co2e,
        c.unknown_hours
    FROM alloc AS a
    FULL OUTER JOIN used AS u
        ON u.cluster = a.cluster AND u.job_id = a.job_id AND u.date = a.date
    LEFT JOIN co2e AS c
        ON c.cluster = coalesce(a.cluster, u.cluster)
        AND c.job_id = coalesce(a.job_id, u.job_id)
        AND c.date = coalesce(a.date, u.date)
)
SELECT
    d.cluster,
    d.date,
    j.account,
    j.user,
    count(DISTINCT d.job_id) AS jobs,
    sum(d.alloc_s) / 3600.0 AS alloc_gpu_h,
    sum(d.observed_s) / 3600.0 AS observed_gpu_h,
    sum(d.active_s) / 3600.0 AS active_gpu_h,
    sum(d.idle_s) / 3600.0 AS idle_gpu_h,
    sum(d.effective_s) / 3600.0 AS effective_gpu_h,
    sum(d.energy_j) / 3600000.0 AS energy_kwh,
    sum(d.shared_s) > 0 OR max(d.split) = 1 AS shared,
    CASE WHEN coalesce(sum(d.unknown_hours), 0) = 0 THEN sum(d.kg_co2e) END AS kg_co2e
FROM job_days AS d
LEFT JOIN jobs_latest AS j
    ON j.cluster = d.cluster AND j.job_id = d.job_id
GROUP BY d.cluster, d.date, j.account, j.user
ORDER BY d.cluster, d.date, j.account, j.user
