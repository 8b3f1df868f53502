-- job_owner: who one job belongs to, as jobs_latest has it: what the API checks before it
-- builds the job's report for a user.
--
-- Grain:   one row per cluster holding the job (at most one where $cluster is given)
-- Reads:   jobs_latest
-- Params:
--   $cluster  the cluster
--   $job_id   the job id (Slurm array tasks as 1234_7), as jobs/job_detail matches it
-- Returns: user

SELECT user
FROM jobs_latest
WHERE cluster = $cluster AND job_id = $job_id
