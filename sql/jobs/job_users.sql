-- job_users: who owns each of some jobs, for the spool's check that a user reports throughput
-- only for their own jobs.
--
-- Grain:   one row per job id of $job_ids the lake knows on $cluster (latest version)
-- Reads:   jobs_latest
-- Params:
--   $cluster  the cluster
--   $job_ids  the job ids (a list of text)
-- Returns: job_id, user

SELECT job_id, user
FROM jobs_latest
WHERE cluster = $cluster
  AND list_contains($job_ids, job_id)
