-- window_jobs: the GPU jobs that started in the window, with their waits and their spans.
--
-- Grain:   one row per (cluster, job_id) with GPUs that started in [$since, $until)
-- Reads:   jobs_latest, data_extent
-- Params:
--   $since  inclusive lower bound on job start (TIMESTAMP, UTC)
--   $until  exclusive upper bound on job start
-- Returns: cluster, job_id, user, account, partition, state, gpus, cpus, interactive,
--          submit_e, start_e, end_e
--
-- Times are epoch seconds. A job still running ends at the end of its cluster's data
-- (sql/views/data_extent.sql: its samples, scheduler records and events, never the wall clock);
-- a job without a submit time was submitted when it started (no wait).

WITH data_end AS (
    SELECT
        cluster,
        epoch(data_end) AS end_e
    FROM data_extent
)
SELECT
    j.cluster,
    j.job_id,
    j.user,
    j.account,
    j.partition,
    j.state,
    coalesce(j.gpus, 1) AS gpus,
    j.cpus,
    coalesce(j.interactive, false) AS interactive,
    least(coalesce(epoch(j.submit_ts), epoch(j.start_ts)), epoch(j.start_ts)) AS submit_e,
    epoch(j.start_ts) AS start_e,
    greatest(coalesce(epoch(j.end_ts), e.end_e, epoch($until)), epoch(j.start_ts)) AS end_e
FROM jobs_latest AS j
LEFT JOIN data_end AS e
    ON e.cluster = j.cluster
WHERE j.start_ts >= $since
    AND j.start_ts < $until
    AND coalesce(j.gpus, 1) > 0
ORDER BY j.cluster, j.job_id
