-- late_job_records: new versions of some finished jobs' records, as a scheduler's late
-- correction would land them (the bench's late-record step).
--
-- Grain:   one row per job, at most $jobs of them
-- Reads:   jobs_latest
-- Params:
--   $jobs     how many jobs (the finished ones with the smallest job_id first)
--   $account  the account the new records move them to
-- Returns: every column of jobs
--
-- Each keeps everything but its account, and is one second newer than the record it replaces.

SELECT
    * REPLACE (
        CAST($account AS VARCHAR) AS account,
        updated_ts + INTERVAL 1 SECOND AS updated_ts
    )
FROM jobs_latest
WHERE end_ts IS NOT NULL
ORDER BY cluster, job_id
LIMIT $jobs
