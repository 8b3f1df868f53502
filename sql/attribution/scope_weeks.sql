-- scope_weeks: the ISO weeks whose fairness_weekly rows a change of some days can alter, per
-- cluster, as one range of week numbers (week n starts on Monday n × 604800 + 345600).
--
-- Grain:   one row per cluster
-- Reads:   scope_days (cluster, date, start_e, end_e: the days to update), scope_jobs,
--          jobs_latest and job_gpu_intervals (of the jobs in scope at least, as they are now),
--          cluster_data_end (for the end of the data only)
-- Params:  none
-- Returns: cluster, first_week_n, last_week_n
--
-- A week's rows read the week's days of usage_daily and the jobs whose spans reach it, so the
-- weeks in scope are those of the days to update and every week a job in scope spans the way
-- fairness_weekly spans it: from its start (or its end, if that comes first) to its end, the
-- end of the data while it runs.

-- (the end of the data that open allocations run to, as the marts read it: cluster_data_end)
WITH data_end AS (
    SELECT * FROM cluster_data_end
),
reach AS (
    SELECT
        cluster,
        start_e AS first_e,
        start_e AS last_e
    FROM scope_days
    UNION ALL
    SELECT
        i.cluster,
        i.start_e AS first_e,
        i.end_e AS last_e
    FROM job_gpu_intervals AS i
    JOIN scope_jobs AS s
        ON s.cluster = i.cluster AND s.job_id = i.job_id
    UNION ALL
    SELECT
        j.cluster,
        least(epoch(j.start_ts), coalesce(epoch(j.end_ts), epoch(j.start_ts))) AS first_e,
        greatest(
            epoch(j.start_ts), coalesce(epoch(j.end_ts), d.end_e, epoch(j.updated_ts))
        ) AS last_e
    FROM jobs_latest AS j
    JOIN scope_jobs AS s
        ON s.cluster = j.cluster AND s.job_id = j.job_id
    LEFT JOIN data_end AS d
        ON d.cluster = j.cluster
    WHERE j.start_ts IS NOT NULL
)
SELECT
    cluster,
    CAST(floor((min(first_e) - 345600.0) / 604800.0) AS BIGINT) AS first_week_n,
    CAST(floor((max(last_e) - 345600.0) / 604800.0) AS BIGINT) AS last_week_n
FROM reach
GROUP BY cluster
