-- scope_week_jobs: every job whose fairness_weekly spans reach a week in scope — what the
-- rows of those weeks read, whichever jobs changed.
--
-- Grain:   one row per (cluster, job_id)
-- Reads:   scope_weeks (cluster, first_week_n, last_week_n), jobs_latest, job_gpu_intervals,
--          cluster_data_end (for the end of the data only)
-- Params:  none
-- Returns: cluster, job_id
--
-- A job's spans are its GPU intervals and its own row (start, or end if that comes first, to
-- its end, the end of the data while it runs), as fairness_weekly reads them.

-- (the end of the data that open allocations run to, as the marts read it: cluster_data_end)
WITH data_end AS (
    SELECT * FROM cluster_data_end
),
spans AS (
    SELECT
        cluster,
        job_id,
        start_e AS first_e,
        end_e AS last_e
    FROM job_gpu_intervals
    UNION ALL
    SELECT
        j.cluster,
        j.job_id,
        least(epoch(j.start_ts), coalesce(epoch(j.end_ts), epoch(j.start_ts))) AS first_e,
        greatest(
            epoch(j.start_ts), coalesce(epoch(j.end_ts), d.end_e, epoch(j.updated_ts))
        ) AS last_e
    FROM jobs_latest AS j
    LEFT JOIN data_end AS d
        ON d.cluster = j.cluster
    WHERE j.start_ts IS NOT NULL
)
SELECT DISTINCT
    s.cluster,
    s.job_id
FROM spans AS s
JOIN scope_weeks AS w
    ON w.cluster = s.cluster
WHERE CAST(floor((s.first_e - 345600.0) / 604800.0) AS BIGINT) <= w.last_week_n
    AND CAST(floor((s.last_e - 345600.0) / 604800.0) AS BIGINT) >= w.first_week_n
