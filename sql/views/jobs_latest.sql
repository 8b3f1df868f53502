-- jobs_latest: the newest version of every job (a collector lands a new row each time a job changes).
--
-- Grain:   one row per (cluster, job_id)
-- Reads:   jobs
-- Params:  none
-- Returns: every column of jobs

SELECT
    *
FROM jobs
QUALIFY row_number() OVER (PARTITION BY cluster, job_id ORDER BY updated_ts DESC) = 1
