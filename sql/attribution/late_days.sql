-- late_days: the UTC days whose summary rows late scheduler records can change — every day
-- their jobs held GPUs, ran or had samples on, as the records had them and as they have them.
--
-- Grain:   one row per (cluster, date)
-- Reads:   late_jobs (cluster, job_id: the jobs in new scheduler batches),
--          late_jobs_latest and late_job_gpu_intervals (of those jobs, from every record now),
--          jobs_latest_before and job_gpu_intervals_before (every job, as last built),
--          summary_index (what each day's samples hold, now), cluster_data_end (the data's end)
-- Params:  none
-- Returns: cluster, date
--
-- A job still running counts to the end of the data. The days between the data's old and new
-- end are the update's already (open allocations run to it).

-- (the end of the data that open allocations run to, as the marts read it: cluster_data_end)
WITH data_end AS (
    SELECT * FROM cluster_data_end
),
job_rows AS (
    SELECT * FROM late_jobs_latest
    UNION ALL
    SELECT b.*
    FROM jobs_latest_before AS b
    JOIN late_jobs AS l
        ON l.cluster = b.cluster AND l.job_id = b.job_id
),
spans AS (
    SELECT
        cluster,
        start_e,
        end_e
    FROM late_job_gpu_intervals
    UNION ALL
    SELECT
        b.cluster,
        b.start_e,
        b.end_e
    FROM job_gpu_intervals_before AS b
    JOIN late_jobs AS l
        ON l.cluster = b.cluster AND l.job_id = b.job_id
    UNION ALL
    SELECT
        j.cluster,
        epoch(j.start_ts) AS start_e,
        greatest(
            epoch(j.start_ts), coalesce(epoch(j.end_ts), d.end_e, epoch(j.updated_ts))
        ) AS end_e
    FROM job_rows AS j
    LEFT JOIN data_end AS d
        ON d.cluster = j.cluster
    WHERE j.start_ts IS NOT NULL
)
SELECT
    s.cluster,
    DATE '1970-01-01' + CAST(day_n AS INTEGER) AS date
FROM spans AS s,
    unnest(generate_series(
        CAST(floor(s.start_e / 86400.0) AS BIGINT),
        CAST(floor(s.end_e / 86400.0) AS BIGINT)
    )) AS days(day_n)
UNION
SELECT
    i.cluster,
    i.date
FROM summary_index AS i
JOIN late_jobs AS l
    ON l.cluster = i.cluster AND l.job_id = i.job_id
