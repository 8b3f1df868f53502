-- synthetic_jobs: one jobs row per job of the synthetic allocations (sql/bench/synthetic_job_gpus).
--
-- Grain:   one row per job_id of job_gpus
-- Reads:   job_gpus (the synthetic allocations, already landed)
-- Params:
--   $cluster  cluster name
--   $seed     the seed the allocations used
-- Returns: the jobs contract columns the marts read
--
-- Users and accounts are drawn by hash from 200 users in 20 accounts; every job completed.

SELECT
    CAST($cluster AS VARCHAR) AS cluster,
    job_id,
    'user' || CAST(CAST(hash(job_id, $seed) % 200 AS BIGINT) AS VARCHAR) AS user,
    'account' || CAST(CAST(hash(job_id, $seed) % 200 AS BIGINT) % 20 AS VARCHAR) AS account,
    'gpu' AS partition,
    'COMPLETED' AS state,
    min(start_ts) AS submit_ts,
    min(start_ts) AS start_ts,
    max(end_ts) AS end_ts,
    CAST(count(*) AS INTEGER) AS gpus,
    'synthetic' AS source,
    max(end_ts) AS updated_ts
FROM job_gpus
GROUP BY job_id
