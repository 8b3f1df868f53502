-- data_weeks: the ISO weeks each cluster has data for, and where its data end — to choose the
-- report's default week and to name the weeks with data when a week without any is asked for.
--
-- Grain:   one row per (cluster, week)
-- Reads:   fairness_weekly, jobs_latest, gpu_job_buckets, data_extent
-- Params:  none
-- Returns: cluster, week (its Monday, DATE), data_end_e (epoch seconds: data_extent's end of
--          the cluster's data, every rule's "now": its last sample interval's end, or a later
--          scheduler record's time, its collection included), data_start_e (where its
--          data begin: a week before it is covered only from then)
--
-- A week has data where fairness_weekly has GPU-hours allocated or observed in it (the weeks
-- the report's trends count) and something was recorded inside it: a sample taken at or after
-- its Monday 00:00 (its 5-minute bucket starts there or later), or a job submitted, started or
-- ended after it. So the week that begins as the data end holds only their closing instant and
-- has none: a job that ended exactly at Monday 00:00 (the unused part of its limit is booked to
-- that week), or the last samples' intervals (and running jobs, counted to the end of the data)
-- reaching a few seconds past it. Jobs merely submitted or queued in a week (e.g. before the
-- first telemetry) do not make it a week with data.

WITH weeks AS (
    SELECT
        cluster,
        week
    FROM fairness_weekly
    WHERE level = 'account'
    GROUP BY cluster, week
    HAVING sum(alloc_gpu_h) > 0 OR sum(observed_gpu_h) > 0
),
-- per source: where its data end, and the latest instant it recorded (a sample's bucket start:
-- a sample was taken at or after it; a job's latest submit, start or end)
ends AS (
    SELECT
        cluster,
        -- (a time after tomorrow is a wrong clock's, as data_extent takes it)
        max(epoch(greatest(submit_ts, start_ts, end_ts)))
            FILTER (WHERE greatest(submit_ts, start_ts, end_ts) < date_trunc('day', now()) + INTERVAL 2 DAY) AS job_record_e,
        CAST(NULL AS DOUBLE) AS sampled_from_e
    FROM jobs_latest
    GROUP BY cluster
    UNION ALL
    SELECT
        cluster,
        CAST(NULL AS DOUBLE) AS job_record_e,
        max(epoch(bucket)) AS sampled_from_e
    FROM gpu_job_buckets
    GROUP BY cluster
),
recorded AS (
    SELECT
        cluster,
        max(job_record_e) AS job_record_e,
        max(sampled_from_e) AS sampled_from_e
    FROM ends
    GROUP BY cluster
)
-- (the report's "now" is every rule's: its own end of the data, from submit, start and end
-- alone, ended hours before the running jobs it counted, and named a job cancelled while it
-- waited as still queued there)
SELECT
    w.cluster,
    w.week,
    epoch(x.data_end) AS data_end_e,
    epoch(x.data_start) AS data_start_e
FROM weeks AS w
JOIN recorded AS d
    ON d.cluster = w.cluster
JOIN data_extent AS x
    ON x.cluster = w.cluster
WHERE epoch(CAST(w.week AS TIMESTAMP)) <= d.sampled_from_e
    OR epoch(CAST(w.week AS TIMESTAMP)) < d.job_record_e
ORDER BY w.cluster, w.week
